package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

// env returns a Getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFile writes content to name in a new directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// parseFlags registers every config flag on a new FlagSet and parses args.
func parseFlags(t *testing.T, args ...string) *Flags {
	t.Helper()
	var fl Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fl.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return &fl
}

// fieldErrors returns the *execbox.FieldError of every problem in err, and
// checks that each matches execbox.ErrInvalidArgument or ErrNotFound.
func fieldErrors(t *testing.T, err error) []*execbox.FieldError {
	t.Helper()
	var out []*execbox.FieldError
	for _, e := range Leaves(err) {
		var fe *execbox.FieldError
		if !errors.As(e, &fe) {
			t.Errorf("problem %q (%T) is not a *execbox.FieldError", e, e)
			continue
		}
		if !errors.Is(e, execbox.ErrInvalidArgument) && !errors.Is(e, execbox.ErrNotFound) {
			t.Errorf("problem %q matches neither ErrInvalidArgument nor ErrNotFound", e)
		}
		out = append(out, fe)
	}
	return out
}

func fieldNames(fes []*execbox.FieldError) []string {
	var out []string
	for _, fe := range fes {
		out = append(out, fe.Field)
	}
	slices.Sort(out)
	return out
}

func TestDefaultsWithoutFile(t *testing.T) {
	c, err := Load(LoadOptions{Getenv: env(nil), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime != RuntimeAuto || c.Isolation != IsolationPrefer || c.Network != "" || c.Exec.Timeout != 120*time.Second || c.Exec.GracePeriod != 2*time.Second ||
		c.Exec.OutputLimit != 16<<20 || c.Exec.EnvPolicy != execbox.EnvClean || c.Log.Level != "warn" ||
		c.Log.Format != "text" || c.Workspace != "" || c.Limits != (Limits{}) {
		t.Errorf("defaults: got %+v", c)
	}
	if c.IsSet("workspace") {
		t.Error("IsSet(workspace) = true for a default")
	}
	spec := c.Spec()
	if spec.Workspace != "" || spec.EnvPolicy != execbox.EnvClean || spec.Limits != (execbox.Limits{}) {
		t.Errorf("Spec: got %+v", spec)
	}
	req := c.ExecRequest()
	if req.Timeout != execbox.DefaultTimeout || req.GracePeriod != execbox.DefaultGracePeriod || req.OutputLimit != execbox.DefaultOutputLimit {
		t.Errorf("ExecRequest: got %+v", req)
	}
}

// TestLoadFile sets every field in a file.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	const file = `
runtime: local
isolation: require
network: host
workspace_size: 256MiB
image: localhost:5000/py:3.11
images:
  dir: images   # relative to this file
  max_size: 10GiB
exec:
  timeout: 30s
  grace_period: 500ms
  output_limit: 1MiB
  env_policy: allow
  env_allow: [HOME, USER]
limits:
  cpu_time: 5s
  file_size: 10M
  open_files: 256
  address_space: 2G
  memory: 512MiB
  pids: 64
  cpus: 0.5
workspace: ws   # relative to this file
log:
  level: debug
  format: json
server:
  hosts: [execbox.internal]
  max_sandboxes: 8
  max_processes: 9
  max_sessions: 3
  max_timeout: 10m
  max_output_limit: 2MiB
  max_event_window: 1MiB
  max_read_size: 4MiB
  max_upload_size: 16MiB
  max_memory: 1GiB
  max_pids: 100
  max_cpus: 2
  max_cpu_time: 1m
  keys_file: keys.yaml   # relative to this file
  keys:
    - {name: alice, key_sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8, max_sandboxes: 2, max_memory: 512MiB}
  policy_url: http://127.0.0.1:9/decide
  policy_timeout: 2s
  policy_token_env: HOOK_TOKEN
  sandbox_timeout: 2h
  max_sandbox_timeout: 12h
  sandbox_idle_timeout: 10m
  max_sandbox_idle_timeout: 1h
runtimes:
  local:
    shell: /bin/bash
  docker: {image: "debian:12", pull: true}
`
	path := filepath.Join(dir, "execbox.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Getenv: env(nil), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Runtime, want.Isolation, want.Network = "local", IsolationRequire, "host"
	want.WorkspaceSize = 256 << 20
	want.Image = "localhost:5000/py:3.11"
	want.Images = Images{Dir: filepath.Join(dir, "images"), MaxSize: 10 << 30}
	want.Exec = Exec{Timeout: 30 * time.Second, GracePeriod: 500 * time.Millisecond, OutputLimit: 1 << 20, EnvPolicy: execbox.EnvAllow, EnvAllow: []string{"HOME", "USER"}}
	want.Limits = Limits{CPUTime: 5 * time.Second, FileSize: 10 << 20, OpenFiles: 256, AddressSpace: 2 << 30, Memory: 512 << 20, PIDs: 64, CPUs: 0.5}
	want.Workspace = filepath.Join(dir, "ws")
	want.Log = Log{Level: "debug", Format: "json"}
	want.Server = Server{
		Hosts: []string{"execbox.internal"}, MaxSandboxes: 8, MaxProcesses: 9, MaxSessions: 3,
		MaxTimeout: 10 * time.Minute, MaxOutputLimit: 2 << 20, MaxEventWindow: 1 << 20, MaxReadSize: 4 << 20,
		MaxUploadSize: 16 << 20, MaxResultMemory: 1 << 30, MinReadRate: 1 << 20, MaxMemory: 1 << 30, MaxPIDs: 100, MaxCPUs: 2, MaxCPUTime: time.Minute,
		KeysFile:  filepath.Join(dir, "keys.yaml"),
		Keys:      []Key{{Name: "alice", KeySHA256: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", MaxSandboxes: 2, MaxMemory: 512 << 20}},
		PolicyURL: "http://127.0.0.1:9/decide", PolicyTimeout: 2 * time.Second, PolicyTokenEnv: "HOOK_TOKEN",
		SandboxTimeout: 2 * time.Hour, MaxSandboxTimeout: 12 * time.Hour,
		SandboxIdleTimeout: 10 * time.Minute, MaxSandboxIdleTimeout: time.Hour,
	}
	want.Runtimes = map[string]map[string]any{
		"local":  {"shell": "/bin/bash"},
		"docker": {"image": "debian:12", "pull": true},
	}
	got := *c
	got.sources = nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("got  %+v\nwant %+v", &got, want)
	}
	if !c.IsSet("workspace") || !c.IsSet("limits.cpus") {
		t.Error("IsSet is false for keys set in the file")
	}
	if got, want := c.RuntimeOptions("docker", nil).Settings, (map[string]any{"image": "debian:12", "pull": true, "network": "host", "workspace_size": int64(256 << 20)}); !reflect.DeepEqual(got, want) {
		t.Errorf("RuntimeOptions(docker).Settings = %v, want %v", got, want)
	}
	if got, want := c.RuntimeOptions("sandbox", nil).Settings, (map[string]any{"network": "host", "workspace_size": int64(256 << 20), "image_dir": filepath.Join(dir, "images"), "image_max_size": int64(10 << 30)}); !reflect.DeepEqual(got, want) {
		t.Errorf("RuntimeOptions(sandbox).Settings = %v, want %v", got, want)
	}
	spec := c.Spec()
	if spec.Limits.Memory != 512<<20 || spec.Limits.CPUTime != 5*time.Second || spec.EnvPolicy != execbox.EnvAllow || spec.Workspace != want.Workspace || spec.Image != want.Image {
		t.Errorf("Spec: got %+v", spec)
	}
}

func TestFileChoice(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte("exec: {timeout: 1s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	named := writeFile(t, "named.yaml", "exec: {timeout: 2s}\n")
	byEnv := writeFile(t, "env.yaml", "exec: {timeout: 3s}\n")
	for _, tt := range []struct {
		name  string
		env   map[string]string
		flags []string
		want  time.Duration
	}{
		{"default file", nil, nil, 1 * time.Second},
		{"EXECBOX_CONFIG", map[string]string{"EXECBOX_CONFIG": byEnv}, nil, 3 * time.Second},
		{"--config over EXECBOX_CONFIG", map[string]string{"EXECBOX_CONFIG": byEnv}, []string{"--config", named}, 2 * time.Second},
		{"--config empty means none", nil, []string{"--config="}, execbox.DefaultTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(LoadOptions{Getenv: env(tt.env), Flags: parseFlags(t, tt.flags...), Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if c.Exec.Timeout != tt.want {
				t.Errorf("timeout = %v, want %v", c.Exec.Timeout, tt.want)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	for _, tt := range []struct {
		name   string
		env    map[string]string
		flags  []string
		source string
	}{
		{"flag", nil, []string{"--config", missing}, "--config"},
		{"env", map[string]string{"EXECBOX_CONFIG": missing}, nil, "EXECBOX_CONFIG"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(LoadOptions{Getenv: env(tt.env), Flags: parseFlags(t, tt.flags...), Dir: t.TempDir()})
			if !errors.Is(err, execbox.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tt.source+": ") || !strings.Contains(msg, missing) {
				t.Errorf("message %q should name %s and the path", msg, tt.source)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "c.yaml", `
runtime: fromfile
exec:
  timeout: 10s
  output_limit: 1K
  env_allow: [A]
limits:
  memory: 1G
runtimes: {fromfile: {}, fromenv: {}, fromflag: {}}
`)
	environ := map[string]string{
		"EXECBOX_CONFIG":            file,
		"EXECBOX_RUNTIME":           "fromenv",
		"EXECBOX_EXEC_TIMEOUT":      "20s",
		"EXECBOX_EXEC_ENV_ALLOW":    "B, C",
		"EXECBOX_LIMITS_PIDS":       "7",
		"EXECBOX_EXEC_GRACE_PERIOD": "", // empty counts as unset
	}
	t.Run("env over file", func(t *testing.T) {
		c, err := Load(LoadOptions{Getenv: env(environ)})
		if err != nil {
			t.Fatal(err)
		}
		if c.Runtime != "fromenv" || c.Exec.Timeout != 20*time.Second || c.Exec.OutputLimit != 1024 ||
			!slices.Equal(c.Exec.EnvAllow, []string{"B", "C"}) || c.Limits.PIDs != 7 || c.Limits.Memory != 1<<30 ||
			c.Exec.GracePeriod != execbox.DefaultGracePeriod {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("flags over env", func(t *testing.T) {
		fl := parseFlags(t, "--runtime", "fromflag", "--timeout", "5s", "--timeout", "30s",
			"--env-allow", "D", "--env-allow", "E,F", "--memory", "2G")
		c, err := Load(LoadOptions{Getenv: env(environ), Flags: fl})
		if err != nil {
			t.Fatal(err)
		}
		if c.Runtime != "fromflag" || c.Exec.Timeout != 30*time.Second || c.Exec.OutputLimit != 1024 ||
			!slices.Equal(c.Exec.EnvAllow, []string{"D", "E", "F"}) || c.Limits.PIDs != 7 || c.Limits.Memory != 2<<30 {
			t.Errorf("got %+v", c)
		}
	})
}

// TestEveryProblemAtOnce sets a bad value through each source and expects
// one problem per key, each saying where the value came from.
func TestEveryProblemAtOnce(t *testing.T) {
	file := writeFile(t, "c.yaml", `
runtime: ""
exec:
  timeout: -1s
  grace_period: soon
  output_limit: 12 parsecs
  env_policy: everything
  env_allow: ["", "OK"]
limits:
  cpu_time: 500ms
  file_size: -1
  open_files: many
  cpus: -2
workspace: /nonexistent/workspace
log:
  level: loud
  format: xml
`)
	environ := map[string]string{
		"EXECBOX_CONFIG":       file,
		"EXECBOX_LIMITS_PIDS":  "-5",
		"EXECBOX_LIMITS_CPUS":  "NaN",
		"EXECBOX_LOG_LEVEL":    "verbose",
		"EXECBOX_EXEC_TIMEOUT": "", // unset: the file's value stands
	}
	fl := parseFlags(t, "--memory", "lots", "--address-space", "-1G")
	_, err := Load(LoadOptions{Getenv: env(environ), Flags: fl})
	if err == nil {
		t.Fatal("Load succeeded")
	}
	t.Logf("errors:\n%v", err)
	fes := fieldErrors(t, err)
	got := fieldNames(fes)
	want := []string{
		"exec.env_allow[0]", "exec.env_policy", "exec.grace_period", "exec.output_limit", "exec.timeout",
		"limits.address_space", "limits.cpu_time", "limits.cpus", "limits.cpus", "limits.file_size",
		"limits.memory", "limits.open_files", "limits.pids", "log.format", "log.level", "runtime", "workspace",
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields:\n got  %q\n want %q", got, want)
	}
	msg := err.Error()
	for _, s := range []string{
		"c.yaml:4: exec.timeout: must not be negative",
		`c.yaml:5: exec.grace_period: invalid duration "soon"`,
		`c.yaml:14: workspace: /nonexistent/workspace: no such file or directory`,
		`EXECBOX_LIMITS_PIDS: must not be negative`,
		`EXECBOX_LOG_LEVEL: unknown level "verbose"`,
		`--memory: invalid size "lots"`,
		`--address-space: invalid size "-1G"`,
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("errors lack %q", s)
		}
	}
}

func TestUnknownKey(t *testing.T) {
	file := writeFile(t, "c.yaml", "exec:\n  timout: 1s\nlimit:\n  memory: 1G\nruntimes:\n  local: {}\n")
	_, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
	fes := fieldErrors(t, err)
	if got, want := fieldNames(fes), []string{"exec.timout", "limit"}; !slices.Equal(got, want) {
		t.Fatalf("fields: got %q, want %q (error %v)", got, want, err)
	}
	msg := err.Error()
	for _, s := range []string{
		"c.yaml:2: exec.timout: unknown key (known: env_allow, env_policy, grace_period, output_limit, timeout)",
		"c.yaml:3: limit: unknown key (known: exec, image, images, isolation, limits, log, network, runtime, runtimes, server, workspace, workspace_size)",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q lacks %q", msg, s)
		}
	}
}

func TestBadFiles(t *testing.T) {
	for _, tt := range []struct {
		name, content, want string
	}{
		{"syntax", "exec: [\n", "c.yaml:1: config: did not find expected node content"},
		{"syntax further down", "exec:\n  timeout: 5s\n  grace_period: \"2s\n", "c.yaml:3: config: found unexpected end of stream"},
		{"not a mapping", "- a\n- b\n", "c.yaml:1: config: must be a mapping"},
		{"section not a mapping", "exec: 5\n", "c.yaml:1: exec: must be a mapping"},
		{"list expected", "exec:\n  env_allow: HOME\n", "c.yaml:2: exec.env_allow: must be a list"},
		{"scalar expected", "exec:\n  timeout: [1s]\n", "c.yaml:2: exec.timeout: must be a single value"},
		{"duplicate", "runtime: a\nruntime: b\n", "c.yaml:2: runtime: set twice (first at line 1)"},
		{"two documents", "runtime: local\n---\nruntime: local\n", "more than one YAML document"},
		{"runtime settings not a mapping", "runtimes:\n  local: 3\n", "c.yaml:2: runtimes.local: must be a mapping"},
		{"no unit", "exec: {timeout: 120}\n", `invalid duration "120"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, "c.yaml", tt.content)
			_, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
			if !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestEmptyAndNullFile(t *testing.T) {
	for _, content := range []string{"", "# nothing\n", "~\n", "exec:\nlimits: ~\nworkspace:\n"} {
		file := writeFile(t, "c.yaml", content)
		c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		if c.Exec.Timeout != execbox.DefaultTimeout {
			t.Errorf("%q: timeout = %v", content, c.Exec.Timeout)
		}
	}
}

func TestValidateRuntimes(t *testing.T) {
	file := writeFile(t, "c.yaml", "runtimes:\n  local: {}\n  dokcer: {}\n")
	c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file}), Flags: parseFlags(t, "--runtime", "dockr")})
	if err != nil {
		t.Fatal(err)
	}
	reg := &execbox.Registry{}
	for _, name := range []string{"docker", "local"} {
		reg.Register(name, func(execbox.Options) (execbox.Runtime, error) { return nil, nil })
	}
	err = c.ValidateRuntimes(reg)
	if !errors.Is(err, execbox.ErrNotFound) || !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("got %v, want ErrNotFound (runtime) and ErrInvalidArgument (section)", err)
	}
	for _, s := range []string{
		`--runtime: unknown runtime "dockr" (known: docker, local)`,
		`c.yaml:3: runtimes.dokcer: unknown runtime "dokcer"`,
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

func TestAnnotate(t *testing.T) {
	c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_EXEC_TIMEOUT": "1s"}), Flags: parseFlags(t, "--memory", "1G")})
	if err != nil {
		t.Fatal(err)
	}
	in := errors.Join(
		execbox.Unsupported("local", "limits.memory"),
		execbox.Invalid("timeout", "too short"),
		execbox.Invalid("dir", "escapes the workspace"),
		errors.New("plain"),
	)
	got := c.Annotate(in)
	want := "--memory: not supported by the local runtime\nEXECBOX_EXEC_TIMEOUT: too short\ndir: escapes the workspace\nplain"
	if got.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !errors.Is(got, execbox.ErrUnsupported) {
		t.Error("annotation lost the kind")
	}
}

func TestRegisterSubset(t *testing.T) {
	var fl Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fl.Register(fs, "log.level")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if want := []string{"config", "log-level"}; !slices.Equal(names, want) {
		t.Errorf("flags = %q, want %q", names, want)
	}
	if f := fs.Lookup("log-level"); f.DefValue != "warn" || !strings.Contains(f.Usage, "$EXECBOX_LOG_LEVEL") {
		t.Errorf("log-level: default %q, usage %q", f.DefValue, f.Usage)
	}
}

// TestFieldsDocumented checks every field has a flag and usage, and that
// the doc comments in config.go name its key, variable and flag.
func TestFieldsDocumented(t *testing.T) {
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f.flag == "" || f.usage == "" {
			t.Errorf("%s: no flag or usage", f.key)
		}
		text := strings.Join(strings.Fields(string(src)), " ")
		for _, doc := range []string{"YAML " + f.key + ",", "env " + f.env, "flag --" + f.flag} {
			if !strings.Contains(text, doc) {
				t.Errorf("%s: config.go does not document %q", f.key, doc)
			}
		}
	}
}

