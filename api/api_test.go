package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

func TestFieldNames(t *testing.T) {
	for _, tc := range []struct{ goName, wire string }{
		{"timeout", "timeout_ms"},
		{"grace_period", "grace_period_ms"},
		{"idle_timeout", "idle_timeout_ms"},
		{"limits.cpu_time", "limits.cpu_time_ms"},
		{"setup[2].timeout", "setup[2].timeout_ms"},
		{"setup[0].limits.cpu_time", "setup[0].limits.cpu_time_ms"},
		{"command[0]", "command[0]"},
		{"limits.memory", "limits.memory"},
		{"env.timeout", "env.timeout"}, // a variable's name is not a field
		{"env.a.timeout", "env.a.timeout"},
		{"setup[1].env.cpu_time", "setup[1].env.cpu_time"},
		{"labels.grace_period", "labels.grace_period"},
		{"env_allow[0]", "env_allow[0]"},
	} {
		if got := api.WireField(tc.goName); got != tc.wire {
			t.Errorf("WireField(%q) = %q, want %q", tc.goName, got, tc.wire)
		}
		if got := api.GoField(tc.wire); got != tc.goName {
			t.Errorf("GoField(%q) = %q, want %q", tc.wire, got, tc.goName)
		}
	}
}

func TestModes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fs.FileMode
		out  string
	}{
		{"644", 0o644, "0644"},
		{"0644", 0o644, "0644"},
		{"0000", 0, "0000"},
		{"4755", 0o755 | fs.ModeSetuid, "4755"},
		{"01777", 0o777 | fs.ModeSticky, "1777"},
		{"2750", 0o750 | fs.ModeSetgid, "2750"},
	} {
		m, err := api.ParseMode("mode", tc.in)
		if err != nil || m != tc.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", tc.in, m, err, tc.want)
		}
		if got := api.FormatMode(m); got != tc.out {
			t.Errorf("FormatMode(%v) = %q, want %q", m, got, tc.out)
		}
	}
	for _, bad := range []string{"", "7", "64", "0x1a4", "rw-r--r--", "0888", "17777", "-644"} {
		if _, err := api.ParseMode("mode", bad); !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("ParseMode(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestPayload(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("plain text\n"), {0xff, 0xfe, 'a', 0}, []byte("é ✓ <&>")} {
		p := api.NewPayload(b)
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back api.Payload
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if string(back.Bytes()) != string(b) {
			t.Errorf("%q -> %s -> %q", b, raw, back.Bytes())
		}
		if len(b) > 0 && (p.Data != nil) == (p.Text != "") {
			t.Errorf("%q: text %q and data %q: want exactly one (or neither when empty)", b, p.Text, p.Data)
		}
	}
}

func TestResultRoundTrip(t *testing.T) {
	res := execbox.Result{
		Reason: execbox.ReasonSignaled, ExitCode: -1, Signal: execbox.SIGTERM, Detail: "d",
		Stdout:   execbox.Output{Data: []byte("head\xfftail"), Total: 100, Omitted: 91, OmittedAt: 4},
		Stderr:   execbox.Output{Data: []byte("err"), Total: 3},
		Duration: 1234567891 * time.Nanosecond, UserTime: time.Millisecond, SystemTime: 3 * time.Microsecond,
		PeakMemory: 1 << 20,
	}
	b, err := json.Marshal(api.NewResult(res))
	if err != nil {
		t.Fatal(err)
	}
	var wire api.Result
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if got := wire.Result(); !reflect.DeepEqual(got, res) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nwire %s", got, res, b)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["duration_ms"] != 1234.567891 {
		t.Errorf("duration_ms = %v, want 1234.567891 (milliseconds)", m["duration_ms"])
	}
}

