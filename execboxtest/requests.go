package execboxtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

func testClosedErrors(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	ctx := t.Context()
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	id, ws := sb.ID(), sb.Workspace()
	s.close(t, sb)
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v, want nil (idempotent)", err)
	}
	if sb.ID() != id || sb.Workspace() != ws {
		t.Errorf("ID and Workspace changed after Close")
	}
	f := sb.Files()
	var buf bytes.Buffer
	for what, err := range map[string]error{
		"Exec": func() error { _, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}}); return err }(),
		"Start": func() error {
			p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"true"}})
			if err == nil {
				p.Kill(ctx)
			}
			return err
		}(),
		"Snapshot":  sb.Snapshot(ctx, &buf),
		"ReadFile":  func() error { _, err := f.ReadFile(ctx, "x", execbox.ReadOptions{}); return err }(),
		"WriteFile": f.WriteFile(ctx, "x", []byte("x"), execbox.WriteOptions{}),
		"Stat":      func() error { _, err := f.Stat(ctx, "."); return err }(),
		"List":      func() error { _, err := f.List(ctx, "."); return err }(),
		"Mkdir":     f.Mkdir(ctx, "d", execbox.MkdirOptions{}),
		"Remove":    f.Remove(ctx, "x", execbox.RemoveOptions{}),
		"Upload":    f.Upload(ctx, ".", makeTar(t, nil)),
		"Download":  f.Download(ctx, ".", &buf),
	} {
		wantKind(t, what+" after Close", err, execbox.ErrClosed)
	}
	res, err := p.Wait(ctxTimeout(t, s.slack))
	if err == nil && res.Reason != execbox.ReasonKilled {
		t.Errorf("Wait on a process of the closed sandbox: %s, want reason %q (or ErrClosed)", res.String(), execbox.ReasonKilled)
	} else if err != nil && !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("Wait on a process of the closed sandbox: %v, want a Result or ErrClosed", err)
	}
}

