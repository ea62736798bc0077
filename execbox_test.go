package execbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/local"
)

func TestRegistry(t *testing.T) {
	var r execbox.Registry
	factory := func(execbox.Options) (execbox.Runtime, error) { return nil, nil }
	r.Register("zeta", factory)
	r.Register("alpha", factory)
	if got := strings.Join(r.Names(), ","); got != "alpha,zeta" {
		t.Errorf("Names() = %s, want alpha,zeta", got)
	}
	_, err := r.Open("beta", execbox.Options{})
	if !errors.Is(err, execbox.ErrNotFound) {
		t.Fatalf("Open(unknown) = %v, want ErrNotFound", err)
	}
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "runtime" || !strings.Contains(fe.Problem, "alpha, zeta") {
		t.Errorf("Open(unknown) = %v, want a runtime field error listing alpha, zeta", err)
	}
	for _, name := range []string{"", "alpha"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			r.Register(name, factory)
		}()
	}
}

func TestExecRequestValidate(t *testing.T) {
	tests := []struct {
		name   string
		req    execbox.ExecRequest
		fields []string // every field reported, in order
	}{
		{"ok argv", execbox.ExecRequest{Command: []string{"true"}}, nil},
		{"ok shell", execbox.ExecRequest{Shell: "true"}, nil},
		{"empty", execbox.ExecRequest{}, []string{"command"}},
		{"both", execbox.ExecRequest{Command: []string{"a"}, Shell: "b"}, []string{"shell"}},
		{"empty program", execbox.ExecRequest{Command: []string{""}}, []string{"command[0]"}},
		{"nul arg", execbox.ExecRequest{Command: []string{"echo", "a\x00b"}}, []string{"command[1]"}},
		{"nul dir", execbox.ExecRequest{Shell: "x", Dir: "a\x00"}, []string{"dir"}},
		{"bad env", execbox.ExecRequest{Shell: "x", Env: map[string]string{"A=B": "1"}}, []string{"env.A=B"}},
		{"bad policy", execbox.ExecRequest{Shell: "x", EnvPolicy: "leaky"}, []string{"env_policy"}},
		{"many at once", execbox.ExecRequest{
			Timeout: -1, GracePeriod: -1, OutputLimit: -1, EventWindow: -1,
			Limits: execbox.Limits{CPUTime: -time.Second, Memory: -1, CPUs: -0.5},
		}, []string{"command", "timeout", "grace_period", "output_limit", "event_window", "limits.cpu_time", "limits.memory", "limits.cpus"}},
		{"sub-second cpu", execbox.ExecRequest{Shell: "x", Limits: execbox.Limits{CPUTime: time.Millisecond}}, []string{"limits.cpu_time"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			got := fieldsOf(err)
			if strings.Join(got, " ") != strings.Join(tt.fields, " ") {
				t.Errorf("fields = %v, want %v (err: %v)", got, tt.fields, err)
			}
			if err != nil && !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Errorf("%v is not ErrInvalidArgument", err)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	spec := execbox.Spec{
		Assets: []execbox.Asset{{Path: "a"}, {Source: "/x", Content: []byte("y"), Path: "b"}, {Content: []byte("z"), Mode: 0o4755, Path: "c"}},
		Setup:  []execbox.ExecRequest{{Shell: "ok"}, {Timeout: -1, Shell: "x"}},
	}
	got := fieldsOf(spec.Validate())
	want := []string{"assets[0].source", "assets[1].content", "assets[2].mode", "setup[1].timeout"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("fields = %v, want %v", got, want)
	}
	if err := (&execbox.Spec{}).Validate(); err != nil {
		t.Errorf("zero Spec: %v", err)
	}
	got = fieldsOf((&execbox.Spec{Timeout: -1, IdleTimeout: -time.Second}).Validate())
	if strings.Join(got, " ") != "timeout idle_timeout" {
		t.Errorf("negative lifetimes: fields = %v, want timeout idle_timeout", got)
	}
}

func TestCheckServerFields(t *testing.T) {
	if err := execbox.CheckServerFields("local", &execbox.Spec{}); err != nil {
		t.Errorf("none set: %v", err)
	}
	err := execbox.CheckServerFields("local", &execbox.Spec{Timeout: time.Minute, IdleTimeout: time.Second, Pool: "py"})
	if !errors.Is(err, execbox.ErrUnsupported) || errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("err = %v, want only ErrUnsupported", err)
	}
	if got := fieldsOf(err); strings.Join(got, " ") != "timeout idle_timeout pool" {
		t.Errorf("fields = %v", got)
	}
}

func TestCheckLimits(t *testing.T) {
	caps := execbox.Capabilities{Rlimits: true}
	err := execbox.CheckLimits("local", caps, execbox.Limits{CPUTime: time.Second, Memory: 1, PIDs: 2}, "limits.")
	if !errors.Is(err, execbox.ErrUnsupported) || errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("err = %v, want only ErrUnsupported", err)
	}
	if got := fieldsOf(err); strings.Join(got, " ") != "limits.memory limits.pids" {
		t.Errorf("fields = %v", got)
	}
}

func TestOutputText(t *testing.T) {
	o := execbox.Output{Data: []byte("ab\xffcd"), Total: 105, Omitted: 100, OmittedAt: 2}
	got := o.Text()
	want := "ab\n[... 100 bytes omitted ...]\n\uFFFDcd"
	if got != want || !o.Truncated() {
		t.Errorf("Text() = %q, want %q", got, want)
	}
	if got := (execbox.Output{Data: []byte("\xfe")}).Text(); got != "\uFFFD" {
		t.Errorf("Text() = %q", got)
	}
}

func TestShellExitCode(t *testing.T) {
	tests := []struct {
		res  execbox.Result
		want int
	}{
		{execbox.Result{Reason: execbox.ReasonExited, ExitCode: 3}, 3},
		{execbox.Result{Reason: execbox.ReasonSignaled, ExitCode: -1, Signal: execbox.SIGKILL}, 137},
		{execbox.Result{Reason: execbox.ReasonTimedOut, ExitCode: -1, Signal: execbox.SIGTERM}, 124},
		{execbox.Result{Reason: execbox.ReasonError, ExitCode: -1}, 125},
	}
	for _, tt := range tests {
		if got := tt.res.ShellExitCode(); got != tt.want {
			t.Errorf("%v: ShellExitCode() = %d, want %d", tt.res.String(), got, tt.want)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]execbox.Signal{"KILL": 9, "sigterm": 15, "SIGINT": 2, "9": 9} {
		if got, err := execbox.ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	if _, err := execbox.ParseSignal("NOPE"); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("ParseSignal(NOPE) = %v", err)
	}
	if execbox.SIGKILL.String() != "SIGKILL" {
		t.Errorf("SIGKILL.String() = %q", execbox.SIGKILL.String())
	}
}

func TestDecodeSettingsStrict(t *testing.T) {
	var v struct {
		TempDir string `json:"temp_dir"`
	}
	if err := execbox.DecodeSettings("local", map[string]any{"temp_dir": "/x"}, &v); err != nil || v.TempDir != "/x" {
		t.Fatalf("decode = %v, %+v", err, v)
	}
	err := execbox.DecodeSettings("local", map[string]any{"tmp_dir": "/x"}, &v)
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "runtimes.local.tmp_dir" || fe.Problem != "unknown key (known: temp_dir)" {
		t.Errorf("unknown key: %v", err)
	}
}

// TestDecodeSettingsEveryProblem: every unknown key and every value of
// the wrong type is reported, each naming its key, and what decodes is
// kept; SettingsProblems picks them out of what a factory returns.
func TestDecodeSettingsEveryProblem(t *testing.T) {
	var v struct {
		Memory int64    `json:"memory"`
		CPUs   float64  `json:"cpus"`
		Paths  []string `json:"paths"`
		Name   string   `json:"name"`
		Nested struct {
			A bool `json:"a"`
		} `json:"nested"`
	}
	err := execbox.DecodeSettings("sandbox", map[string]any{
		"memry": "1GiB", "memory": "lots", "cpus": true, "paths": "/a", "nested": map[string]any{"b": 1}, "name": "ok",
	}, &v)
	want := []string{
		`runtimes.sandbox.cpus: want a number, got true`,
		`runtimes.sandbox.memory: want an integer, got "lots"`,
		`runtimes.sandbox.memry: unknown key (known: cpus, memory, name, nested, paths)`,
		`runtimes.sandbox.nested: unknown field "b"`,
		`runtimes.sandbox.paths: want a list, got "/a"`,
	}
	if got := strings.Split(fmt.Sprint(err), "\n"); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !errors.Is(err, execbox.ErrInvalidArgument) || v.Name != "ok" {
		t.Errorf("kind or decoded value lost: %v, %+v", err, v)
	}
	factory := fmt.Errorf("runtime sandbox: %w", errors.Join(err, execbox.Invalid("runtimes.sandbox.token_env", "$X is unset")))
	if got := execbox.SettingsProblems(factory); fmt.Sprint(got) != fmt.Sprint(err) {
		t.Errorf("SettingsProblems = %v, want the decoding problems only", got)
	}
}

// fieldsOf lists the Field of every *FieldError joined in err.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			out = append(out, fe.Field)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// fakeRuntime is a consumer-side fake for registry tests: Name, Health
// and, when create is set, Create; a nil create runs the real local
// runtime's Create, so that OpenDefault's live probe runs real commands.
type fakeRuntime struct {
	execbox.Runtime
	name   string
	health execbox.Health
	create func() error
}

func (f fakeRuntime) Name() string                          { return f.name }
func (f fakeRuntime) Health(context.Context) execbox.Health { return f.health }
func (f fakeRuntime) Create(ctx context.Context, spec execbox.Spec) (execbox.Sandbox, error) {
	if f.create != nil {
		if err := f.create(); err != nil {
			return nil, err
		}
	}
	return local.New(local.Options{}).Create(ctx, spec)
}

func TestOpenDefault(t *testing.T) {
	// sandboxOK: Health says available; createErr: but Create fails, as
	// on a cgroup v2 host whose layout Health did not foresee.
	newRegistry := func(sandboxOK bool, createErr error) *execbox.Registry {
		r := &execbox.Registry{}
		r.Register(execbox.IsolatedRuntime, func(execbox.Options) (execbox.Runtime, error) {
			return fakeRuntime{
				name:   execbox.IsolatedRuntime,
				health: execbox.Health{Available: sandboxOK, Detail: "no user namespaces"},
				create: func() error { return createErr },
			}, nil
		})
		r.Register(execbox.FallbackRuntime, func(execbox.Options) (execbox.Runtime, error) {
			return fakeRuntime{name: execbox.FallbackRuntime, health: execbox.Health{Available: true}}, nil
		})
		return r
	}
	ctx := t.Context()

	rt, err := newRegistry(true, nil).OpenDefault(ctx, execbox.DefaultOptions{RequireIsolation: true})
	if err != nil || rt.Name() != execbox.IsolatedRuntime {
		t.Errorf("healthy sandbox: got %v, %v", rt, err)
	}

	var note string
	rt, err = newRegistry(false, nil).OpenDefault(ctx, execbox.DefaultOptions{OnFallback: func(d string) { note = d }})
	if err != nil || rt.Name() != execbox.FallbackRuntime || note != "no user namespaces" {
		t.Errorf("fallback: got %v, %v, note %q", rt, err, note)
	}

	_, err = newRegistry(false, nil).OpenDefault(ctx, execbox.DefaultOptions{RequireIsolation: true})
	if !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "no user namespaces") {
		t.Errorf("required isolation: got %v, want ErrUnavailable with the health detail", err)
	}

	// Health says yes, the probe says no: no sandbox is picked.
	broken := fmt.Errorf("cgroup: enable controllers: %w", execbox.ErrUnavailable)
	note = ""
	rt, err = newRegistry(true, broken).OpenDefault(ctx, execbox.DefaultOptions{OnFallback: func(d string) { note = d }})
	if err != nil || rt.Name() != execbox.FallbackRuntime || !strings.Contains(note, "probe: create: cgroup: enable controllers") {
		t.Errorf("healthy but broken sandbox: got %v, %v, note %q; want the fallback with the probe's error", rt, err, note)
	}
	_, err = newRegistry(true, broken).OpenDefault(ctx, execbox.DefaultOptions{RequireIsolation: true})
	if !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "enable controllers") {
		t.Errorf("healthy but broken sandbox, isolation required: got %v, want ErrUnavailable with the probe's error", err)
	}

	// A configuration error never falls back: settings the isolated
	// runtime's factory refuses, or a probe refused as invalid.
	badSettings := &execbox.Registry{}
	badSettings.Register(execbox.IsolatedRuntime, func(opts execbox.Options) (execbox.Runtime, error) {
		var v struct {
			Memory int64 `json:"memory"`
		}
		return fakeRuntime{name: execbox.IsolatedRuntime, health: execbox.Health{Available: true}}, execbox.DecodeSettings(execbox.IsolatedRuntime, opts.Settings, &v)
	})
	badSettings.Register(execbox.FallbackRuntime, func(execbox.Options) (execbox.Runtime, error) {
		return fakeRuntime{name: execbox.FallbackRuntime, health: execbox.Health{Available: true}}, nil
	})
	note = ""
	rt, err = badSettings.OpenDefault(ctx, execbox.DefaultOptions{
		Options:    func(string) execbox.Options { return execbox.Options{Settings: map[string]any{"memry": "1GiB"}} },
		OnFallback: func(d string) { note = d },
	})
	if !errors.Is(err, execbox.ErrInvalidArgument) || note != "" || rt != nil {
		t.Errorf("sandbox settings with a typo: got %v, %v, note %q; want ErrInvalidArgument and no fallback", rt, err, note)
	}
	note = ""
	rt, err = newRegistry(true, execbox.Invalid("runtimes.sandbox.workspace_size", "too small")).OpenDefault(ctx, execbox.DefaultOptions{OnFallback: func(d string) { note = d }})
	if !errors.Is(err, execbox.ErrInvalidArgument) || note != "" || rt != nil {
		t.Errorf("probe refused as invalid: got %v, %v, note %q; want ErrInvalidArgument and no fallback", rt, err, note)
	}

	// Health says yes and the probe fails because something ran out: a
	// sandbox's command can cause that (a given workspace on the file
	// system of TMPDIR filled up, the host's pids used up), so it must
	// not turn the next sandbox into commands run on the host as root.
	for _, exhausted := range []error{
		&fs.PathError{Op: "mkdir", Path: "/tmp/execbox-sb-1-root-2", Err: syscall.ENOSPC},
		&fs.PathError{Op: "mkdir", Path: "/tmp/execbox-sb-1-root-2", Err: syscall.EDQUOT},
		fmt.Errorf("fork/exec: %w", syscall.EAGAIN),
		fmt.Errorf("start init: %w", syscall.ENOMEM),
		fmt.Errorf("pids: %w", execbox.ErrResourceExhausted),
		fmt.Errorf("start: %w", context.DeadlineExceeded),
	} {
		note = ""
		rt, err = newRegistry(true, exhausted).OpenDefault(ctx, execbox.DefaultOptions{OnFallback: func(d string) { note = d }})
		if err == nil || note != "" || !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), exhausted.Error()) {
			t.Errorf("healthy sandbox whose probe ran out of a resource (%v): got %v, %v, note %q; want ErrUnavailable with the probe's error and no fallback", exhausted, rt, err, note)
		}
	}
}
