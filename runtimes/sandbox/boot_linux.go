package sandbox

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/fds"
	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
)

// The boundary's processes are re-executions of the current binary,
// recognised by argv[0] in this package's init (as internal/agent/proc's rlimit
// shim is): the host starts initArg0, which starts agentArg0.
const (
	initArg0   = "execbox-sandbox-init"
	agentArg0  = "execbox-sandbox-agent"
	usernsArg0 = "execbox-sandbox-userns"
)

// Descriptors the host passes to the init (exec.Cmd.ExtraFiles from 3).
const (
	// fdConfig is a unix socket on which the host sends, once the init
	// started, the agent's listening socket, the workspace's detached,
	// idmapped mount (if any) and the image's root (if any) as SCM_RIGHTS on one byte, then the
	// bootConfig as JSON.
	fdConfig = 3
	fdStatus = 4 // write end of a pipe: "ok\n" or the setup error
)

// fdListener is where the agent finds its listening unix socket.
const fdListener = 5

// fdCgroup is the first of the descriptors the init passes to the agent
// for its writable handles on the sandbox's cgroup (one per v1
// controller, in sorted order, or one for v2): detached mounts, reached
// by no path, so that only the agent can write the cgroup tree while
// commands see it read-only at /sys/fs/cgroup.
const fdCgroup = 6

// agentCgroupPaths returns the agent's paths of the "cmds" and "agent"
// children of the sandbox's cgroup directories dirs (by controller, or
// "" on v2): below its handles on them, which the init passes at
// fdCgroup on in sorted controller order (cgroupHandles).
func agentCgroupPaths(dirs map[string]string) (cmds, home map[string]string) {
	cmds, home = map[string]string{}, map[string]string{}
	for i, ctrl := range slices.Sorted(maps.Keys(dirs)) {
		p := "/proc/self/fd/" + strconv.Itoa(fdCgroup+i)
		cmds[ctrl], home[ctrl] = p+"/"+cgroups.CmdsDir, p+"/"+cgroups.AgentDir
	}
	return cmds, home
}

// agentConfigEnv carries the agentConfig from the init to the agent; the
// agent removes it from its environment before anything reads it.
const agentConfigEnv = "_EXECBOX_SANDBOX_AGENT"

// bootConfig is what the init needs to build the boundary.
type bootConfig struct {
	ID string `json:"id"`
	// Root is the empty host directory on which the new root is built.
	// The init, nobody on the host, must be able to reach it: the state
	// directory and its parents are searchable by others.
	Root string `json:"root"`
	// RootFS, if set, is the directory whose entries make the root
	// instead of the host's system directories.
	RootFS string `json:"rootfs,omitempty"`
	// RootFD: the root is an image's, the host's detached overlay mount
	// (imageRootMount), received with the config and moved onto Root;
	// it stays writable.
	RootFD bool `json:"root_fd,omitempty"`
	// ReadOnly are host paths mounted read-only at the same place.
	ReadOnly []string `json:"read_only"`
	// Workspace is the host workspace, bound when no idmapped mount
	// is passed (WorkspaceFD).
	Workspace   string `json:"workspace"`
	WorkspaceFD bool   `json:"workspace_fd"`
	// Bound is how a rootless init binds or makes the workspace.
	Bound boundWorkspace `json:"bound"`
	// OneUID: rootless with one uid mapped (the command user's, to the
	// host user who runs execbox); the init and agent keep it instead of
	// AgentID.
	OneUID   bool    `json:"one_uid,omitempty"`
	TmpSize  int64   `json:"tmp_size"`
	ShmSize  int64   `json:"shm_size"`
	Network  Network `json:"network"`
	Hostname string  `json:"hostname"`
	// UID and GID are the default command user, inside.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Cgroup is the sandbox's cgroup: version and host directories.
	CgroupVersion int               `json:"cgroup_version"`
	CgroupDirs    map[string]string `json:"cgroup_dirs"`
	// CgroupInAgent: the init started in the "agent" child of
	// CgroupDirs (v1, cgroups.Sandbox.EnterAgent), not at its top.
	CgroupInAgent bool `json:"cgroup_in_agent,omitempty"`
	// Agent is the agentConfig, as JSON: the init passes it on as it is.
	Agent json.RawMessage `json:"agent"`
	Env   []string        `json:"env"`
	// Seccomp is the filter the init installs for the agent and every
	// command, compiled by the host once per Runtime
	// (seccomp.Filter.Bytes).
	Seccomp []byte `json:"seccomp"`

	// cgroupHandles are the detached mounts of CgroupDirs that the init
	// opens for the agent (see fdCgroup), in sorted controller order.
	cgroupHandles []*os.File
	// listener, wsMount and rootMount are the descriptors received with
	// the config (see fdConfig); wsMount is -1 without WorkspaceFD,
	// rootMount without RootFD.
	listener  *os.File
	wsMount   int
	rootMount int
}

// boundWorkspace is a workspace that a rootless init binds by path (no
// idmapped mount without root): the host directory the host checked,
// with its device and inode, so that the init refuses another one
// swapped in at the path meanwhile; or, for a temporary workspace with
// a quota, the size of the tmpfs the init mounts there itself.
type boundWorkspace struct {
	Dir         string `json:"dir,omitempty"`
	Dev         uint64 `json:"dev,omitempty"`
	Ino         uint64 `json:"ino,omitempty"`
	TmpfsSize   int64  `json:"tmpfs_size,omitempty"`
	TmpfsInodes int64  `json:"tmpfs_inodes,omitempty"`
}

// agentConfig is what the agent needs: its sandbox and the cgroup tree
// as mounted inside.
type agentConfig struct {
	agent.Boot                      // id, workspace, spec, capabilities: what every agent gets
	CgroupVersion int               `json:"cgroup_version"`
	CgroupDirs    map[string]string `json:"cgroup_dirs"` // inside paths of "cmds"
	CgroupHome    map[string]string `json:"cgroup_home"` // inside paths of "agent"
	Limits        cgroups.Limits    `json:"limits"`      // the sandbox's
	UID           uint32            `json:"uid"`         // the workspace's user
	GID           uint32            `json:"gid"`
	OneUID        bool              `json:"one_uid,omitempty"` // see bootConfig
	Debug         bool              `json:"debug"`
}

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case initArg0, agentArg0, usernsArg0:
		// What the host process inherited without close-on-exec must not
		// cross into the agent or a command; the descriptors above
		// (fdConfig...) are the init's own, passed on by ExtraFiles.
		if err := fds.CloseExecFrom(3); err != nil {
			os.Exit(125)
		}
	}
	switch os.Args[0] {
	case initArg0:
		os.Exit(runInit())
	case agentArg0:
		os.Exit(runAgent())
	case usernsArg0:
		os.Exit(runUserns())
	}
}
