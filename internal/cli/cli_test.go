package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/testutil"
)

func TestMain(m *testing.M) {
	// Hermetic: no configuration from the developer's environment.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "EXECBOX_") && !strings.HasPrefix(k, "EXECBOX_TEST_") {
			os.Unsetenv(k)
		}
	}
	// The CLI is tested over the local runtime (host paths and PIDs):
	// the default, auto, picks the sandbox runtime where it works.
	os.Setenv("EXECBOX_RUNTIME", "local")
	if os.Getenv(mainEnv) == "1" {
		// A re-executed test binary: execbox itself (see startServeProcess).
		os.Exit(runMain())
	}
	// A run with --cache keeps caches in XDG_CACHE_HOME
	// (cacheWorkspace): the tests' own, removed at the end.
	cache, err := os.MkdirTemp("", "execbox-cli-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	// forwardInput's read of the terminal, blocked when a session ends,
	// is left to return on its own (shell.go): in the CLI the process
	// exits; here TestShellTerminal's PTY stays open until its cleanup.
	code := testutil.LeakCheck(m.Run(), "github.com/execbox/execbox/internal/cli.forwardInput")
	os.RemoveAll(cache)
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
	os.Exit(code)
}

type outcome struct {
	code           int
	stdout, stderr string
}

// mainRun runs Main with args and stdin (nil for none) and returns what it
// did.
func mainRun(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) outcome {
	t.Helper()
	if ctx == nil {
		ctx = t.Context()
	}
	var out, errb bytes.Buffer
	code := Main(ctx, args, stdin, &out, &errb)
	o := outcome{code: code, stdout: out.String(), stderr: errb.String()}
	t.Logf("execbox %q: code %d\nstdout: %q\nstderr: %q", args, o.code, o.stdout, o.stderr)
	return o
}

// execIn runs "execbox exec" in a temporary workspace.
func execIn(t *testing.T, args ...string) outcome {
	t.Helper()
	return mainRun(t, nil, nil, append([]string{"exec", "--config=", "--temp-workspace"}, args...)...)
}

func TestExecExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		code int
		note string // expected on stderr
	}{
		{"success", []string{"--", "true"}, 0, ""},
		{"exit code passes through", []string{"--", "sh", "-c", "exit 3"}, 3, ""},
		{"timeout", []string{"--timeout", "500ms", "--grace-period", "100ms", "--", "sleep", "30"}, 124, "execbox: timed out after 500ms"},
		{"signal", []string{"--", "sh", "-c", "kill -9 $$"}, 128 + 9, "execbox: killed by signal SIGKILL"},
		{"program not found", []string{"--", "execbox-no-such-program"}, ExitNotFound, "execbox-no-such-program"},
		{"not executable", []string{"--", "/etc/passwd"}, ExitCannotExec, "/etc/passwd"},
		{"unsupported limit", []string{"--memory", "1G", "--", "true"}, ExitFailure, "execbox: --memory: not supported by the local runtime"},
		{"workdir escapes", []string{"--workdir", "../..", "--", "true"}, ExitUsage, "execbox: --workdir: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := execIn(t, tt.args...)
			if o.code != tt.code {
				t.Errorf("exit code %d, want %d", o.code, tt.code)
			}
			if !strings.Contains(o.stderr, tt.note) {
				t.Errorf("stderr %q lacks %q", o.stderr, tt.note)
			}
			if tt.note == "" && o.stderr != "" {
				t.Errorf("stderr %q, want none", o.stderr)
			}
		})
	}
}

func TestExecStreams(t *testing.T) {
	t.Parallel()
	o := execIn(t, "--env", "GREETING=hello", "--", "sh", "-c", `echo "$GREETING out"; echo err >&2; printf '\377\376'`)
	if o.code != 0 {
		t.Fatalf("exit code %d", o.code)
	}
	if o.stdout != "hello out\n\xff\xfe" || o.stderr != "err\n" {
		t.Errorf("stdout %q, stderr %q", o.stdout, o.stderr)
	}
}

