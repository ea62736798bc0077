package execboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// Config says what Run tests.
type Config struct {
	// Runtime is the runtime under test. It must be healthy: Run fails at
	// once, with Health's detail, if it is not. Skip where it cannot
	// work with RequireAvailable before calling Run.
	Runtime execbox.Runtime

	// Spec, if set, returns the base spec of every sandbox the suite
	// creates (an image, labels, default limits, ...). It is called once
	// per sandbox; subtests add their own assets, setup, workspace and
	// environment on top of what it returns. It must leave Workspace and
	// Snapshot empty. Nil means the zero Spec.
	Spec func(t *testing.T) execbox.Spec

	// Slack is extra wall-clock time the runtime may take on top of what
	// a timing assertion allows (a timeout's kill, a grace period, a
	// limit's enforcement): the cost of reaching its boundary. Zero means
	// 2s, enough for local processes and a nearby container engine.
	Slack time.Duration

	// AfterClose, if set, runs after every sandbox the suite closes, with
	// the closed sandbox. It is where a runtime checks what only it can
	// see is gone: its container, cgroup, mounts or namespace. (Processes
	// are checked by the suite itself; see the package documentation.)
	AfterClose func(t *testing.T, sb execbox.Sandbox)

	// Writers is how many commands RunStreams' ConcurrentExact starts at
	// once in one sandbox (0: 50). A runtime whose agent has a memory
	// bound that many cannot share sets fewer: a sandbox's agent holds
	// each running command's Result (head and tail) and event window in
	// its own 256 MiB, and per-sandbox output memory is not yet bounded
	// whatever the concurrency (issue 23).
	Writers int
}

// Run runs the conformance suite against cfg.Runtime: one subtest of t
// per guarantee, most of them in parallel, each in sandboxes of its own.
// The subtests finish before t does (Run itself may return earlier).
//
// There is deliberately no way to skip a subtest from Config: every
// guarantee holds on every runtime, and what a runtime cannot enforce is
// declared by its Capabilities, which drive the limit tests. To set a
// failing subtest aside while fixing it, use go test -skip.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.Runtime == nil {
		t.Fatal("execboxtest: Config.Runtime is nil")
	}
	if h := cfg.Runtime.Health(t.Context()); !h.Available {
		t.Fatalf("execboxtest: runtime %q is not available: %s", cfg.Runtime.Name(), h.Detail)
	}
	s := &suite{
		cfg:   cfg,
		rt:    cfg.Runtime,
		caps:  cfg.Runtime.Capabilities(),
		slack: testutil.Scale(cfg.Slack),
	}
	if s.slack <= 0 {
		s.slack = 2 * time.Second
	}
	// A secret in the environment of this process: the runtime's host
	// environment when it is not isolated. Set with os.Setenv rather than
	// t.Setenv so that Run works from a parallel test; the name is unique,
	// so nothing else reads it.
	s.secretKey = "EXECBOX_TEST_SECRET_" + strings.ToUpper(token())
	s.secretVal = "secret-" + token()
	if err := os.Setenv(s.secretKey, s.secretVal); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(s.secretKey) })
	t.Logf("runtime %s, capabilities %+v", s.rt.Name(), s.caps)

	for _, tc := range tests {
		if need := needs[tc.name]; need != nil && !need(s.caps) {
			continue // not claimed: see claimed
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s)
		})
	}
}

// needs are the capabilities a subtest (of Run or RunSessions) applies
// to: it runs only on a runtime claiming them, and UnsupportedLimits
// checks that the others refuse them (see claimed).
var needs = map[string]func(execbox.Capabilities) bool{
	"FilesDeputy":           func(c execbox.Capabilities) bool { return c.User },
	"User":                  func(c execbox.Capabilities) bool { return c.User },
	"BashUser":              func(c execbox.Capabilities) bool { return c.User },
	"BashPrivateDirSymlink": func(c execbox.Capabilities) bool { return c.User },
	"BashLimits":            func(c execbox.Capabilities) bool { return c.Rlimits },
}

