// Package docker is the runtime that runs each sandbox in a container of a
// Docker engine, with execbox's own agent inside it.
//
// Create makes one container per sandbox from Spec.Image (or
// runtimes.docker.image) through the Engine API (the moby/moby client,
// never the docker CLI), with no network but loopback, a memory, process
// and CPU cap, no-new-privileges and fewer capabilities than Docker's
// default. The container's process is the agent: a static program from
// the host (Options.AgentBinary, this one if static, or a static build of
// execbox made once and cached: see staticbin.Agent), bind-mounted
// read-only, as the container's init (PID 1, no init of Docker's): it
// reaps orphans, and no command can stop or kill it. The agent listens on a
// unix socket in a host directory bind-mounted into the container; the
// host talks the execbox protocol to it directly, so an exec costs a
// request on a unix socket, not a docker exec. Everything the agent does
// (the process table, tree kills, output bounds, sessions, files) is the
// same code as on every other runtime.
//
// Close removes the container and what Create made on the host. Every
// container is labelled (dev.execbox.*) with the process that made it; a
// later Create sweeps the containers of processes that died.
//
// Processes a command leaves behind: its timeout, Kill or the sandbox's
// Close end its process group, its descendants and every process that
// carries its marker (EXECBOX_TRACE), even after setsid or a double fork.
// A process that does all three (leaves the group and the tree and
// scrubs its environment: env -i setsid sh -c 'daemon &') is out of that
// reach: it lives on after the command's timeout or Kill, inside the
// container, as any process a command leaves running after a normal
// exit does (a server, by design), until Close removes the container
// and it with everything else. A container the sandbox did not create
// (Attach, devcontainer's kept containers) is not removed: there such a
// process outlives the sandbox, in that container, as the container's
// own processes do. The sandbox runtime has no such gap (a cgroup per
// command).
//
// The boundary is Docker's: a command runs as root in the container
// unless the Spec or the image names a user, with Docker's namespaces,
// its seccomp profile and a reduced capability set. Files that commands
// write in a workspace bind-mounted from the host are owned by the
// container's uids on the host (the engine's user namespace remapping
// aside).
package docker

import (
	"errors"

	"github.com/execbox/execbox"
)

func init() {
	execbox.Register(Name, func(opts execbox.Options) (execbox.Runtime, error) {
		var o Options
		// Every problem at once: what decoded is checked too.
		derr := execbox.DecodeSettings(Name, opts.Settings, &o)
		o.Logger = opts.Logger
		rt, err := New(o)
		if err := errors.Join(derr, err); err != nil {
			return nil, err
		}
		return rt, nil
	})
}
