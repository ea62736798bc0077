package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// Validate reports every problem of c at once: an errors.Join of
// *execbox.FieldError values (matching execbox.ErrInvalidArgument) whose
// Field is the YAML key, e.g. "exec.timeout". The rules of execbox.Spec and
// execbox.ExecRequest apply to the values they receive. A workspace must be
// an existing directory.
func (c *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Runtime) == "" {
		errs = append(errs, execbox.Invalid("runtime", "must not be empty"))
	}
	if c.Isolation != IsolationPrefer && c.Isolation != IsolationRequire {
		errs = append(errs, execbox.Invalid("isolation", "unknown value %q (want prefer or require)", c.Isolation))
	}
	// Which networks there are is the runtime's to say (none and host
	// for sandbox; bridge or a network's name too for docker).
	if strings.TrimSpace(c.Network) != c.Network || strings.ContainsAny(c.Network, "\x00/ ") {
		errs = append(errs, execbox.Invalid("network", "%q is not a network's name (none, host, or one the runtime knows, e.g. bridge for docker)", c.Network))
	}
	if c.Images.MaxSize < 0 {
		errs = append(errs, execbox.Invalid("images.max_size", "must not be negative"))
	}
	if strings.IndexByte(c.Image, 0) >= 0 {
		errs = append(errs, execbox.Invalid("image", "contains a NUL byte"))
	}
	if c.WorkspaceSize < 0 {
		errs = append(errs, execbox.Invalid("workspace_size", "must not be negative"))
	}
	// The request's own rules, for the fields the config supplies; Command
	// is a placeholder to pass the check for it.
	req := c.ExecRequest()
	req.Command = []string{"placeholder"}
	errs = append(errs, renameFields(req.Validate())...)
	spec := c.Spec()
	errs = append(errs, renameFields(spec.Validate())...)
	if c.Workspace != "" && strings.IndexByte(c.Workspace, 0) < 0 {
		switch fi, err := os.Stat(c.Workspace); {
		case err != nil:
			errs = append(errs, execbox.Invalid("workspace", "%s", pathErrText(err)))
		case !fi.IsDir():
			errs = append(errs, execbox.Invalid("workspace", "%s is not a directory", c.Workspace))
		}
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		errs = append(errs, execbox.Invalid("log.level", "%v", err))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, execbox.Invalid("log.format", "unknown format %q (want text or json)", c.Log.Format))
	}
	errs = append(errs, c.Server.validate()...)
	for name := range c.Runtimes {
		if name == "" {
			errs = append(errs, execbox.Invalid("runtimes", "has an empty runtime name"))
		}
	}
	return errors.Join(errs...)
}

// ValidateRuntimes checks the runtimes against reg: runtime and every
// runtimes.NAME section must name a runtime of reg (so a misspelt section
// is an error rather than silently unused), the runtime in use (for
// "auto", execbox.IsolatedRuntime) must accept its options
// (RuntimeOptions) as its factory checks them, and every other section
// must decode (no unknown key, no value of the wrong type; see
// execbox.SettingsProblems). Problems name the file and line of the key.
func (c *Config) ValidateRuntimes(reg *execbox.Registry) error {
	known := reg.Names()
	list := strings.Join(known, ", ")
	var errs []error
	inUse := c.Runtime
	if inUse == RuntimeAuto {
		inUse = execbox.IsolatedRuntime
	}
	if c.Runtime != "" && c.Runtime != RuntimeAuto && !slices.Contains(known, c.Runtime) {
		errs = append(errs, &execbox.FieldError{Field: "runtime", Problem: fmt.Sprintf("unknown runtime %q (known: %s)", c.Runtime, list), Kind: execbox.ErrNotFound})
	} else if slices.Contains(known, inUse) {
		errs = append(errs, Leaves(reg.Check(inUse, c.RuntimeOptions(inUse, nil)))...)
	}
	names := make([]string, 0, len(c.Runtimes))
	for name := range c.Runtimes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case name == "":
		case !slices.Contains(known, name):
			errs = append(errs, execbox.Invalid("runtimes."+name, "unknown runtime %q (known: %s)", name, list))
		case name != inUse:
			// Only what is wrong whatever the machine: a section
			// not in use may name what is absent here (a token's
			// variable, say).
			errs = append(errs, execbox.SettingsProblems(reg.Check(name, execbox.Options{Settings: c.Runtimes[name]})))
		}
	}
	return c.Annotate(errors.Join(errs...))
}

// renameFields lists the *execbox.FieldErrors of err with request field
// names turned into config keys ("timeout" becomes "exec.timeout").
func renameFields(err error) []error {
	var out []error
	for _, e := range Leaves(err) {
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			c := *fe
			c.Field = configKey(fe.Field) + strings.TrimPrefix(fe.Field, trimIndex(fe.Field))
			e = &c
		}
		out = append(out, e)
	}
	return out
}

func invalid(key string, err error) *execbox.FieldError {
	return execbox.Invalid(key, "%v", err)
}

