package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigErrorIsFatalNotAFallback is issue 22's first finding: a typo
// in a runtime's settings made "runtime: auto" fall back to the local
// runtime and run the command on the host. Every configuration problem
// must stop every command with exit 2, naming file, line and key, all
// at once, before anything runs.
func TestConfigErrorIsFatalNotAFallback(t *testing.T) {
	for _, tt := range []struct {
		name string
		file string   // execbox.yaml; its path replaces FILE in want
		args []string // flags of exec, before "--"
		env  map[string]string
		want []string
	}{{
		name: "typo in the sandbox's settings under auto",
		file: "runtimes:\n  sandbox:\n    memry: 1GiB\n    pids: lots\n",
		args: []string{"--runtime", "auto"},
		want: []string{
			"FILE:3: runtimes.sandbox.memry: unknown key (known: ",
			`FILE:4: runtimes.sandbox.pids: want an integer, got "lots"`,
		},
	}, {
		name: "typo in the runtime in use",
		file: "runtime: local\nruntimes:\n  local:\n    tmp_dir: /tmp\n",
		want: []string{"FILE:4: runtimes.local.tmp_dir: unknown key (known: state_dir, temp_dir)"},
	}, {
		name: "typo in a runtime not in use",
		file: "runtimes:\n  docker:\n    memroy: 1GiB\n    pids: [1]\n",
		args: []string{"--runtime", "local"},
		want: []string{
			"FILE:3: runtimes.docker.memroy: unknown key",
			"FILE:4: runtimes.docker.pids: want an integer, got [1]",
		},
	}, {
		name: "invalid setting of the sandbox under auto",
		file: "runtimes:\n  sandbox:\n    network: bridge\n    memory: -1\n",
		args: []string{"--runtime", "auto"},
		want: []string{
			"FILE:3: runtimes.sandbox.network: unknown network mode",
			"FILE:4: runtimes.sandbox.memory: must not be negative",
		},
	}, {
		name: "flag given to the sandbox's settings",
		args: []string{"--runtime", "auto", "--network", "bridge"},
		want: []string{`--network: unknown network mode "bridge"`},
	}, {
		name: "file, variable and flag at once",
		file: "exec:\n  timeout: soon\nruntimes:\n  sandbox:\n    cpus: many\n",
		args: []string{"--runtime", "auto", "--memory", "lots"},
		env:  map[string]string{"EXECBOX_LIMITS_PIDS": "some"},
		want: []string{
			`FILE:2: exec.timeout: invalid duration "soon"`,
			`FILE:5: runtimes.sandbox.cpus: want a number, got "many"`,
			`EXECBOX_LIMITS_PIDS: invalid integer "some"`,
			`--memory: invalid size "lots"`,
		},
	}, {
		name: "an alias as a key",
		file: "exec: &runtime {timeout: 1s}\n*runtime : local\n",
		args: []string{"--runtime", "auto"},
		want: []string{"FILE:2: config: a key must be a plain name"},
	}, {
		name: "misspelt top-level variables",
		args: []string{"--runtime", "local"},
		env:  map[string]string{"EXECBOX_ISOLATON": "require", "EXECBOX_RUNTIMES_SANDBOX_ROOTFS": "/x"},
		want: []string{
			"EXECBOX_ISOLATON: unknown variable; did you mean EXECBOX_ISOLATION?",
			"EXECBOX_RUNTIMES_SANDBOX_ROOTFS: runtime settings have no variables",
		},
	}, {
		name: "misspelt variable",
		args: []string{"--runtime", "local"},
		env:  map[string]string{"EXECBOX_LIMITS_MEMROY": "1GiB"},
		want: []string{"EXECBOX_LIMITS_MEMROY: unknown variable (known: EXECBOX_LIMITS_CPU_TIME, "},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "execbox.yaml")
			if err := os.WriteFile(file, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			marker := filepath.Join(dir, "ran")
			args := append([]string{"exec", "--config", file, "--temp-workspace"}, tt.args...)
			o := mainRun(t, nil, nil, append(args, "--", "touch", marker)...)
			if o.code != ExitUsage {
				t.Errorf("exit code %d, want %d", o.code, ExitUsage)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command ran (on the %s)", map[bool]string{true: "host", false: "sandbox"}[strings.Contains(o.stderr, "local runtime")])
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "FILE", file); !strings.Contains(o.stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			if n := strings.Count(o.stderr, "\n"); n != len(tt.want) {
				t.Errorf("stderr has %d lines, want one per problem (%d)", n, len(tt.want))
			}
		})
	}
}

