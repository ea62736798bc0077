package code_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

// TestRemote runs code through the remote runtime (an execbox server on
// loopback backed by local): everything goes through the Sandbox
// interface, probes and limits included, and error kinds survive the
// wire.
func TestRemote(t *testing.T) {
	testutil.Require(t, langDeps[code.Python], langDeps[code.C])
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	rt, err := remote.New(remote.Options{URL: ts.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	r := code.NewRunner(sb, testOptions(t))

	res, err := r.Run(t.Context(), code.Request{Language: code.Python, Source: "import sys\nprint(input()[::-1])\nsys.exit(4)", Stdin: stringsReader("olleh\n")})
	if err != nil || res.ExitCode != 4 || res.Stdout.Text() != "hello\n" {
		t.Errorf("python: %v %s %q", err, res.String(), res.Stdout.Text())
	}
	// The sandbox's capabilities came through the server: rlimits yes,
	// cgroups no, so memory became address space.
	if res.Limits.AddressSpace == 0 || res.Limits.Memory != 0 || res.Limits.CPUTime == 0 {
		t.Errorf("limits %+v", res.Limits)
	}
	res, err = r.Run(t.Context(), code.Request{Language: code.C, Source: "int main(void) { for (;;); }", Limits: execbox.Limits{CPUTime: time.Second}})
	if err != nil || res.Phase != code.PhaseRun || res.Reason != execbox.ReasonCPULimit {
		t.Errorf("c: %v %s", err, res.String())
	}
	res, err = r.Run(t.Context(), code.Request{Language: code.C, Source: "int main(void) { return x; }"})
	if err != nil || res.Phase != code.PhaseCompile || res.Success() {
		t.Errorf("c compile error: %v %s in %s", err, res.String(), res.Phase)
	}
	got, err := sb.Files().ReadFile(t.Context(), res.Dir+"/main.c", execbox.ReadOptions{})
	if err != nil || string(got) != "int main(void) { return x; }" {
		t.Errorf("main.c: %q %v", got, err)
	}
	if _, err := r.Run(t.Context(), code.Request{Language: code.C, Source: "x", Limits: execbox.Limits{PIDs: 5}}); !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("pids: %v, want ErrUnsupported", err)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