func testConcurrentExecs(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			n := strconv.Itoa(i)
			res, err := sb.Exec(t.Context(), execbox.ExecRequest{
				Command: sh(`printf '%s %s\n' "$1" "$N"; printf '%s' "$1" > "out-$1"; sleep 0.2; echo "$1" >&2`, n),
				Env:     map[string]string{"N": n},
			})
			if err != nil {
				t.Errorf("Exec %d: %v", i, err)
				return
			}
			if !res.Success() || string(res.Stdout.Data) != n+" "+n+"\n" || string(res.Stderr.Data) != n+"\n" {
				t.Errorf("Exec %d: %s, stdout %q, stderr %q", i, res.String(), res.Stdout.Data, res.Stderr.Data)
			}
		})
		wg.Go(func() {
			p := fmt.Sprintf("files-%d", i)
			if err := sb.Files().WriteFile(t.Context(), p, []byte(p), execbox.WriteOptions{}); err != nil {
				t.Errorf("WriteFile %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	for i := range 16 {
		for _, p := range []string{fmt.Sprintf("out-%d", i), fmt.Sprintf("files-%d", i)} {
			b, err := sb.Files().ReadFile(t.Context(), p, execbox.ReadOptions{})
			if err != nil || !strings.HasSuffix(p, string(b)) {
				t.Errorf("ReadFile(%s) = %q, %v", p, b, err)
			}
		}
	}
}

func testBadRequests(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	ok := []string{"true"}
	for _, tc := range []struct {
		name  string
		req   execbox.ExecRequest
		field string
	}{
		{"empty", execbox.ExecRequest{}, "command"},
		{"both", execbox.ExecRequest{Command: ok, Shell: "true"}, "shell"},
		{"empty-program", execbox.ExecRequest{Command: []string{"", "x"}}, "command[0]"},
		{"nul-arg", execbox.ExecRequest{Command: []string{"echo", "a\x00b"}}, "command[1]"},
		{"nul-shell", execbox.ExecRequest{Shell: "echo a\x00b"}, "shell"},
		{"nul-dir", execbox.ExecRequest{Command: ok, Dir: "a\x00b"}, "dir"},
		{"negative-timeout", execbox.ExecRequest{Command: ok, Timeout: -time.Second}, "timeout"},
		{"negative-grace", execbox.ExecRequest{Command: ok, GracePeriod: -time.Second}, "grace_period"},
		{"negative-output-limit", execbox.ExecRequest{Command: ok, OutputLimit: -1}, "output_limit"},
		{"negative-event-window", execbox.ExecRequest{Command: ok, EventWindow: -1}, "event_window"},
		{"env-key-equals", execbox.ExecRequest{Command: ok, Env: map[string]string{"A=B": "c"}}, "env.A=B"},
		{"env-key-empty", execbox.ExecRequest{Command: ok, Env: map[string]string{"": "c"}}, "env"},
		{"env-value-nul", execbox.ExecRequest{Command: ok, Env: map[string]string{"K": "a\x00b"}}, "env.K"},
		{"env-policy", execbox.ExecRequest{Command: ok, EnvPolicy: "everything"}, "env_policy"},
		{"env-allow", execbox.ExecRequest{Command: ok, EnvPolicy: execbox.EnvAllow, EnvAllow: []string{"A=B"}}, "env_allow[0]"},
		{"negative-cpu-time", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{CPUTime: -time.Second}}, "limits.cpu_time"},
		{"sub-second-cpu-time", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{CPUTime: time.Millisecond}}, "limits.cpu_time"},
		{"negative-file-size", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{FileSize: -1}}, "limits.file_size"},
		{"negative-open-files", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{OpenFiles: -1}}, "limits.open_files"},
		{"negative-address-space", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{AddressSpace: -1}}, "limits.address_space"},
		{"negative-memory", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{Memory: -1}}, "limits.memory"},
		{"negative-pids", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{PIDs: -1}}, "limits.pids"},
		{"negative-cpus", execbox.ExecRequest{Command: ok, Limits: execbox.Limits{CPUs: -0.5}}, "limits.cpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Exec(t.Context(), tc.req)
			if !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Errorf("Exec: %v (result %s), want ErrInvalidArgument", err, res.String())
			} else if !hasField(err, tc.field, execbox.ErrInvalidArgument) {
				t.Errorf("Exec: %v, want a *FieldError for field %q", err, tc.field)
			}
			p, err := sb.Start(t.Context(), tc.req)
			if p != nil {
				p.Kill(t.Context())
			}
			if !hasField(err, tc.field, execbox.ErrInvalidArgument) {
				t.Errorf("Start: %v, want ErrInvalidArgument with a *FieldError for field %q", err, tc.field)
			}
		})
	}
	t.Run("every-problem-at-once", func(t *testing.T) {
		_, err := sb.Exec(t.Context(), execbox.ExecRequest{Timeout: -1, OutputLimit: -1})
		for _, f := range []string{"command", "timeout", "output_limit"} {
			if !hasField(err, f, execbox.ErrInvalidArgument) {
				t.Errorf("Exec with three problems: %v, want a *FieldError for %q among them", err, f)
			}
		}
	})
}

