package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
)

// codeGitTypes are the bodies of POST code and POST git/{op}, each with
// its conversion to the Go API.
var codeGitTypes = func() []struct {
	name    string
	new     func() any
	convert func(v any) error
} {
	out := []struct {
		name    string
		new     func() any
		convert func(v any) error
	}{{"code", func() any { return new(api.CodeRequest) }, func(v any) error {
		req, err := v.(*api.CodeRequest).CodeRequest()
		return errors.Join(err, req.Validate())
	}}}
	for _, op := range git.Ops {
		out = append(out, struct {
			name    string
			new     func() any
			convert func(v any) error
		}{"git/" + op, func() any { return api.NewGitRequestFor(op) }, func(v any) error {
			_, err := api.GitCall(op, v.(api.GitRequest))
			return err
		}})
	}
	return out
}()

// FuzzDecodeCodeGit: as FuzzDecodeJSON, for the code and git bodies:
// decodeJSON refuses a body with FieldErrors or decodes a value whose
// encoding decodes to itself, the fast and full paths agree, and the
// conversion to package code's or git's request fails only with
// FieldErrors.
func FuzzDecodeCodeGit(f *testing.F) {
	for _, s := range []string{
		`{"language":"py","source":"print(1)","files":[{"path":"m.py","text":"x=1","mode":"0600"}],"args":["a"],"stdin":{"data":"/w=="}}`,
		`{"language":"c","source":"int main(){}","limits":{"memory":-1,"cpu_time_ms":1000},"timeout_ms":5,"compile_timeout_ms":7,"compile_flags":["-O0"],"cleanup":true,"env":{"A":"1"}}`,
		`{"language":"go","source":"x","files":[{"path":"../x","text":"a","data":"YQ=="}],"output_limit":-1}`,
		`{"url":"https://example.com/r.git","path":"app","depth":1,"credentials":{"url":"https://example.com/","token":"t","bearer":true}}`,
		`{"dir":"app","message":"m","author":{"name":"a","email":"a@b"},"all":true,"identity":{"name":"i","email":"i@e"},"timeout_ms":1000,"output_limit":10}`,
		`{"dir":"app","untracked":"all","paths":["a"]}`, `{"dir":"app","from":"HEAD~1","to":"HEAD","context":1}`,
		`{"dir":"app","remote":"origin","refspecs":["main"],"set_upstream":true}`, `{"dir":"app","path":"wt","branch":"b","base":"HEAD"}`,
		`{"dir":"app","bogus":1}`, `{"credentials":{"token":1}}`, `[]`, `{"a":1} x`, ``, `{"language":"p` + "\xff" + `"}`,
		`{"timeout_ms":1e300}`, `{"Dir":"x"}`,
	} {
		for i := range codeGitTypes {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		wt := codeGitTypes[int(kind)%len(codeGitTypes)]
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
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			t.Fatalf("%s %q: encodes as %s, then as %s", wt.name, body, b, b2)
		}
		if err := wt.convert(v); err != nil {
			wantFieldError(t, wt.name+" conversion", err)
		}
	})
}
