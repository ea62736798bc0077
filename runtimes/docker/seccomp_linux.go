package docker

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// setIDModeArgs are the system calls that set a file's mode, and the
// argument that holds the mode.
var setIDModeArgs = map[string]uint{
	"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"creat": 1, "open": 2, "openat": 3,
	"mknod": 1, "mknodat": 2,
}

// seccompProfile is Docker's default profile (the engine's own, from
// moby/profiles) with one rule more: no file gets a setuid or setgid bit.
// Root in a container is root on the host's files of a bind-mounted
// workspace, and a setuid-root program left there would be a way to root
// for anyone on the host who runs it; no-new-privileges protects only the
// container. openat2, whose mode is out of a filter's reach, fails with
// ENOSYS, and callers fall back to openat.
var seccompProfile = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	for _, sc := range p.Syscalls {
		if sc.Action == specs.ActAllow && len(sc.Args) == 0 {
			sc.Names = slices.DeleteFunc(sc.Names, func(n string) bool {
				_, mode := setIDModeArgs[n]
				return mode || n == "openat2"
			})
		}
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(sc *seccomp.Syscall) bool { return len(sc.Names) == 0 && sc.Name == "" })
	for _, name := range slices.Sorted(maps.Keys(setIDModeArgs)) {
		p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
			Names:  []string{name},
			Action: specs.ActAllow,
			Args:   []specs.LinuxSeccompArg{{Index: setIDModeArgs[name], Value: unix.S_ISUID | unix.S_ISGID, ValueTwo: 0, Op: specs.OpMaskedEqual}},
		}})
	}
	enosys := uint(unix.ENOSYS)
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
		Names: []string{"openat2"}, Action: specs.ActErrno, ErrnoRet: &enosys,
	}})
	b, err := json.Marshal(p)
	return string(b), err
})

// SeccompProfile is the seccomp profile of this runtime's containers, as
// HostConfig.SecurityOpt's "seccomp=" takes it: Docker's default with no
// set-id bits on any file. Runtimes that start containers of their own
// (devcontainer) use it too.
func SeccompProfile() (string, error) { return seccompProfile() }