func testBadSpecs(t *testing.T, s *suite) {
	dir := t.TempDir()
	writeHost(t, filepath.Join(dir, "keep"), "keep", 0o644)
	before := hostTree(t, dir)
	for _, tc := range []struct {
		name  string
		mod   func(*execbox.Spec)
		field string
	}{
		{"asset-empty", func(sp *execbox.Spec) { sp.Assets = []execbox.Asset{{Path: "x"}} }, "assets[0].source"},
		{"asset-both", func(sp *execbox.Spec) { sp.Assets = []execbox.Asset{{Path: "x", Source: dir, Content: []byte("x")}} }, "assets[0].content"},
		{"asset-no-path", func(sp *execbox.Spec) { sp.Assets = []execbox.Asset{{Content: []byte("x")}} }, "assets[0].path"},
		{"asset-mode", func(sp *execbox.Spec) { sp.Assets = []execbox.Asset{{Content: []byte("x"), Path: "x", Mode: 0o170000}} }, "assets[0].mode"},
		{"setup-empty", func(sp *execbox.Spec) { sp.Setup = []execbox.ExecRequest{{Shell: "true"}, {}} }, "setup[1].command"},
		{"setup-timeout", func(sp *execbox.Spec) { sp.Setup = []execbox.ExecRequest{{Shell: "true", Timeout: -1}} }, "setup[0].timeout"},
		{"env-key", func(sp *execbox.Spec) { sp.Env = map[string]string{"A=B": "x"} }, "env.A=B"},
		{"env-policy", func(sp *execbox.Spec) { sp.EnvPolicy = "everything" }, "env_policy"},
		{"negative-memory", func(sp *execbox.Spec) { sp.Limits.Memory = -1 }, "limits.memory"},
		{"nul-workspace", func(sp *execbox.Spec) { sp.Workspace = dir + "\x00x" }, "workspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := s.baseSpec(t)
			spec.Workspace = dir
			// A setup command that would show if Create went ahead.
			spec.Setup = append(spec.Setup, execbox.ExecRequest{Shell: "echo oops > created"})
			tc.mod(&spec)
			sb, err := s.rt.Create(t.Context(), spec)
			if err == nil {
				sb.Close()
				t.Fatalf("Create succeeded, want ErrInvalidArgument for %s", tc.field)
			}
			if !hasField(err, tc.field, execbox.ErrInvalidArgument) {
				t.Errorf("Create: %v, want ErrInvalidArgument with a *FieldError for field %q", err, tc.field)
			}
			diffTrees(t, "given workspace after a refused spec", hostTree(t, dir), before)
		})
	}
}

// limitCases are one non-zero value per limit, with the field name.
var limitCases = []struct {
	field string
	limit execbox.Limits
	has   func(execbox.Capabilities) bool
}{
	{"limits.cpu_time", execbox.Limits{CPUTime: time.Second}, func(c execbox.Capabilities) bool { return c.Rlimits }},
	{"limits.file_size", execbox.Limits{FileSize: 1 << 20}, func(c execbox.Capabilities) bool { return c.Rlimits }},
	{"limits.open_files", execbox.Limits{OpenFiles: 64}, func(c execbox.Capabilities) bool { return c.Rlimits }},
	{"limits.address_space", execbox.Limits{AddressSpace: 1 << 30}, func(c execbox.Capabilities) bool { return c.Rlimits }},
	{"limits.memory", execbox.Limits{Memory: 256 << 20}, func(c execbox.Capabilities) bool { return c.Memory }},
	{"limits.pids", execbox.Limits{PIDs: 64}, func(c execbox.Capabilities) bool { return c.PIDs }},
	{"limits.cpus", execbox.Limits{CPUs: 1}, func(c execbox.Capabilities) bool { return c.CPUs }},
}

// testUnsupportedLimits checks that a limit the runtime does not claim is
// refused, never silently ignored.
func testUnsupportedLimits(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	n := 0
	for _, lc := range limitCases {
		if lc.has(s.caps) {
			continue
		}
		n++
		_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}, Limits: lc.limit})
		if !hasField(err, lc.field, execbox.ErrUnsupported) {
			t.Errorf("Exec with %s, which Capabilities does not claim: %v, want ErrUnsupported with a *FieldError for it", lc.field, err)
		}
		spec := s.baseSpec(t)
		spec.Limits = spec.Limits.Merge(lc.limit)
		sb2, err := s.rt.Create(t.Context(), spec)
		if err == nil {
			sb2.Close()
		}
		if !hasField(err, lc.field, execbox.ErrUnsupported) {
			t.Errorf("Create with %s, which Capabilities does not claim: %v, want ErrUnsupported with a *FieldError for it", lc.field, err)
		}
	}
	if !s.caps.User {
		n++
		_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}, User: &execbox.User{UID: 65534, GID: 65534}})
		if !errors.Is(err, execbox.ErrUnsupported) {
			t.Errorf("Exec with User, which Capabilities does not claim: %v, want ErrUnsupported", err)
		}
	}
	if n == 0 {
		t.Log("the runtime claims every capability")
	}
}

