// Package all registers every runtime execbox ships, by importing each for
// its side effect (its init calls execbox.Register). Import it blank, as
// cmd/execbox does:
//
//	import _ "github.com/execbox/execbox/runtimes/all"
//
// Heavy runtimes may later be dropped from a build with build tags here.
package all

import (
	_ "github.com/execbox/execbox/runtimes/local"   // host processes
	_ "github.com/execbox/execbox/runtimes/remote"  // an execbox server (execbox serve)
	_ "github.com/execbox/execbox/runtimes/sandbox" // namespaces, cgroups, seccomp
)
