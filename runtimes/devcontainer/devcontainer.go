// Package devcontainer is the runtime that runs each sandbox in a
// project's development container, as its devcontainer.json describes it
// (https://containers.dev): the container the reference tools (VS Code,
// the devcontainer CLI) run for the folder, or one this runtime starts
// as they would.
//
// Create takes Spec.Workspace as the project folder, with
// .devcontainer/devcontainer.json or .devcontainer.json in it (or
// Options.Config for every sandbox). It looks for a running container
// labelled devcontainer.local_folder=<folder> (and, when the label is
// there, devcontainer.config_file=<that file>): found, the sandbox is in
// it. Otherwise it pulls "image" or builds "build.dockerfile" through the
// Engine API, creates and starts a container with the reference tools'
// labels, mounts, environment, user and keep-alive process, and runs its
// lifecycle commands (onCreateCommand ... postStartCommand) once. Either
// way execbox's agent is injected into the running container
// (docker.Runtime.Attach) and commands run as remoteUser in
// workspaceFolder with remoteEnv, each an argv: execbox never builds a
// shell string, and runs /bin/sh -c only for a lifecycle command the file
// gives as a string, which the spec defines as a shell command.
//
// Close stops the agent and everything the sandbox started. A found
// container stays as it was; one the runtime started is removed, unless
// Options.Keep leaves it running for the next sandbox of the folder.
//
// Commands can write devcontainer.json (it is in the workspace), so what
// the file can make the host do is bounded: bind mounts only of the
// folder or of Options.AllowedMounts, named volumes only those this
// runtime made for the folder (labelled with it) or of
// Options.AllowedVolumes, ${localEnv:NAME} only for
// Options.AllowedEnv, build contexts only in the folder, and no
// privileged containers, added capabilities, security options, docker
// run flags or host commands (initializeCommand). The runtime's network,
// memory and process caps come from its options, never from the file.
package devcontainer

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