func TestExecStdin(t *testing.T) {
	t.Parallel()
	t.Run("passed through", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("line of input\n", 10000)
		o := mainRun(t, nil, strings.NewReader(in), "exec", "--config=", "--temp-workspace", "--", "cat")
		if o.code != 0 || o.stdout != in {
			t.Errorf("exit code %d, %d bytes out, want 0 and %d bytes", o.code, len(o.stdout), len(in))
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		o := mainRun(t, nil, nil, "exec", "--config=", "--temp-workspace", "--", "cat")
		if o.code != 0 || o.stdout != "" {
			t.Errorf("exit code %d, stdout %q", o.code, o.stdout)
		}
	})
	t.Run("never read", func(t *testing.T) {
		// A stdin that never ends (a terminal nobody types into) must not
		// keep execbox waiting after the command exits.
		t.Parallel()
		r, w := io.Pipe()
		t.Cleanup(func() { w.Close() })
		done := make(chan outcome, 1)
		go func() {
			done <- mainRun(t, nil, r, "exec", "--config=", "--temp-workspace", "--", "sh", "-c", "exit 4")
		}()
		select {
		case o := <-done:
			if o.code != 4 {
				t.Errorf("exit code %d, want 4", o.code)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("execbox still waits for stdin after the command exited")
		}
	})
}

func TestExecJSON(t *testing.T) {
	t.Parallel()
	o := execIn(t, "--json", "--output-limit", "16", "--", "sh", "-c", "echo 0123456789abcdefghijklmnop; echo e >&2; exit 5")
	if o.code != 5 {
		t.Errorf("exit code %d, want 5", o.code)
	}
	var wire api.Result // the HTTP API's form
	if err := json.Unmarshal([]byte(o.stdout), &wire); err != nil {
		t.Fatalf("stdout is not a Result: %v", err)
	}
	res := wire.Result()
	if res.Reason != execbox.ReasonExited || res.ExitCode != 5 || res.Stdout.Total != 27 || !res.Stdout.Truncated() ||
		string(res.Stderr.Data) != "e\n" {
		t.Errorf("result %+v", res)
	}
	if want := fmt.Sprintf("execbox: stdout truncated: %d of 27 bytes omitted", res.Stdout.Omitted); !strings.Contains(o.stderr, want) {
		t.Errorf("stderr %q lacks %q", o.stderr, want)
	}
	if strings.Contains(o.stderr, "e\n") {
		t.Errorf("stderr %q: the command's output was streamed", o.stderr)
	}
}

// TestExecStreamsPastOutputLimit checks that the output limit, which bounds
// the kept result, does not cut streamed output, and that nothing claims
// it was cut.
func TestExecStreamsPastOutputLimit(t *testing.T) {
	t.Parallel()
	o := execIn(t, "--output-limit", "1K", "--", "head", "-c", "100000", "/dev/zero")
	if o.code != 0 || len(o.stdout) != 100000 {
		t.Errorf("exit code %d, %d bytes, want 0 and 100000", o.code, len(o.stdout))
	}
	if o.stderr != "" {
		t.Errorf("stderr %q, want none", o.stderr)
	}
}

func TestExecWorkspace(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("current directory by default", func(t *testing.T) {
		t.Chdir(dir)
		o := mainRun(t, nil, nil, "exec", "--config=", "--", "ls")
		if o.code != 0 || o.stdout != "marker\n" {
			t.Errorf("exit code %d, stdout %q", o.code, o.stdout)
		}
	})
	t.Run("flag", func(t *testing.T) {
		o := mainRun(t, nil, nil, "exec", "--config=", "--workspace", dir, "--", "ls")
		if o.code != 0 || o.stdout != "marker\n" {
			t.Errorf("exit code %d, stdout %q", o.code, o.stdout)
		}
	})
	t.Run("config file", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "execbox.yaml")
		if err := os.WriteFile(cfg, []byte("workspace: "+dir+"\nexec: {timeout: 300ms, grace_period: 100ms}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		o := mainRun(t, nil, nil, "exec", "--config", cfg, "--", "sh", "-c", "ls; sleep 30")
		if o.code != 124 || o.stdout != "marker\n" {
			t.Errorf("exit code %d, stdout %q; want 124 and marker", o.code, o.stdout)
		}
	})
	t.Run("temporary", func(t *testing.T) {
		t.Chdir(dir)
		o := mainRun(t, nil, nil, "exec", "--config=", "--temp-workspace", "--", "sh", "-c", "pwd; ls")
		ws := strings.TrimSpace(o.stdout)
		if o.code != 0 || ws == dir || strings.Contains(o.stdout, "marker") {
			t.Errorf("exit code %d, stdout %q", o.code, o.stdout)
		}
		if _, err := os.Stat(ws); !os.IsNotExist(err) {
			t.Errorf("temporary workspace %s not removed: %v", ws, err)
		}
	})
}

// sigCause is a context cause naming a signal, as a caller of Main may set.
type sigCause struct{ sig os.Signal }

func (c sigCause) Error() string     { return c.sig.String() }
func (c sigCause) Signal() os.Signal { return c.sig }

// TestExecInterrupted cancels Main's context as a signal would, and checks
// the exit code and that the command's process tree is gone.
func TestExecInterrupted(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cause error
		code  int
	}{
		{"SIGINT from signal.NotifyContext", fmt.Errorf("%v signal received", syscall.SIGINT), 130},
		{"SIGTERM from signal.NotifyContext", fmt.Errorf("%v signal received", syscall.SIGTERM), 143},
		{"typed SIGTERM", sigCause{syscall.SIGTERM}, 143},
		{"plain cancel", nil, 130},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ctx, cancel := context.WithCancelCause(t.Context())
			done := make(chan outcome, 1)
			go func() {
				done <- mainRun(t, ctx, nil, "exec", "--config=", "--workspace", dir, "--grace-period", "100ms", "--",
					"sh", "-c", "sleep 300 & echo $! > pid; wait")
			}()
			pid := testutil.WaitPIDFile(t, filepath.Join(dir, "pid"))
			cancel(tt.cause)
			select {
			case o := <-done:
				if o.code != tt.code {
					t.Errorf("exit code %d, want %d", o.code, tt.code)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Main did not return after cancel")
			}
			if testutil.Alive(pid) {
				t.Errorf("grandchild %d survived", pid)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want []string // on stderr
	}{
		{"no arguments", nil, []string{"Usage:"}},
		{"unknown command", []string{"exex"}, []string{`execbox: unknown command "exex" (commands: exec, health, version, help`}},
		{"unknown flag", []string{"exec", "--bogus", "--", "true"}, []string{"execbox: exec: unknown flag --bogus"}},
		{"flag without value", []string{"exec", "--timeout"}, []string{"execbox: exec: --timeout: needs a value"}},
		{"no command", []string{"exec", "--config="}, []string{"execbox: exec: no command given"}},
		{"unknown runtime", []string{"exec", "--config=", "--runtime", "dockr", "--", "true"},
			[]string{`runtime: unknown runtime "dockr" (known: `, `docker`, `local`}},
		{"every bad value at once", []string{"exec", "--config=", "--timeout", "-1s", "--memory", "lots", "--env-policy", "all", "--", "true"},
			[]string{"execbox: --timeout: must not be negative\n", `execbox: --memory: invalid size "lots"`, `execbox: --env-policy: unknown policy "all"`}},
		{"missing config file", []string{"exec", "--config", "/nonexistent/execbox.yaml", "--", "true"},
			[]string{"execbox: --config: /nonexistent/execbox.yaml: no such file or directory"}},
		{"both workspaces", []string{"exec", "--workspace", "/tmp", "--temp-workspace", "--", "true"},
			[]string{"cannot be used together"}},
		{"empty env name", []string{"exec", "--config=", "--env", "=x", "--", "true"}, []string{`execbox: --env: "=x" has no variable name`}},
		{"health argument", []string{"health", "extra"}, []string{"execbox: health: takes no arguments"}},
		{"help unknown", []string{"help", "nope"}, []string{`execbox: help: unknown command "nope"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mainRun(t, nil, nil, tt.args...)
			if o.code != ExitUsage {
				t.Errorf("exit code %d, want %d", o.code, ExitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("stderr %q lacks %q", o.stderr, w)
				}
			}
			if strings.Contains(o.stderr, "goroutine ") {
				t.Errorf("stderr holds a Go stack")
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "exec"}, {"exec", "-h"}, {"health", "--help"}, {"help", "version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			o := mainRun(t, nil, nil, args...)
			if o.code != 0 || !strings.Contains(o.stdout, "Usage") || o.stderr != "" {
				t.Errorf("exit code %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
		})
	}
	o := mainRun(t, nil, nil, "help", "exec")
	for _, flag := range []string{"--timeout DURATION", "--env NAME=VALUE", "--env-policy", "--workdir DIR", "--workspace DIR",
		"--output-limit SIZE", "--cpu-time DURATION", "--memory SIZE", "--config FILE", "--json", "$EXECBOX_EXEC_TIMEOUT", "current directory"} {
		if !strings.Contains(o.stdout, flag) {
			t.Errorf("exec help lacks %q", flag)
		}
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	o := mainRun(t, nil, nil, "health", "--config=")
	if o.code != 0 {
		t.Errorf("exit code %d", o.code)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) < 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME AVAILABLE DETAIL" {
		t.Fatalf("table %q", o.stdout)
	}
	found := false
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "local" {
			found = true
			if f[1] != "yes" {
				t.Errorf("local: %q", l)
			}
		}
	}
	if !found {
		t.Errorf("table %q does not list local", o.stdout)
	}

	if !strings.Contains(o.stdout, "\nauto: ") || !strings.Contains(o.stdout, "\nLANGUAGE ") {
		t.Errorf("health prints no auto line or no languages: %q", o.stdout)
	}

	o = mainRun(t, nil, nil, "health", "--config=", "--json")
	var rep healthReport
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil {
		t.Fatalf("--json: %v", err)
	}
	rows := rep.Runtimes
	if len(rows) == 0 || len(rows) != len(execbox.Names()) {
		t.Errorf("--json: %d rows for runtimes %q", len(rows), execbox.Names())
	}
	for _, r := range rows {
		if r.Name == "local" && (!r.Available || !strings.Contains(r.Detail, "probe (create, exec true, close) ok")) {
			t.Errorf("local: available %v, detail %q; want available after a live probe", r.Available, r.Detail)
		}
	}
	if rep.Auto == "" || len(rep.Languages) == 0 {
		t.Errorf("--json: auto %q, %d languages; want the runtime auto picks and the languages found", rep.Auto, len(rep.Languages))
	}
}

// TestHealthRequiredIsolationUnavailable: with isolation required and no
// sandbox (here: a sandbox runtime whose prerequisites fail on purpose),
// health exits 1 and says auto picks nothing.
func TestHealthRequiredIsolationUnavailable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "execbox.yaml")
	if err := os.WriteFile(cfgFile, []byte("isolation: require\nruntimes:\n  sandbox:\n    state_dir: relative/not/allowed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := mainRun(t, nil, nil, "health", "--config="+cfgFile, "--runtime=auto")
	if o.code != 1 || !strings.Contains(o.stdout, "auto: none") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and auto: none", o.code, o.stdout, o.stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		o := mainRun(t, nil, nil, args...)
		if o.code != 0 || !strings.HasPrefix(o.stdout, "execbox "+Version+"\n") || !strings.Contains(o.stdout, "go1") {
			t.Errorf("%q: exit code %d, stdout %q", args, o.code, o.stdout)
		}
	}
}

// agentDir holds the static execbox of staticAgent, made once per test
// binary and removed by TestMain: testutil.StaticExecbox builds once, so
// its directory must outlive every test that uses it.
var agentDir string

// staticAgent returns a static execbox, for sandboxes made from an image
// and for containers: in a directory others can search, since the
// sandbox's init runs the agent as an unprivileged host uid.
var staticAgent = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "execbox-cli-agent-")
	if err != nil {
		return "", err
	}
	agentDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return testutil.StaticExecbox(dir)
})
