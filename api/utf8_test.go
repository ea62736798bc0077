package api

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/execbox/execbox"
)

// fields returns the fields the FieldErrors in err name.
func fields(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *execbox.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Fatalf("%v is not an invalid_argument FieldError", err)
		}
		out = append(out, fe.Field)
	}
	if err != nil {
		walk(err)
	}
	return out
}

func TestCheckUTF8(t *testing.T) {
	bad := "a\xffb"
	req := ExecRequest{
		Command: []string{"echo", bad}, Dir: bad,
		Env:   map[string]string{"OK": "x", "BAD": bad, bad: "x"},
		Stdin: &Payload{Data: []byte{0xff}},
	}
	got := strings.Join(fields(t, CheckUTF8(req)), " ")
	if want := "command[1] dir env.BAD env"; got != want {
		t.Errorf("CheckUTF8 names %q, want %q", got, want)
	}
	spec := Spec{Setup: []ExecRequest{{Shell: bad}}, Assets: []Asset{{Path: bad}}}
	got = strings.Join(fields(t, CheckUTF8(&spec)), " ")
	if want := "assets[0].path setup[0].shell"; got != want {
		t.Errorf("CheckUTF8(spec) names %q, want %q", got, want)
	}
	if err := CheckUTF8(ExecRequest{Command: []string{"héllo", "\uFFFD"}}); err != nil {
		t.Errorf("valid UTF-8 refused: %v", err)
	}
}

func TestCheckJSONUTF8(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"command":["echo","a` + "\xff" + `"]}`, "command[1]"},
		{`{"env":{"A":"x","B":"` + "\xfe" + `"}}`, "env.B"},
		{`{"env":{"` + "\xfe" + `":"x"}}`, "env"},
		{`{"setup":[{"dir":"x"},{"command":["` + "\xc3" + `"]}]}`, "setup[1].command[0]"},
		{`{"shell":"ok"} ` + "\xff", "body"},
		{"\xff", "body"},
	} {
		got := fields(t, CheckJSONUTF8([]byte(tc.body)))
		if len(got) != 1 || got[0] != tc.field {
			t.Errorf("CheckJSONUTF8(%q) names %q, want %q", tc.body, got, tc.field)
		}
	}
	if err := CheckJSONUTF8([]byte(`{"command":["é"]}`)); err != nil {
		t.Errorf("valid UTF-8 refused: %v", err)
	}
}

// FuzzCheckJSONUTF8: a body is refused exactly when it is not UTF-8,
// always naming a field, and never panics on malformed JSON.
func FuzzCheckJSONUTF8(f *testing.F) {
	f.Add([]byte(`{"command":["echo","a` + "\xff" + `"]}`))
	f.Add([]byte(`{"env":{"B":"` + "\xfe" + `"},"setup":[{"command":["x"]}]}`))
	f.Add([]byte(`[1,{"a":[{"b":"` + "\xc3" + `"}]}]`))
	f.Add([]byte(`{"a":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckJSONUTF8(body)
		if (err == nil) != utf8.Valid(body) {
			t.Fatalf("CheckJSONUTF8(%q) = %v, but utf8.Valid says %v", body, err, utf8.Valid(body))
		}
		if err != nil {
			if f := fields(t, err); len(f) != 1 || f[0] == "" {
				t.Fatalf("CheckJSONUTF8(%q) = %v", body, err)
			}
		}
	})
}
