package execboxtest

import (
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// testShellForm: a shell line runs under bash where the sandbox has it,
// else sh, and the Result says which.
func testShellForm(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	// Whether the sandbox's root has bash, asked of the sandbox itself.
	probe := mustExec(t, sb, execbox.ExecRequest{Command: []string{"sh", "-c",
		"if test -x /bin/bash || test -x /usr/bin/bash; then echo bash; else echo sh; fi"}})
	want := strings.TrimSpace(probe.Stdout.String())
	if probe.Shell != "" {
		t.Errorf("argv command: Result.Shell = %q, want empty", probe.Shell)
	}

	res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo $0"})
	if res.Shell != want {
		t.Fatalf("Result.Shell = %q, want %q", res.Shell, want)
	}
	if got := strings.TrimSpace(res.Stdout.String()); got != want {
		t.Errorf("$0 of a shell line = %q, want %q", got, want)
	}
	if want != "bash" {
		return
	}
	// What agents write for bash works.
	got := execOK(t, sb, execbox.ExecRequest{Shell: `set -o pipefail; f() { echo "$1"; }; a=(x y); ` +
		`[[ ${a[1]} == y ]] && source /dev/null && f ok; false | true || echo pipefail`})
	if got != "ok\npipefail\n" {
		t.Errorf("bash constructs: stdout %q, want %q", got, "ok\npipefail\n")
	}
}
