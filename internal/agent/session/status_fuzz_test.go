package session

import (
	"strconv"
	"testing"
)

// formatStatus prints m as bash's status line does.
func formatStatus(m msg) string {
	switch m.kind {
	case 'R':
		return "R"
	case 'S':
		return "S " + strconv.FormatUint(m.id, 10)
	}
	return string(m.kind) + " " + strconv.FormatUint(m.id, 10) + " " + m.nonce + " " + strconv.Itoa(m.code)
}

// FuzzParseStatus: a status line the session accepts is one of R, S, E
// and I, with a nonce only on E and I, and prints back to a line that
// parses to the same message.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"R", "S 1", "E 2 0123abcd 0", "I 3 ffff 130", "E 1 n -1", "X 1", "S", "S -1", "E 1 n", " R ", "RR"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parseStatus(line)
		if !ok {
			return
		}
		switch m.kind {
		case 'R', 'S':
			if m.nonce != "" || m.code != 0 {
				t.Fatalf("parseStatus(%q) = %+v: a nonce or code on %c", line, m, m.kind)
			}
		case 'E', 'I':
			if m.nonce == "" {
				t.Fatalf("parseStatus(%q) = %+v: no nonce", line, m)
			}
		default:
			t.Fatalf("parseStatus(%q) = %+v: unknown kind", line, m)
		}
		back, ok := parseStatus(formatStatus(m))
		if !ok || back != m {
			t.Fatalf("parseStatus(%q) = %+v, which prints as %q and parses to %+v, %v", line, m, formatStatus(m), back, ok)
		}
	})
}