// claimed runs f as the subtest name if the runtime claims the
// capability has stands for, and else runs nothing: a limit not claimed
// is refused, which UnsupportedLimits checks. A subtest that cannot
// apply to a runtime is not run rather than skipped, so that a skip
// always means a missing dependency (testutil.Require).
func claimed(t *testing.T, has bool, name string, f func(t *testing.T)) {
	t.Helper()
	if has {
		t.Run(name, f)
	}
}

func testLimits(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	claimed(t, s.caps.Rlimits, "cpu_time", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{Command: sh("while :; do :; done"), Limits: execbox.Limits{CPUTime: time.Second}, Timeout: 30 * time.Second})
		if res.Reason != execbox.ReasonCPULimit || res.ExitCode != -1 {
			t.Errorf("busy loop with CPUTime 1s: %s (reason %q, exit code %d), want reason %q, -1", res.String(), res.Reason, res.ExitCode, execbox.ReasonCPULimit)
		}
		// CPU time, not wall time: a loaded machine gives the loop a
		// small share of a CPU, and the 30 s timeout, with its own
		// reason, bounds the wait. Runtimes that report no usage give 0.
		if c := res.CPUTime(); c > 2*time.Second {
			t.Errorf("busy loop with CPUTime 1s used %v of CPU", c)
		}
	})
	claimed(t, s.caps.Rlimits, "file_size", func(t *testing.T) {
		t.Parallel()
		const limit = 64 << 10
		res := mustExec(t, sb, execbox.ExecRequest{
			Command: sh("head -c 131072 /dev/zero > big; echo $?"),
			Limits:  execbox.Limits{FileSize: limit},
		})
		if code := strings.TrimSpace(string(res.Stdout.Data)); code == "0" || code == "" {
			t.Errorf("writing 128 KiB with FileSize 64 KiB: head exited %q, want a failure (SIGXFSZ or EFBIG)", code)
		}
		fi, err := sb.Files().Stat(t.Context(), "big")
		if err != nil || fi.Size > limit {
			t.Errorf("file written past FileSize %d: size %d, %v", limit, fi.Size, err)
		}
	})
	claimed(t, s.caps.Rlimits, "open_files-address_space", func(t *testing.T) {
		t.Parallel()
		sb := s.create(t, func(sp *execbox.Spec) { sp.Limits.OpenFiles = 64 })
		if got := strings.TrimSpace(shOK(t, sb, "ulimit -n")); got != "64" {
			t.Errorf("Spec OpenFiles 64: ulimit -n = %s", got)
		}
		got := strings.TrimSpace(execOK(t, sb, execbox.ExecRequest{Command: sh("ulimit -n; ulimit -v"), Limits: execbox.Limits{OpenFiles: 32, AddressSpace: 1 << 30}}))
		if want := "32\n1048576"; got != want {
			t.Errorf("request OpenFiles 32, AddressSpace 1 GiB: ulimit -n, -v = %q, want %q", got, want)
		}
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}, Limits: execbox.Limits{AddressSpace: 64 << 20}})
		if res.Success() {
			t.Errorf("dd with a 256 MiB buffer under AddressSpace 64 MiB succeeded")
		}
	})
	claimed(t, s.caps.Memory, "memory", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{
			Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"},
			Limits:  execbox.Limits{Memory: 64 << 20},
			Timeout: 60 * time.Second,
		})
		if res.Reason != execbox.ReasonOOMKilled || !res.OOMKilled() {
			t.Errorf("dd with a 256 MiB buffer under Memory 64 MiB: %s, want reason %q", res.String(), execbox.ReasonOOMKilled)
		}
		res = mustExec(t, sb, execbox.ExecRequest{
			Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=8M", "count=1"},
			Limits:  execbox.Limits{Memory: 64 << 20},
		})
		if !res.Success() {
			t.Errorf("dd with an 8 MiB buffer under Memory 64 MiB: %s, want exited 0", res.String())
		}
	})
	claimed(t, s.caps.PIDs, "pids", func(t *testing.T) {
		t.Parallel()
		sb := s.create(t, nil)
		const limit = 16
		res := mustExec(t, sb, execbox.ExecRequest{
			Command: sh(`i=0; while [ $i -lt 200 ]; do sleep 2 </dev/null >/dev/null 2>&1 & i=$((i+1)); echo $i > count; done`),
			Limits:  execbox.Limits{PIDs: limit},
			Timeout: 20 * time.Second,
		})
		b, err := sb.Files().ReadFile(t.Context(), "count", execbox.ReadOptions{})
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n >= limit || n == 0 {
			t.Errorf("fork loop under PIDs %d: %d processes started (%s, %v), want fewer than %d", limit, n, res.String(), err, limit)
		}
	})
	claimed(t, s.caps.CPUs, "cpus", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{Command: sh("while :; do :; done"), Limits: execbox.Limits{CPUs: 0.25}, Timeout: 2 * time.Second})
		if res.CPUTime() == 0 {
			t.Fatalf("the runtime claims CPUs but reports no CPU time for a timed-out busy loop: %s", res.String())
		}
		if r := float64(res.CPUTime()) / float64(res.Duration); r > 0.5 {
			t.Errorf("busy loop under CPUs 0.25 used %v of CPU in %v (%.2f cores)", res.CPUTime(), res.Duration, r)
		}
	})
}