// IsSet reports whether the value of key (e.g. "workspace") was set by the
// file, a variable or a flag rather than left at its default.
func (c *Config) IsSet(key string) bool {
	_, ok := c.sources[key]
	return ok
}

// Logger returns a logger writing to w at the configured level and format.
// An invalid level or format (which Validate reports) falls back to warn
// and text.
func (c *Config) Logger(w io.Writer) *slog.Logger {
	level, err := parseLevel(c.Log.Level)
	if err != nil {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown level %q (want debug, info, warn or error)", s)
}

// validate checks the server's settings: no maximum is negative, no
// host name empty.
func (s *Server) validate() []error {
	var errs []error
	for _, m := range []struct {
		key string
		v   float64
	}{
		{"server.max_sandboxes", float64(s.MaxSandboxes)},
		{"server.max_processes", float64(s.MaxProcesses)},
		{"server.max_sessions", float64(s.MaxSessions)},
		{"server.max_timeout", float64(s.MaxTimeout)},
		{"server.max_output_limit", float64(s.MaxOutputLimit)},
		{"server.max_event_window", float64(s.MaxEventWindow)},
		{"server.max_read_size", float64(s.MaxReadSize)},
		{"server.max_upload_size", float64(s.MaxUploadSize)},
		{"server.max_result_memory", float64(s.MaxResultMemory)},
		{"server.min_read_rate", float64(s.MinReadRate)},
		{"server.max_memory", float64(s.MaxMemory)},
		{"server.max_pids", float64(s.MaxPIDs)},
		{"server.max_cpus", s.MaxCPUs},
		{"server.max_cpu_time", float64(s.MaxCPUTime)},
		{"server.max_sandbox_timeout", float64(s.MaxSandboxTimeout)},
		{"server.max_sandbox_idle_timeout", float64(s.MaxSandboxIdleTimeout)},
	} {
		if m.v < 0 {
			errs = append(errs, execbox.Invalid(m.key, "must not be negative (0: no maximum)"))
		}
	}
	errs = append(errs, s.validatePolicy()...)
	errs = append(errs, lifetimeDefault("server.sandbox_timeout", s.SandboxTimeout, "server.max_sandbox_timeout", s.MaxSandboxTimeout)...)
	errs = append(errs, lifetimeDefault("server.sandbox_idle_timeout", s.SandboxIdleTimeout, "server.max_sandbox_idle_timeout", s.MaxSandboxIdleTimeout)...)
	errs = append(errs, s.validatePools()...)
	if s.StateDir != "" && !filepath.IsAbs(s.StateDir) {
		errs = append(errs, execbox.Invalid("server.state_dir", "%q is not an absolute path", s.StateDir))
	}
	for i, h := range s.Hosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/ ") {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("server.hosts[%d]", i), "%q is not a host name", h))
		}
	}
	if err := checkListen(s.MetricsListen); err != nil {
		errs = append(errs, execbox.Invalid("server.metrics_listen", "%v", err))
	}
	return errs
}

// validatePolicy checks the policy webhook's settings: an http(s) URL
// with a host, a positive timeout, a token variable only with a URL.
func (s *Server) validatePolicy() []error {
	var errs []error
	if s.PolicyURL != "" {
		u, err := url.Parse(s.PolicyURL)
		switch {
		case err != nil:
			errs = append(errs, execbox.Invalid("server.policy_url", "%v", err))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, execbox.Invalid("server.policy_url", "%q is not an http or https URL", s.PolicyURL))
		case u.Host == "":
			errs = append(errs, execbox.Invalid("server.policy_url", "%q has no host", s.PolicyURL))
		}
	}
	if s.PolicyTimeout <= 0 {
		errs = append(errs, execbox.Invalid("server.policy_timeout", "must be positive"))
	}
	switch {
	case s.PolicyTokenEnv == "":
	case s.PolicyURL == "":
		errs = append(errs, execbox.Invalid("server.policy_token_env", "is set but server.policy_url is not"))
	case strings.ContainsAny(s.PolicyTokenEnv, "=\x00"):
		errs = append(errs, execbox.Invalid("server.policy_token_env", "%q is not a variable name", s.PolicyTokenEnv))
	}
	return errs
}

// checkListen checks a listen address: empty, HOST:PORT or unix:PATH.
func checkListen(addr string) error {
	if addr == "" {
		return nil
	}
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		if p == "" {
			return fmt.Errorf("%q names no socket path", addr)
		}
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%q is not HOST:PORT or unix:PATH", addr)
	}
	return nil
}

// lifetimeDefault checks a default sandbox lifetime: not negative, and
// within its maximum (maxKey), if any.
func lifetimeDefault(key string, v time.Duration, maxKey string, max time.Duration) []error {
	switch {
	case v < 0:
		return []error{execbox.Invalid(key, "must not be negative (0: none)")}
	case max > 0 && v > max:
		return []error{execbox.Invalid(key, "%v is over %s (%v)", v, maxKey, max)}
	}
	return nil
}