// TestServerMaximumsValidated: every bad server setting is reported at
// once, with where it came from.
func TestServerMaximumsValidated(t *testing.T) {
	file := writeFile(t, "c.yaml", "server:\n  max_sandboxes: -1\n  max_timeout: -1s\n  hosts: [\"a b\"]\n  sandbox_timeout: 2h\n  max_sandbox_timeout: 1h\n  max_sandbox_idle_timeout: -1s\n")
	_, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file, "EXECBOX_SERVER_MAX_MEMORY": "-1", "EXECBOX_SERVER_SANDBOX_IDLE_TIMEOUT": "-5m"})})
	if !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("Load = %v, want ErrInvalidArgument", err)
	}
	for _, s := range []string{
		"c.yaml:2: server.max_sandboxes: must not be negative",
		"c.yaml:3: server.max_timeout: must not be negative",
		"server.hosts[0]",
		"EXECBOX_SERVER_MAX_MEMORY",
		"c.yaml:5: server.sandbox_timeout: 2h0m0s is over server.max_sandbox_timeout (1h0m0s)",
		"c.yaml:7: server.max_sandbox_idle_timeout: must not be negative",
		"EXECBOX_SERVER_SANDBOX_IDLE_TIMEOUT",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

// TestNullTagWithAValue: a red team's finding. "isolation: !!null
// require" was dropped as null, leaving the default (prefer, which falls
// back to local); the text the reader sees is what counts.
func TestNullTagWithAValue(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "execbox.yaml"), []byte("isolation: !!null require\nruntime: ~\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Getenv: env(nil), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Isolation != "require" || c.Runtime != RuntimeAuto {
		t.Errorf("isolation %q, runtime %q; want require (the text under the tag) and auto (~ is null)", c.Isolation, c.Runtime)
	}
}
