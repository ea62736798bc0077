package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/execbox/execbox/internal/server"
)

// Main is the agent command (cmd/execbox-agent, and the agent a
// container runtime starts from a static execbox): it parses args as
// the command's flags, reads its Boot, and serves until ctx is done.
// Errors name the flag.
func Main(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("execbox-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "where to listen: unix:PATH, fd:N or HOST:PORT (required)")
	configPath := fs.String("config", "", "agent configuration (JSON) file, or - for standard input")
	id := fs.String("id", "", "sandbox ID (overrides the configuration)")
	ws := fs.String("workspace", "", "workspace directory (overrides the configuration)")
	rtName := fs.String("runtime", "", "runtime name reported in errors and /v1/info (overrides the configuration)")
	tokenEnv := fs.String("token-env", "", "environment variable holding the bearer token clients must send")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	var cfg Boot
	if *configPath != "" {
		var r io.Reader = stdin
		if *configPath != "-" {
			f, err := os.Open(*configPath)
			if err != nil {
				return fmt.Errorf("--config: %w", err)
			}
			defer f.Close()
			r = f
		}
		dec := json.NewDecoder(r)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
	}
	for _, o := range []struct {
		dst *string
		v   string
	}{{&cfg.ID, *id}, {&cfg.Workspace, *ws}, {&cfg.Runtime, *rtName}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "agent"
	}
	var token string
	if *tokenEnv != "" {
		if token = os.Getenv(*tokenEnv); token == "" {
			return fmt.Errorf("--token-env: $%s is empty or unset", *tokenEnv)
		}
		os.Unsetenv(*tokenEnv) // commands inherit the agent's environment
	}
	acfg, err := cfg.Config()
	if err != nil {
		return err
	}
	// Main's agents share the process limit of their commands (a
	// container's): threads in reserve, before any command runs.
	prewarmThreads(spareThreads)
	if isInit() {
		// A container's entry point: its init (see asInit). It stops
		// when the container is removed, not on SIGTERM.
		asInit(ctx)
	}
	ln, err := listener(*listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	log.Info("serving", "sandbox", cfg.ID, "workspace", cfg.Workspace, "listen", ln.Addr().String())
	return Serve(ctx, ln, acfg, server.Options{Logger: log, Token: token, Name: "execbox-agent"})
}

// listener opens what --listen names.
func listener(spec string) (net.Listener, error) {
	switch {
	case spec == "":
		return nil, errors.New("is required: unix:PATH, fd:N or HOST:PORT")
	case strings.HasPrefix(spec, "unix:"):
		return net.Listen("unix", strings.TrimPrefix(spec, "unix:"))
	case strings.HasPrefix(spec, "fd:"):
		n, err := strconv.Atoi(strings.TrimPrefix(spec, "fd:"))
		if err != nil || n < 3 {
			return nil, fmt.Errorf("%q: want fd:N with N >= 3", spec)
		}
		f := os.NewFile(uintptr(n), "execbox-agent-listener")
		defer f.Close() // FileListener dups it
		return net.FileListener(f)
	}
	return net.Listen("tcp", spec)
}