func TestExecRequestRoundTrip(t *testing.T) {
	req := execbox.ExecRequest{
		Command: []string{"a", "b"}, Dir: "d", Env: map[string]string{"K": "V"}, EnvPolicy: execbox.EnvAllow, EnvAllow: []string{"X"},
		Timeout: 1500 * time.Millisecond, GracePeriod: 250 * time.Microsecond, OutputLimit: 7, KillOnOutputLimit: true,
		Limits: execbox.Limits{CPUTime: 2 * time.Second, Memory: 3, PIDs: 4, CPUs: 0.5, FileSize: 5, OpenFiles: 6, AddressSpace: 8},
		User:   &execbox.User{UID: 1, GID: 2, Groups: []uint32{3}}, EventWindow: 9,
	}
	b, _ := json.Marshal(api.NewExecRequest(req))
	var wire api.ExecRequest
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	got, err := wire.ExecRequest()
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Errorf("round trip: %+v, %v\nwant %+v\nwire %s", got, err, req, b)
	}
	wire = api.ExecRequest{TimeoutMS: 1e300, Limits: &api.Limits{CPUTimeMS: -1e300}}
	_, err = wire.ExecRequest()
	fields := map[string]bool{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			fields[fe.Field] = true
		}
	}
	if !fields["timeout"] || !fields["limits.cpu_time"] {
		t.Errorf("durations out of range: %v, want field errors for timeout and limits.cpu_time", err)
	}
}

func TestFileInfoRoundTrip(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, fi := range []execbox.FileInfo{
		{Path: "a/b", Name: "b", Size: 3, Mode: 0o644, ModTime: now},
		{Path: "d", Name: "d", Mode: fs.ModeDir | 0o755 | fs.ModeSticky, ModTime: now},
		{Path: "l", Name: "l", Mode: fs.ModeSymlink | 0o777, ModTime: now, Target: "../x"},
		{Path: "p", Name: "p", Mode: fs.ModeNamedPipe | 0o600, ModTime: now},
		{Path: "c", Name: "c", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, ModTime: now},
		{Path: "s", Name: "s", Mode: fs.ModeSocket | 0o755 | fs.ModeSetuid, ModTime: now},
	} {
		b, _ := json.Marshal(api.NewFileInfo(fi))
		var wire api.FileInfo
		json.Unmarshal(b, &wire)
		if got := wire.FileInfo(); !reflect.DeepEqual(got, fi) {
			t.Errorf("round trip of %v: %+v (wire %s)", fi.Mode, got, b)
		}
	}
}

func TestSpecRoundTrip(t *testing.T) {
	spec := execbox.Spec{
		Workspace: "/w",
		Assets:    []execbox.Asset{{Source: "/s", Path: "s"}, {Content: []byte{}, Path: "empty", Mode: 0o600}, {Content: []byte{0xff}, Path: "bin"}},
		Setup:     []execbox.ExecRequest{{Shell: "true", Timeout: time.Second}},
		Env:       map[string]string{"A": "1"}, EnvPolicy: execbox.EnvInherit, Limits: execbox.Limits{Memory: 1},
		Labels: map[string]string{"l": "v"}, Timeout: time.Hour, IdleTimeout: 90 * time.Second,
	}
	wire, err := api.NewSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(wire)
	var back api.Spec
	json.Unmarshal(b, &back)
	got, err := back.Spec()
	if err != nil || !reflect.DeepEqual(got, spec) {
		t.Errorf("round trip: %+v, %v\nwant %+v\nwire %s", got, err, spec, b)
	}
	spec.Setup[0].Stdin = io.MultiReader()
	if _, err := api.NewSpec(spec); !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("NewSpec with a setup reader: %v, want ErrUnsupported", err)
	}
	back.Assets[1].Mode = "4755"
	if got, _ := back.Spec(); got.Validate() == nil {
		t.Errorf("an asset mode with setuid passes Validate")
	}
}

// wireMessages are the messages of TestErrorRoundTrip's errors that
// change on the wire: fields are named as the wire names them.
var wireMessages = map[string]string{
	"joined-fields": "timeout_ms: neg\nlimits.memory: not supported by the local runtime\nsetup[1].limits.cpu_time_ms: x",
}

