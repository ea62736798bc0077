package code_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestLanguagesSandbox runs every language's cases in the sandbox runtime
// (as root, or rootless), with the toolchains the probe finds inside it:
// every language the host has must be found there too, from the host's
// system directories (a toolchain under /root, such as pyenv's, is not
// visible inside; the system's is used instead).
func TestLanguagesSandbox(t *testing.T) {
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2)
	state, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	rt := sandbox.New(sandbox.Options{Logger: testutil.Logger(t), StateDir: filepath.Join(state, "state")})
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with user namespaces and cgroups: %s", h.Detail)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	list, err := code.NewRunner(sb, code.Options{}).Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st := map[code.Language]code.Status{}
	for _, s := range list {
		st[s.Language] = s
		if langDeps[s.Language].Check() == nil && !s.Available {
			t.Errorf("%s: present on the host, not found in the sandbox: %s", s.Language, s.Detail)
		}
	}
	// Caches inside the sandbox: the host's cache directory is not there.
	testLanguages(t, sb, st, code.Options{})
}
