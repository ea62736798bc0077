// Package docker is the runtime that runs each sandbox in a container of a
// Docker engine, with execbox's own agent inside it.
//
// Create makes one container per sandbox from Spec.Image (or
// runtimes.docker.image) through the Engine API (the moby/moby client,
// never the docker CLI), with no network but loopback, a memory, process
// and CPU cap, no-new-privileges and fewer capabilities than Docker's
// default. The container's process is the agent: a static program from
// the host (Options.AgentBinary, this one if static, or a static build of
// execbox made once and cached: see staticbin.Agent), bind-mounted read-only,
// under Docker's init (tini) which reaps orphans. The agent listens on a
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
// The boundary is Docker's: a command runs as root in the container
// unless the Spec or the image names a user, with Docker's namespaces,
// its seccomp profile and a reduced capability set. Files that commands
// write in a workspace bind-mounted from the host are owned by the
// container's uids on the host (the engine's user namespace remapping
// aside).
package docker

import "github.com/execbox/execbox"

func init() {
	execbox.Register(Name, func(opts execbox.Options) (execbox.Runtime, error) {
		var o Options
		if err := execbox.DecodeSettings(Name, opts.Settings, &o); err != nil {
			return nil, err
		}
		o.Logger = opts.Logger
		return New(o)
	})
}
