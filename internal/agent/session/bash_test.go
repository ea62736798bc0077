package session

import (
	"os/exec"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

func TestParseStatus(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
		want msg
	}{
		{"R", true, msg{kind: 'R'}},
		{"S 12", true, msg{kind: 'S', id: 12}},
		{"E 3 abcd 130", true, msg{kind: 'E', id: 3, nonce: "abcd", code: 130}},
		{"I 3 abcd 0", true, msg{kind: 'I', id: 3, nonce: "abcd"}},
		{"", false, msg{}},
		{"E 3 abcd", false, msg{}},
		{"E x abcd 0", false, msg{}},
		{"E 3 abcd zero", false, msg{}},
		{"S", false, msg{}},
		{"X 1", false, msg{}},
		{"ES 1", false, msg{}},
		{"R 1", false, msg{}},
	} {
		got, ok := parseStatus(tt.line)
		if ok != tt.ok || ok && (got.kind != tt.want.kind || got.id != tt.want.id || got.nonce != tt.want.nonce || got.code != tt.want.code) {
			t.Errorf("parseStatus(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestShellQuote(t *testing.T) {
	testutil.Require(t, testutil.Command("bash"))
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "plain", "it's", "'", "''", `a"b$c\d`, "new\nline", "/tmp/execbox-session-1/o.1"} {
		out, err := exec.Command(bash, "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s: bash printed %q, %v", s, shellQuote(s), out, err)
		}
	}
}
