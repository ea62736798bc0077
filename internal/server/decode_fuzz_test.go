package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// wireTypes are the request bodies the server decodes, each with its
// conversion to the Go API (nil where there is none).
var wireTypes = []struct {
	name    string
	new     func() any
	convert func(v any) error
}{
	{"exec", func() any { return new(api.ExecRequest) }, func(v any) error { _, err := v.(*api.ExecRequest).ExecRequest(); return err }},
	{"spec", func() any { return new(api.Spec) }, func(v any) error { _, err := v.(*api.Spec).Spec(); return err }},
	{"session", func() any { return new(api.SessionOptions) }, func(v any) error { _, err := v.(*api.SessionOptions).SessionOptions(); return err }},
	{"session-run", func() any { return new(api.SessionRequest) }, func(v any) error { _, err := v.(*api.SessionRequest).SessionRequest(); return err }},
	{"signal", func() any { return new(api.SignalRequest) }, nil},
	{"resize", func() any { return new(api.ResizeRequest) }, nil},
}

// wantFieldError fails unless err is a *execbox.FieldError (all of them,
// when joined) naming a field.
func wantFieldError(t *testing.T, what string, err error) {
	t.Helper()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			wantFieldError(t, what, e)
		}
		return
	}
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("%s: %v (%T) is not a FieldError naming a field", what, err, err)
	}
}

// FuzzDecodeJSON: for every request type, decodeJSON either refuses the
// body with FieldErrors or decodes a value that the body's strings reach
// unchanged (it is UTF-8) and whose encoding decodes to itself; the wire
// value's conversion to the Go API fails only with FieldErrors.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"command":["printf","%s","x"],"env":{"A":"1"},"timeout_ms":1500,"limits":{"memory":1048576,"cpu_time_ms":100}}`,
		`{"shell":"echo hi","stdin":{"text":"in"},"user":{"uid":1000,"gid":1000,"groups":[1]},"event_window":10}`,
		`{"stdin":{"data":"/w=="},"dir":"a/b","env_policy":"allow","env_allow":["PATH"]}`,
		`{"workspace":"/tmp/x","assets":[{"path":"a","content":{"text":"x"},"mode":"0755"}],"setup":[{"shell":"true","timeout_ms":-1}],"labels":{"k":"v"}}`,
		`{"kind":"bash","command":["bash"],"dir":".","env":{"A":"b"},"rows":24,"cols":80}`,
		`{"code":"print(1)","timeout_ms":0.5}`,
		`{"signal":"SIGTERM"}`, `{"signal":9}`, `{"rows":24,"cols":80}`,
		`{"limits":{"bogus":1}}`, `[]`, `{"command":"notalist"}`, `{"a":1} x`, ``,
		`{"command":["a` + "\xff" + `"]}`,
		`{"Command":["true"]}`, `{"command":["true"],"env":{"COMMAND":"x","Timeout_MS":"y"}}`,
		`{"command":["true"],"env":{"\u0041":"x"}}`, `{"comm\u0061nd":["true"]}`,
	} {
		for i := range wireTypes {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		wt := wireTypes[int(kind)%len(wireTypes)]
		v := wt.new()
		if err := decodeJSON(body, v, true); err != nil {
			wantFieldError(t, wt.name, err)
			if !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Fatalf("%s %q: %v is not invalid_argument", wt.name, body, err)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("%s %q: decoded a body that is not UTF-8", wt.name, body)
		}
		// The fast path accepts exactly what the full one does.
		full := wt.new()
		if err := decodeFull(body, full); err != nil || !reflect.DeepEqual(v, full) {
			t.Fatalf("%s %q: decoded as %+v, but the full path gives %+v, %v", wt.name, body, v, full, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s %q: decoded %+v, which does not encode: %v", wt.name, body, v, err)
		}
		again := wt.new()
		if err := decodeJSON(b, again, true); err != nil {
			t.Fatalf("%s %q: decoded %+v, encoded as %s, which is refused: %v", wt.name, body, v, b, err)
		}
		// Empty and absent lists, maps and payloads mean the same: compare
		// encodings, a fixed point after one round.
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			t.Fatalf("%s %q: encodes as %s, then as %s", wt.name, body, b, b2)
		}
		if wt.convert != nil {
			if err := wt.convert(v); err != nil {
				wantFieldError(t, wt.name+" conversion", err)
			}
		}
	})
}