func testUser(t *testing.T, s *suite) {
	nobody := &execbox.User{UID: 65534, GID: 65534}
	// A temporary workspace is owned by the spec's user.
	sb := s.create(t, func(sp *execbox.Spec) { sp.User = nobody })
	if got := shOK(t, sb, "id -u; id -g; echo x > written && cat written"); got != "65534\n65534\nx\n" {
		t.Errorf("Spec.User 65534:65534: id -u, id -g, write = %q", got)
	}
	me := &execbox.User{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	if got := execOK(t, sb, execbox.ExecRequest{Command: sh("id -u"), User: me}); got != strconv.Itoa(os.Geteuid())+"\n" {
		t.Errorf("request User %d over Spec.User 65534: id -u = %q", me.UID, got)
	}
	// A user who cannot enter the workspace: refused with a kind.
	sb = s.create(t, nil)
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: sh("id -u"), User: nobody})
	if err != nil && !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("Exec as a user the workspace does not admit: %v, want ErrPermission (or a result)", err)
	} else if err == nil {
		t.Logf("Exec as 65534 in a workspace owned by %d: %s", os.Geteuid(), res.String())
	}
}

func testResourceUsage(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=32M", "count=1"}})
	if !res.Success() {
		t.Fatalf("dd: %s", res.String())
	}
	if res.PeakMemory < 32<<20 {
		t.Errorf("dd with a 32 MiB buffer: PeakMemory %d, want at least %d", res.PeakMemory, 32<<20)
	}
	res = mustExec(t, sb, execbox.ExecRequest{Command: sh(`i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)})
	if !res.Success() {
		t.Fatalf("busy loop: %s", res.String())
	}
	if res.CPUTime() <= 0 || res.Duration <= 0 {
		t.Errorf("busy loop: CPU time %v, duration %v; want both > 0", res.CPUTime(), res.Duration)
	}
}