// TestErrorRoundTrip checks that errors.Is and errors.As answer the same
// after a trip over the wire.
func TestErrorRoundTrip(t *testing.T) {
	setupErr := &execbox.SetupError{Index: 2, Cmd: []string{"sh", "-c", "exit 3"}, Result: execbox.Result{Reason: execbox.ReasonExited, ExitCode: 3}}
	for _, tc := range []struct {
		name   string
		err    error
		kinds  []error
		fields map[string]error // Go field name -> kind
	}{
		{"canceled", fmt.Errorf("wait: %w", context.Canceled), []error{context.Canceled}, nil},
		{"deadline", context.DeadlineExceeded, []error{context.DeadlineExceeded}, nil},
		{"closed", fmt.Errorf("sandbox x: %w", execbox.ErrClosed), []error{execbox.ErrClosed}, nil},
		{"not-found-field", &execbox.FieldError{Field: "command[0]", Problem: "not found", Kind: execbox.ErrNotFound}, []error{execbox.ErrNotFound}, map[string]error{"command[0]": execbox.ErrNotFound}},
		{"joined-fields", errors.Join(execbox.Invalid("timeout", "neg"), execbox.Unsupported("local", "limits.memory"), execbox.Invalid("setup[1].limits.cpu_time", "x")),
			[]error{execbox.ErrInvalidArgument, execbox.ErrUnsupported},
			map[string]error{"timeout": execbox.ErrInvalidArgument, "limits.memory": execbox.ErrUnsupported, "setup[1].limits.cpu_time": execbox.ErrInvalidArgument}},
		{"permission", &execbox.FieldError{Field: "dir", Problem: "leaves", Kind: execbox.ErrPermission}, []error{execbox.ErrPermission}, map[string]error{"dir": execbox.ErrPermission}},
		{"exhausted", fmt.Errorf("read: %w", execbox.ErrResourceExhausted), []error{execbox.ErrResourceExhausted}, nil},
		{"unavailable", execbox.ErrUnavailable, []error{execbox.ErrUnavailable}, nil},
		{"setup", setupErr, []error{execbox.ErrInvalidArgument}, nil},
		{"internal", errors.New("boom"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(api.NewError(tc.err))
			if err != nil {
				t.Fatal(err)
			}
			var wire api.Error
			json.Unmarshal(b, &wire)
			got := wire.Err()
			want := wireMessages[tc.name]
			if want == "" {
				want = tc.err.Error()
			}
			if got.Error() != want {
				t.Errorf("message %q, want %q", got.Error(), want)
			}
			for _, k := range []error{context.Canceled, context.DeadlineExceeded, execbox.ErrClosed, execbox.ErrNotFound,
				execbox.ErrPermission, execbox.ErrUnsupported, execbox.ErrResourceExhausted, execbox.ErrUnavailable, execbox.ErrInvalidArgument} {
				if errors.Is(got, k) != errors.Is(tc.err, k) {
					t.Errorf("errors.Is(%v) = %v after the trip, %v before (wire %s)", k, errors.Is(got, k), errors.Is(tc.err, k), b)
				}
			}
			for field, kind := range tc.fields {
				found := false
				for _, e := range got.(interface{ Unwrap() []error }).Unwrap() {
					if fe, ok := e.(*execbox.FieldError); ok && fe.Field == field && errors.Is(fe, kind) {
						found = true
					}
				}
				if !found {
					t.Errorf("no *FieldError %q of kind %v after the trip (wire %s)", field, kind, b)
				}
			}
			if tc.name == "setup" {
				var se *execbox.SetupError
				if !errors.As(got, &se) || se.Index != 2 || se.Result.ExitCode != 3 || len(se.Cmd) != 3 {
					t.Errorf("SetupError after the trip: %+v", se)
				}
			}
			if tc.name == "internal" && (wire.Code != api.CodeInternal || wire.Code.Status() != http.StatusInternalServerError) {
				t.Errorf("code %q", wire.Code)
			}
		})
	}
}

func TestCodes(t *testing.T) {
	for _, c := range []api.Code{api.CodeInvalidArgument, api.CodeUnauthenticated, api.CodePermissionDenied, api.CodeNotFound,
		api.CodeClosed, api.CodeResourceExhausted, api.CodeCanceled, api.CodeInternal, api.CodeUnsupported,
		api.CodeUnavailable, api.CodeDeadlineExceeded} {
		if got := api.CodeForStatus(c.Status()); got != c {
			t.Errorf("CodeForStatus(%d) = %q, want %q", c.Status(), got, c)
		}
	}
}

