// Package agent is the one agent of execbox: the code that runs commands,
// sessions and file operations in one workspace, the same in every
// boundary. The local runtime runs it in process (New); an isolated
// runtime runs it inside its boundary and talks to it over the protocol
// (Serve, with the hooks its boundary needs in Config: a cgroup per
// command, the ids no command may take, the user files are written as).
// cmd/execbox-agent is the same Serve as a static binary, configured by a
// Boot, for boundaries that cannot run the caller's own binary
// (containers).
//
// Its parts are its subpackages: proc starts one process and captures
// its output within a bound, kills its tree and builds its Result;
// session keeps a shell or interpreter alive between calls; workspace
// confines every path to the workspace.
package agent
