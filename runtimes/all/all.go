// Package all registers every runtime execbox ships, by importing each for
// its side effect (its init calls execbox.Register):
//
//   - "local" (package local): commands as host processes, no isolation;
//   - "sandbox" (package sandbox): each sandbox in its own namespaces,
//     cgroups and seccomp filter; registered on every system, available
//     on Linux only (elsewhere its Health says why), with its images
//     from package image (package sandboximage);
//   - "docker" (package docker): each sandbox in a container of a Docker
//     engine, with the same agent inside;
//   - "devcontainer" (package devcontainer): each sandbox in a project's
//     development container (devcontainer.json), found running or started;
//   - "remote" (package remote): sandboxes on an execbox server (execbox
//     serve), over the protocol of package api.
//
// Import it blank, as the execbox command does (internal/cli), then open
// a runtime by name with execbox.Open, or the default with
// execbox.OpenDefault:
//
//	import _ "github.com/execbox/execbox/runtimes/all"
//
// A program that needs one runtime imports that runtime's package alone.
package all

import (
	_ "github.com/execbox/execbox/runtimes/devcontainer"         // a project's devcontainer.json
	_ "github.com/execbox/execbox/runtimes/docker"               // containers of a Docker engine
	_ "github.com/execbox/execbox/runtimes/local"                // host processes
	_ "github.com/execbox/execbox/runtimes/remote"               // an execbox server (execbox serve)
	_ "github.com/execbox/execbox/runtimes/sandbox"              // namespaces, cgroups, seccomp
	_ "github.com/execbox/execbox/runtimes/sandbox/sandboximage" // its images (package image)
)