// FuzzReadStreamed: a multipart exec request (a "request" part, then an
// optional "stdin" part) is refused with a FieldError or decoded to the
// request part's JSON with a stdin that reads back exactly the part's
// bytes; raw bodies (broken multipart) never panic.
func FuzzReadStreamed(f *testing.F) {
	f.Add([]byte(`{"command":["cat"]}`), []byte("stdin bytes\xff"), true, false, []byte(nil))
	f.Add([]byte(`{"shell":"true"}`), []byte(nil), false, false, []byte(nil))
	f.Add([]byte(`{"bogus":1}`), []byte("x"), true, false, []byte(nil))
	f.Add([]byte(nil), []byte(nil), false, true, []byte("--b\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n{\"shell\":\"x\"}\r\n--b--\r\n"))
	f.Add([]byte(nil), []byte(nil), false, true, []byte("--b\r\nContent-Disposition: form-data; name=\"stdin\"\r\n\r\nx\r\n--b--"))
	s := &sandbox{opts: &Options{MaxJSONBody: 1 << 16}, log: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, reqJSON, stdin []byte, withStdin, raw bool, rawBody []byte) {
		var body bytes.Buffer
		ctype := "multipart/form-data; boundary=b"
		if raw {
			body.Write(rawBody)
		} else {
			mw := multipart.NewWriter(&body)
			p, _ := mw.CreateFormField("request")
			p.Write(reqJSON)
			if withStdin {
				p, _ = mw.CreateFormField("stdin")
				p.Write(stdin)
			}
			mw.Close()
			ctype = mw.FormDataContentType()
		}
		r := httptest.NewRequest(http.MethodPost, "/exec", &body)
		r.Header.Set("Content-Type", ctype)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var wire api.ExecRequest
		in, err := s.readStreamed(httptest.NewRecorder(), r, cancel, &wire)
		if err != nil {
			wantFieldError(t, "multipart", err)
			return
		}
		if raw {
			if in != nil {
				io.Copy(io.Discard, in)
			}
			return
		}
		var want api.ExecRequest
		if err := decodeJSON(reqJSON, &want, true); err != nil || !reflect.DeepEqual(wire, want) {
			t.Fatalf("request %q decoded to %+v, want %+v (%v)", reqJSON, wire, want, err)
		}
		if (in != nil) != withStdin {
			t.Fatalf("stdin part sent %v, reader %v", withStdin, in != nil)
		}
		if in != nil {
			got, err := io.ReadAll(in)
			if err != nil || !bytes.Equal(got, stdin) {
				t.Fatalf("stdin %q reads back as %q, %v", stdin, got, err)
			}
		}
		if err := context.Cause(ctx); err != nil {
			t.Fatalf("a complete stdin part cancelled the call: %v", err)
		}
	})
}

// TestDecodeCase: a field named in another case is unknown, though
// encoding/json would take it; a map's keys are anyone's.
func TestDecodeCase(t *testing.T) {
	var req api.ExecRequest
	err := decodeJSON([]byte(`{"Command":["true"]}`), &req, true)
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "Command" {
		t.Errorf(`{"Command":...} = %v, want an unknown field named Command`, err)
	}
	req = api.ExecRequest{}
	if err := decodeJSON([]byte(`{"command":["true"],"env":{"COMMAND":"x"}}`), &req, true); err != nil || req.Env["COMMAND"] != "x" || len(req.Command) != 1 {
		t.Errorf("env COMMAND: %+v, %v", req, err)
	}
}