// roundTrip marshals v and unmarshals it into out.
func roundTrip(t *testing.T, v, out any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSessionRoundTrip(t *testing.T) {
	opts := execbox.SessionOptions{
		Kind: execbox.SessionPTY, Command: []string{"vim"}, Dir: "d",
		Env: map[string]string{"K": "V"}, EnvPolicy: execbox.EnvAllow, EnvAllow: []string{"X"},
		Limits: execbox.Limits{CPUTime: 2 * time.Second, FileSize: 5}, User: &execbox.User{UID: 1, GID: 2},
		Rows: 40, Cols: 120, EventWindow: 9, GracePeriod: 250 * time.Millisecond,
	}
	var wo api.SessionOptions
	b := roundTrip(t, api.NewSessionOptions(opts), &wo)
	if got, err := wo.SessionOptions(); err != nil || !reflect.DeepEqual(got, opts) {
		t.Errorf("options: %+v, %v\nwant %+v\nwire %s", got, err, opts, b)
	}
	wo = api.SessionOptions{Kind: execbox.SessionBash, GracePeriodMS: 1e300}
	if _, err := wo.SessionOptions(); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("grace period out of range: %v", err)
	}

	req := execbox.SessionRequest{Code: "print(1)", Timeout: 1500 * time.Millisecond, OutputLimit: 7}
	var wr api.SessionRequest
	b = roundTrip(t, api.NewSessionRequest(req), &wr)
	if got, err := wr.SessionRequest(); err != nil || !reflect.DeepEqual(got, req) {
		t.Errorf("request: %+v, %v\nwant %+v\nwire %s", got, err, req, b)
	}
	wr = api.SessionRequest{Code: "cat", Stdin: &api.Payload{Data: []byte{0xff}}}
	got, err := wr.SessionRequest()
	if in, _ := io.ReadAll(got.Stdin); err != nil || string(in) != "\xff" {
		t.Errorf("stdin: %q, %v", in, err)
	}

	res := execbox.SessionResult{
		Reason: execbox.ReasonTimedOut, ExitCode: 1,
		Stdout: execbox.Output{Data: []byte("a\xffb"), Total: 3}, Stderr: execbox.Output{Data: []byte("e"), Total: 1},
		Value:     "'v'",
		Exception: &execbox.Exception{Type: "KeyboardInterrupt", Message: "", Traceback: "Traceback..."},
		Duration:  1234567 * time.Nanosecond,
	}
	var wres api.SessionResult
	b = roundTrip(t, api.NewSessionResult(res), &wres)
	if got := wres.SessionResult(); !reflect.DeepEqual(got, res) {
		t.Errorf("result:\n got %+v\nwant %+v\nwire %s", got, res, b)
	}

	info := execbox.SessionInfo{ID: "s1", Kind: execbox.SessionBash, Command: []string{"/bin/bash"}, Created: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Busy: true}
	var wi api.SessionInfo
	b = roundTrip(t, api.NewSessionInfo(info), &wi)
	if got := wi.SessionInfo(); !reflect.DeepEqual(got, info) {
		t.Errorf("info:\n got %+v\nwant %+v\nwire %s", got, info, b)
	}
	if !strings.Contains(string(b), `"created_at":"2026-01-02T03:04:05.000000006Z"`) {
		t.Errorf("info on the wire: %s", b)
	}
}

// TestNewPayloadEncoding: text travels as a JSON string, but bytes that
// JSON would blow up (NULs are six bytes each) go as base64, and both
// come back exactly.
func TestNewPayloadEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		text bool
	}{
		{"text", []byte("hello, world\n\tindented \"quoted\"\n"), true},
		{"nuls", make([]byte, 1024), false},
		{"escapes", []byte(strings.Repeat("say \"hi\" to C:\\dir\n", 50)), true},
		{"all-escapes", []byte(strings.Repeat("\"\\", 100)), false},
		{"controls", []byte(strings.Repeat("\x1b[0m", 100)), false},
		{"some-controls", []byte("a\x01b plain text that outweighs one control byte"), true},
		{"not-utf8", []byte{0xff, 0xfe, 'x'}, false},
		{"empty", nil, true},
	} {
		p := api.NewPayload(tc.b)
		if (p.Data == nil) != tc.text {
			t.Errorf("%s: text %v, want %v", tc.name, p.Data == nil, tc.text)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back api.Payload
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := back.Bytes(); !bytes.Equal(got, tc.b) {
			t.Errorf("%s: round trip %q, want %q", tc.name, got, tc.b)
		}
		if enc := base64.StdEncoding.EncodedLen(len(tc.b)); len(b) > enc+len(`{"text":""}`) && !strings.ContainsAny(string(tc.b), "<>&") {
			t.Errorf("%s: %d bytes on the wire for %d bytes", tc.name, len(b), len(tc.b))
		}
	}
}
