package config

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// testSettings are the settings of the runtimes of testRegistry.
type testSettings struct {
	Memory   Size     `json:"memory,omitempty"`
	PIDs     int64    `json:"pids,omitempty"`
	Network  string   `json:"network,omitempty"`
	Paths    []string `json:"ro_paths,omitempty"`
	TokenEnv string   `json:"token_env,omitempty"`
}

// testRegistry has "sandbox", "local" and "remote" runtimes whose
// factories decode testSettings and check them as real ones do: network
// none or host, memory not negative, and (remote) token_env naming a set
// variable, which depends on the environment, not the file.
func testRegistry() *execbox.Registry {
	reg := &execbox.Registry{}
	for _, name := range []string{"sandbox", "local", "remote"} {
		reg.Register(name, func(opts execbox.Options) (execbox.Runtime, error) {
			var o testSettings
			errs := []error{execbox.DecodeSettings(name, opts.Settings, &o)}
			if o.Network != "" && o.Network != "none" && o.Network != "host" {
				errs = append(errs, execbox.Invalid("runtimes."+name+".network", "unknown network mode %q", o.Network))
			}
			if o.Memory < 0 {
				errs = append(errs, execbox.Invalid("runtimes."+name+".memory", "must not be negative"))
			}
			if o.TokenEnv != "" && os.Getenv(o.TokenEnv) == "" {
				errs = append(errs, execbox.Invalid("runtimes."+name+".token_env", "$%s is unset", o.TokenEnv))
			}
			return nil, errors.Join(errs...)
		})
	}
	return reg
}

// TestLoadChecksRuntimeSettings: Load with a registry reports what the
// runtimes' factories find wrong in their settings with the other
// problems, each at the file, line and key (or variable or flag) it came
// from; in a section not in use, only what is wrong whatever the machine.
func TestLoadChecksRuntimeSettings(t *testing.T) {
	file := writeFile(t, "execbox.yaml", `exec:
  timeout: soon
runtimes:
  sandbox:
    memry: 1GiB
    pids: lots
    memory: -1
    ro_paths: [/a, {b: c}]
  remote:
    token_env: EXECBOX_TEST_UNSET_VARIABLE
    pids: many
`)
	_, err := Load(LoadOptions{
		Getenv:   env(map[string]string{"EXECBOX_CONFIG": file}),
		Flags:    parseFlags(t, "--network", "bridge"),
		Registry: testRegistry(),
	})
	if !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
	want := []string{
		file + `:2: exec.timeout: invalid duration "soon": want a number with a unit, e.g. 90s or 1m30s`,
		file + `:5: runtimes.sandbox.memry: unknown key (known: memory, network, pids, ro_paths, token_env)`,
		file + `:6: runtimes.sandbox.pids: want an integer, got "lots"`,
		file + `:7: runtimes.sandbox.memory: must not be negative`,
		file + `:8: runtimes.sandbox.ro_paths: want a string, got ["/a",{"b":"c"}]`,
		file + `:11: runtimes.remote.pids: want an integer, got "many"`,
		`--network: unknown network mode "bridge"`,
	}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestValidateRuntimesInUse: the runtime in use is checked with the
// settings RuntimeOptions gives it; with auto, that is the sandbox.
func TestValidateRuntimesInUse(t *testing.T) {
	for _, tt := range []struct {
		runtime string
		file    string
		want    string
	}{
		{"auto", "runtimes:\n  sandbox:\n    memory: -1\n", "c.yaml:3: runtimes.sandbox.memory: must not be negative"},
		{"local", "runtimes:\n  local:\n    memory: -1\n", "c.yaml:3: runtimes.local.memory: must not be negative"},
		{"remote", "runtimes:\n  remote:\n    token_env: EXECBOX_TEST_UNSET_VARIABLE\n", "c.yaml:3: runtimes.remote.token_env: $EXECBOX_TEST_UNSET_VARIABLE is unset"},
		{"local", "runtimes:\n  remote:\n    token_env: EXECBOX_TEST_UNSET_VARIABLE\n", ""},
		{"local", "runtimes:\n  sandbox:\n    memory: -1\n", ""},
	} {
		file := writeFile(t, "c.yaml", tt.file)
		_, err := Load(LoadOptions{
			Getenv:   env(map[string]string{"EXECBOX_CONFIG": file, "EXECBOX_RUNTIME": tt.runtime}),
			Registry: testRegistry(),
		})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("runtime %s, %q: %v, want no error", tt.runtime, tt.file, err)
		case tt.want != "" && (err == nil || err.Error() != strings.ReplaceAll(tt.want, "c.yaml", file)):
			t.Errorf("runtime %s, %q: %v, want %s", tt.runtime, tt.file, err, tt.want)
		}
	}
}

// TestUnknownVariable: a variable in a section's namespace that names no
// key is an error (EXECBOX_LIMITS_MEMROY would leave the limit unset);
// top-level names, which other programs use, and the policy hook's token
// variable are not.
func TestUnknownVariable(t *testing.T) {
	vars := map[string]string{
		"EXECBOX_LIMITS_MEMROY":           "1GiB",
		"EXECBOX_LIMITS_MEMORY":           "1GiB",
		"EXECBOX_EXEC_TIMOUT":             "5s",
		"EXECBOX_EXEC_EMPTY":              "",
		"EXECBOX_TOKEN":                   "t",
		"EXECBOX_TEST_REQUIRE":            "all",
		"EXECBOX_SERVER_POLICY_URL":       "http://127.0.0.1:1/hook",
		"EXECBOX_SERVER_POLICY_TOKEN_ENV": "EXECBOX_SERVER_HOOK_TOKEN",
		"EXECBOX_SERVER_HOOK_TOKEN":       "secret",
	}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	_, err := Load(LoadOptions{Getenv: env(vars), Environ: func() []string { return environ }, Flags: parseFlags(t, "--config", "")})
	var got []string
	for _, e := range Leaves(err) {
		got = append(got, e.Error())
	}
	slices.Sort(got)
	want := []string{
		"EXECBOX_EXEC_TIMOUT: unknown variable (known: EXECBOX_EXEC_TIMEOUT, EXECBOX_EXEC_GRACE_PERIOD, EXECBOX_EXEC_OUTPUT_LIMIT, EXECBOX_EXEC_ENV_POLICY, EXECBOX_EXEC_ENV_ALLOW)",
		"EXECBOX_LIMITS_MEMROY: unknown variable (known: EXECBOX_LIMITS_CPU_TIME, EXECBOX_LIMITS_FILE_SIZE, EXECBOX_LIMITS_OPEN_FILES, EXECBOX_LIMITS_ADDRESS_SPACE, EXECBOX_LIMITS_MEMORY, EXECBOX_LIMITS_PIDS, EXECBOX_LIMITS_CPUS)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("%v is not ErrInvalidArgument", err)
	}
}