// tests is the suite, in the order subtests are reported.
var tests = []struct {
	name string
	fn   func(*testing.T, *suite)
}{
	{"Registry", testRegistry},
	{"Capabilities", testCapabilities},
	{"ExitCodes", testExitCodes},
	{"Signal", testSignal},
	{"CommandNotFound", testCommandNotFound},
	{"ShellForm", testShellForm},
	{"Timeout", testTimeout},
	{"TimeoutKillsTree", testTimeoutKillsTree},
	{"TimeoutKillsTreeIgnoringTERM", testTimeoutKillsTreeIgnoringTERM},
	{"ContextCancel", testContextCancel},
	{"KillAndWait", testKillAndWait},
	{"ProcessSignal", testProcessSignal},
	{"StartContextOnlyBoundsStart", testStartContext},
	{"Stdin", testStdin},
	{"LargeOutput", testLargeOutput},
	{"LargeOutputBothStreams", testLargeOutputBothStreams},
	{"KillOnOutputLimit", testKillOnOutputLimit},
	{"BinaryOutput", testBinaryOutput},
	{"StdoutStderrSeparate", testStdoutStderrSeparate},
	{"EventsOrder", testEventsOrder},
	{"EventsWindow", testEventsWindow},
	{"EnvPolicy", testEnvPolicy},
	{"WorkingDir", testWorkingDir},
	{"PathConfinement", testPathConfinement},
	{"Files", testFiles},
	{"FilesDeputy", testFilesDeputy},
	{"FileNamesNotUTF8", testFileNamesNotUTF8},
	{"UploadDownload", testUploadDownload},
	{"Snapshot", testSnapshot},
	{"Assets", testAssets},
	{"Setup", testSetup},
	{"SetupFailure", testSetupFailure},
	{"WorkspaceGiven", testWorkspaceGiven},
	{"WorkspaceTemp", testWorkspaceTemp},
	{"SandboxesIndependent", testSandboxesIndependent},
	{"CloseKillsEverything", testCloseKillsEverything},
	{"CloseDuringExec", testCloseDuringExec},
	{"ClosedErrors", testClosedErrors},
	{"ConcurrentExecs", testConcurrentExecs},
	{"BadRequests", testBadRequests},
	{"BadSpecs", testBadSpecs},
	{"UnsupportedLimits", testUnsupportedLimits},
	{"Limits", testLimits},
	{"User", testUser},
	{"ResourceUsage", testResourceUsage},
	{"NoLeftoverProcessesAfterExec", testNoLeftoverAfterExec},
}

// suite is the state shared by the subtests of one Run.
type suite struct {
	cfg   Config
	rt    execbox.Runtime
	caps  execbox.Capabilities
	slack time.Duration

	secretKey, secretVal string
}

// baseSpec returns the configured base spec, or the zero Spec.
func (s *suite) baseSpec(t *testing.T) execbox.Spec {
	t.Helper()
	if s.cfg.Spec == nil {
		return execbox.Spec{}
	}
	spec := s.cfg.Spec(t)
	if spec.Workspace != "" || spec.Snapshot != nil {
		t.Fatal("execboxtest: Config.Spec sets Workspace or Snapshot; subtests choose those themselves")
	}
	return spec
}

// create makes a sandbox from the base spec changed by mod (if not nil),
// closed when t ends with Close's error checked.
func (s *suite) create(t *testing.T, mod func(*execbox.Spec)) execbox.Sandbox {
	t.Helper()
	spec := s.baseSpec(t)
	if mod != nil {
		mod(&spec)
	}
	sb, err := s.rt.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if sb == nil {
		t.Fatal("Create returned a nil Sandbox and a nil error")
	}
	t.Cleanup(func() { s.close(t, sb) })
	return sb
}

// close closes sb, checks the error and runs cfg.AfterClose.
func (s *suite) close(t *testing.T, sb execbox.Sandbox) {
	t.Helper()
	if err := sb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if s.cfg.AfterClose != nil {
		s.cfg.AfterClose(t, sb)
	}
}

// mustExec runs req in sb and fails t if Exec returns an error.
func mustExec(t *testing.T, sb execbox.Sandbox, req execbox.ExecRequest) execbox.Result {
	t.Helper()
	res, err := sb.Exec(t.Context(), req)
	if err != nil {
		t.Fatalf("Exec %s: %v", describe(req), err)
	}
	return res
}

// execOK runs req, requires it to exit 0 and returns its stdout.
func execOK(t *testing.T, sb execbox.Sandbox, req execbox.ExecRequest) string {
	t.Helper()
	res := mustExec(t, sb, req)
	if !res.Success() {
		t.Fatalf("Exec %s: %s, want exited 0; stderr: %q", describe(req), res.String(), res.Stderr.Text())
	}
	return string(res.Stdout.Data)
}

// shOK runs a shell script (argv form, so the script gets arguments) and
// requires it to exit 0.
func shOK(t *testing.T, sb execbox.Sandbox, script string, args ...string) string {
	t.Helper()
	return execOK(t, sb, execbox.ExecRequest{Command: sh(script, args...)})
}

// sh is the argv of /bin/sh running script with args as $1, $2, ...
func sh(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, args...)
}

func describe(req execbox.ExecRequest) string {
	if req.Shell != "" {
		return fmt.Sprintf("shell %q", req.Shell)
	}
	return fmt.Sprintf("%q", req.Command)
}

// token returns a short random hex string for unique names.
func token() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ctxTimeout is t.Context() bounded by d.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Scale(d))
	t.Cleanup(cancel)
	return ctx
}

// wantKind fails t unless err matches kind.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: error %v, want one matching %v", what, err, kind)
	}
}

// fieldErrors returns every *execbox.FieldError in err's tree.
func fieldErrors(err error) []*execbox.FieldError {
	var out []*execbox.FieldError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if fe, ok := e.(*execbox.FieldError); ok {
			out = append(out, fe)
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// hasField reports whether err holds a *FieldError for field of kind.
func hasField(err error, field string, kind error) bool {
	for _, fe := range fieldErrors(err) {
		if fe.Field == field && errors.Is(fe, kind) {
			return true
		}
	}
	return false
}
