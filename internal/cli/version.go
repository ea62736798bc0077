package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is execbox's version: "dev" unless set at build time with
//
//	go build -ldflags "-X github.com/execbox/execbox/internal/cli.Version=v1.2.3"
//
// as `make build` does.
var Version = "dev"

var versionCommand = &command{
	name:    "version",
	summary: "print the version",
	args:    "",
	help:    `Version prints execbox's version, then how it was built: Go version, module version, VCS revision and platform.`,
	run:     runVersion,
}

func runVersion(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return s.fail(ExitUsage, fmt.Errorf("version: takes no arguments"))
	}
	fmt.Fprintf(s.out, "execbox %s\n", Version)
	fmt.Fprintf(s.out, "  go:       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return 0
	}
	fmt.Fprintf(s.out, "  module:   %s %s\n", bi.Main.Path, bi.Main.Version)
	settings := map[string]string{}
	for _, kv := range bi.Settings {
		settings[kv.Key] = kv.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(s.out, "  revision: %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(s.out, "  time:     %s\n", t)
	}
	return 0
}
