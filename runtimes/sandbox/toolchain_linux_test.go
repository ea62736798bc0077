package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestToolchainInStandardPlace is the regression test of "execbox run
// --lang go fails in the sandbox": Go installed the official way, in
// /usr/local/go/bin (outside the standard PATH), is found by the code
// runner inside the sandbox without --env PATH=....
func TestToolchainInStandardPlace(t *testing.T) {
	const goBin = "/usr/local/go/bin/go"
	testutil.Require(t, testutil.NewDep("file:"+goBin, func() error {
		_, err := os.Stat(goBin)
		return err
	}))
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"sh", "-c", "echo $PATH"}})
	if err != nil {
		t.Fatal(err)
	}
	if path := strings.TrimSpace(res.Stdout.Text()); !strings.Contains(":"+path+":", ":"+filepath.Dir(goBin)+":") {
		t.Errorf("PATH inside the sandbox is %q; want it to contain %s", path, filepath.Dir(goBin))
	}

	// The code runner's probe finds it (compiling a program is the code
	// package's test: under the VM matrix's emulation a cold Go build
	// takes minutes).
	st, err := code.Probe(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st {
		if l.Language == code.Go && (!l.Available || l.Path != goBin) {
			t.Errorf("the code runner's probe of go: available %v, path %q, detail %q; want %s", l.Available, l.Path, l.Detail, goBin)
		}
	}
}
