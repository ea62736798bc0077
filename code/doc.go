// Package code runs programs written in a language — python, javascript,
// typescript, csharp, bash, sh, go, c and cpp — in any execbox sandbox:
//
//	res, err := code.Run(ctx, sb, code.Request{Language: code.Python, Source: `print(2+2)`})
//	// err: the run could not be done (bad request, no interpreter, ...)
//	// res: what the program did: res.Phase, res.ExitCode, res.Stdout, ...
//
// Everything goes through the execbox.Sandbox interface (Files to write
// sources, Exec to probe, compile and run), so it works the same on every
// runtime, with the interpreters of the runtime, not of the host.
//
// # Toolchains
//
// Each language has toolchains tried in order; the first one the sandbox
// has is used:
//
//	python      python3 (or python, if it is Python 3)
//	javascript  bun, node
//	typescript  bun; node+esbuild (esbuild transpiles and bundles the
//	            run directory's modules, node runs the result); node 22.6+
//	            (its own type stripping)
//	csharp      dotnet (a generated project, dotnet build); mono (mcs, mono)
//	bash, sh    bash, sh
//	go          go build (a go.mod is written unless given)
//	c, cpp      gcc -O2, g++ -O2 (with -lm)
//
// TypeScript is never type-checked: like bun, tsx and node, the runners
// only strip types, so a type error does not stop a program (a syntax
// error does: with esbuild it is a compile error).
//
// A toolchain is found by a probe command run in the sandbox, which asks
// the program itself where it is (Python's sys.executable, node's
// process.execPath, GOROOT/bin/go, readlink -f): Run then starts the real
// binary directly, not a version manager's shim (pyenv's python3 is a
// bash script costing ~70 ms a start). A Runner remembers what it found,
// per language, for its sandbox's life; package-level Run and Probe keep a
// Runner for each of the 64 sandboxes used last. A language whose
// toolchain is missing fails with a *MissingError (ErrNotFound) saying
// what each toolchain lacked and what to install, and is probed again on
// the next run. Probe reports every language and toolchain, for health
// checks.
//
// # Run directories
//
// Each run gets a new directory RunsDir/ID in the workspace
// (.execbox/runs/20250102-150405-1a2b3c4d): the source (main.py, main.go,
// ...), Request.Files, build output, and whatever the program writes
// there. It is the program's working directory and HOME. It is kept, so
// the files can be listed and fetched afterwards with Sandbox.Files
// (Result.Dir names it); remove it with Remove, all of them with
// RemoveAll, or ask for removal at the end with Request.Cleanup. A
// temporary workspace goes with its sandbox anyway. Caches shared by runs
// (Go's build cache) live in Options.CacheDir, .execbox/cache by default.
//
// # Environment
//
// The environment is PATH and LANG from the runtime, HOME set to the run
// directory, what the toolchain needs (GOCACHE, GOPATH, GOTOOLCHAIN=local
// and GOFLAGS=-buildvcs=false for go; PYTHONUNBUFFERED=1, so output
// written before a kill is not lost, and PYTHONDONTWRITEBYTECODE=1 for
// python; DOTNET_CLI_HOME and friends for dotnet), then Request.Env. The
// sandbox's env policy does not apply: nothing else of the host leaks in
// unless the caller passes it.
//
// # Limits
//
// Every language has default limits (DefaultsFor), overridable per Runner
// (Options.Defaults, which is where configuration goes) and per call
// (Request.Limits); see Defaults for how a memory limit becomes an
// address-space limit on runtimes without a memory cgroup and why dotnet
// then gets none. Run never sends a limit the sandbox cannot enforce (as
// Sandbox.Capabilities says): a default is adapted or dropped, an
// explicit one is an ErrUnsupported error. Result.Limits says what
// applied. A compile step has its own timeout and limits.
//
// # Phases and results
//
// A Result embeds the execbox.Result of the phase that ended the run:
// PhaseCompile when compiling did not succeed (a compile error, or a
// compiler timeout), else PhaseRun; Result.Compile keeps the compile
// step's result either way. As with Exec, what the program did is data,
// not an error.
//
// # Remote sandboxes
//
// A sandbox that implements Delegate (client.Sandbox, hence the remote
// runtime's sandboxes and the agent-backed ones of the sandbox and docker
// runtimes) gets the whole Request in one call: the execbox server or
// agent runs it with Run where the sandbox is (POST code) instead of the
// dozen round trips of probes, writes, compile and run. The Result is the
// one Run gives in process. A Runner with Options runs step by step, as
// does a server older than POST code (ErrNotDelegated).
package code
