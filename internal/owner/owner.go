// Package owner names the execbox process that holds a sandbox, and keeps
// a directory of records, one per live sandbox, each naming its owner:
// after that process dies without closing its sandboxes (kill -9, a
// crash, the machine's OOM killer), another execbox process finds what
// it left and removes it (a runtime's sweep), or says which sandboxes
// were lost (the server after a restart).
//
// An owner is "HOST/PIDNS/PID/START": the host name, the PID namespace
// ("pid:[4026531836]"), the PID and its start time in clock ticks since
// boot, so that a reused PID is not mistaken for the owner. It is also
// the docker runtime's dev.execbox.owner label.
package owner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Self names this process as an owner.
var Self = sync.OnceValue(func() string { return Of(os.Getpid()) })

// Of names process pid of this PID namespace as an owner.
func Of(pid int) string {
	host, _ := os.Hostname()
	return host + "/" + pidNS() + "/" + strconv.Itoa(pid) + "/" + StartTime(pid)
}

// pidNS names this process's PID namespace ("pid:[4026531836]"), "" where
// there is no /proc.
func pidNS() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// StartTime is the start time of process pid in clock ticks since boot
// (field 22 of /proc/PID/stat), "" if it does not exist.
func StartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// Alive reports whether owner names a process that still runs, or one
// this process cannot judge: of another host or PID namespace (another
// execbox in another container sharing a Docker engine or a directory),
// or malformed. Only an owner known dead is false, so that nothing of a
// live process is ever removed.
func Alive(owner string) bool {
	host, _ := os.Hostname()
	f := strings.Split(owner, "/")
	if len(f) != 4 || f[0] != host || f[1] == "" || f[1] != pidNS() {
		return true
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil || pid <= 0 {
		return true
	}
	return f[3] != "" && StartTime(pid) == f[3]
}

// DefaultDir is the default state directory of part ("local",
// "server"): /run/execbox/PART for root; for another user
// $XDG_RUNTIME_DIR/execbox/PART, or TMPDIR/execbox-UID/PART without one
// (OpenDir refuses it if another user made it first).
func DefaultDir(part string) string {
	if os.Geteuid() == 0 {
		return filepath.Join("/run/execbox", part)
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "execbox", part)
	}
	return filepath.Join(os.TempDir(), "execbox-"+strconv.Itoa(os.Geteuid()), part)
}