// TestConfiguredSandboxNeverFallsBack: a red team's finding after the
// first fix. Settings that decode but name what is not there (a root
// file system, a directory) made the sandbox's health or probe fail as
// on a host without user namespaces, and "runtime: auto" ran the
// command on the host. A sandbox given settings never falls back.
func TestConfiguredSandboxNeverFallsBack(t *testing.T) {
	for _, setting := range []string{"rootfs: /nonexistent-rootfs", "temp_dir: /nonexistent-tmp", "state_dir: /proc/execbox-cannot-exist"} {
		t.Run(setting, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "execbox.yaml")
			if err := os.WriteFile(file, []byte("runtimes:\n  sandbox:\n    "+setting+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(dir, "ran")
			o := mainRun(t, nil, nil, "exec", "--config", file, "--runtime", "auto", "--temp-workspace", "--", "touch", marker)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command ran (exit %d, stderr %q)", o.code, o.stderr)
			}
			if o.code == 0 || !strings.Contains(o.stderr, "not falling back") {
				t.Errorf("exit %d, stderr %q; want a failure saying it does not fall back", o.code, o.stderr)
			}
		})
	}
}

// TestServeNeverFallsBackToLocal: execbox serve with runtime auto where
// the sandbox runtime cannot run refuses to start, rather than serve
// host processes to clients who cannot see the fallback; with an
// explicit runtime local it serves them.
func TestServeNeverFallsBackToLocal(t *testing.T) {
	dir := t.TempDir()
	// A state directory that cannot be made: the sandbox's Health says
	// it cannot run, as on a host without what it needs.
	file := filepath.Join(dir, "execbox.yaml")
	if err := os.WriteFile(file, []byte("runtimes:\n  sandbox:\n    state_dir: /proc/execbox-cannot-exist\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, runtime := range []string{"auto", "sandbox"} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		o := mainRun(t, ctx, nil, "serve", "--config", file, "--runtime", runtime, "--listen", "127.0.0.1:0", "--no-auth")
		cancel()
		if o.code != ExitFailure || !strings.Contains(o.stderr, "never falls back to the local runtime") || strings.Contains(o.stderr, "serving the API") {
			t.Errorf("serve --runtime %s with the sandbox unavailable: code %d, stderr %q; want %d, refusing to start", runtime, o.code, o.stderr, ExitFailure)
		}
	}
	url, stop := startServe(t, "--config", file, "--runtime", "local", "--listen", "127.0.0.1:0", "--no-auth")
	if url == "" {
		t.Error("serve --runtime local did not start")
	}
	stop()
}

// TestServeConfigErrorBeforeListening: a configuration error stops serve
// with exit 2 before it listens.
func TestServeConfigErrorBeforeListening(t *testing.T) {
	file := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(file, []byte("runtimes:\n  sandbox:\n    memry: 1GiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	o := mainRun(t, ctx, nil, "serve", "--config", file, "--runtime", "auto", "--listen", "127.0.0.1:0", "--no-auth")
	if o.code != ExitUsage || !strings.Contains(o.stderr, file+":3: runtimes.sandbox.memry: unknown key") || strings.Contains(o.stderr, "serving the API") {
		t.Errorf("code %d, stderr %q; want %d naming the key and its line", o.code, o.stderr, ExitUsage)
	}
}
