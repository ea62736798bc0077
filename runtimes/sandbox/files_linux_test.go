package sandbox_test

import (
	"errors"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestFilesOnlyTheUsersPermissions is the regression test of the agent
// keeping its capabilities in file operations: the agent runs with
// SECBIT_NO_SETUID_FIXUP (to keep its capabilities across its own
// setuid), under which setfsuid no longer drops CAP_DAC_OVERRIDE and its
// kin, so the file API, "as the command user", read and wrote what that
// user cannot: in a sandbox whose workspace root inside could own files
// (a kernel without idmapped tmpfs), root's 0600 files.
func TestFilesOnlyTheUsersPermissions(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo secret > locked && chmod 000 locked && mkdir ro && chmod 555 ro"})
	if !res.Success() {
		t.Fatalf("setup: %s %s", res.String(), res.Stderr.Text())
	}
	f := sb.Files()
	if b, err := f.ReadFile(t.Context(), "locked", execbox.ReadOptions{}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("ReadFile of a mode 000 file: %q, %v; want ErrPermission (the user cannot read it)", b, err)
	}
	if err := f.WriteFile(t.Context(), "ro/new", []byte("x"), execbox.WriteOptions{}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("WriteFile into a mode 555 directory: %v; want ErrPermission (the user cannot write it)", err)
	}
}
