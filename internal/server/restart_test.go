package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/owner"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/local"
)

// TestLostSandboxes: a server on the state directory of a server that
// died answers the IDs that server held "closed", saying they were lost;
// its own sandboxes are recorded while they live, and a live server's
// records are not taken for lost.
func TestLostSandboxes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	d, err := owner.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead := owner.Of(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b, _ := json.Marshal(owner.Record{ID: "sb-0123456789ab", Owner: dead, Created: created, Data: json.RawMessage(`{"runtime":"local"}`)})
	if err := os.WriteFile(filepath.Join(dir, "sb-0123456789ab.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A live server's record (this process's), not lost.
	if err := d.Write("sb-live00000000", map[string]string{"runtime": "local"}); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, server.Options{StateDir: dir})
	c, err := client.New(e.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Sandbox(t.Context(), "sb-0123456789ab")
	if !errors.Is(err, execbox.ErrClosed) || !strings.Contains(err.Error(), "sb-0123456789ab was lost") ||
		!strings.Contains(err.Error(), created.Format(time.RFC3339)) {
		t.Errorf("a lost sandbox: %v; want ErrClosed saying it was lost", err)
	}
	r := e.json("DELETE", "/v1/sandboxes/sb-0123456789ab", "")
	wantError(t, "DELETE of a lost sandbox", r, http.StatusGone, api.CodeClosed)
	if _, err := os.Stat(filepath.Join(dir, "sb-0123456789ab.json")); !os.IsNotExist(err) {
		t.Errorf("the lost sandbox's record is left: %v", err)
	}
	if _, err := c.Sandbox(t.Context(), "sb-live00000000"); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("a live server's sandbox: %v; want ErrNotFound", err)
	}

	sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, sb.ID()+".json")
	if _, err := os.Stat(rec); err != nil {
		t.Fatalf("no record of a live sandbox: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Errorf("the record after DELETE: %v", err)
	}
	sb2, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sb2.ID()+".json")); !os.IsNotExist(err) {
		t.Errorf("the record after the server's Close: %v", err)
	}
	d.Remove("sb-live00000000")
}

// TestStateDirRefused: a state directory other users may write is
// refused, naming the setting.
func TestStateDirRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{StateDir: dir})
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "server.state_dir" {
		t.Errorf("New with a world-writable state directory: %v; want a FieldError on server.state_dir", err)
	}
}

// TestLostSandboxTenants: a lost sandbox's ID answers closed to its
// owner (and admins), and not_found to other tenants, as a live one
// would: a restart does not leak which IDs existed.
func TestLostSandboxTenants(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead := owner.Of(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	d, err := owner.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	b, _ := json.Marshal(owner.Record{ID: "sb-0123456789ab", Owner: dead, Created: time.Now(), Data: json.RawMessage(`{"runtime":"local","owner":"alice"}`)})
	if err := os.WriteFile(filepath.Join(dir, "sb-0123456789ab.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, server.Options{StateDir: dir, Keys: tenantKeys()})
	const path = "/v1/sandboxes/sb-0123456789ab/exec"
	body := `{"command":["true"]}`
	wantError(t, "alice: her lost sandbox", e.json("POST", path, body, bearer(aliceKey)...), http.StatusGone, api.CodeClosed)
	wantError(t, "root: a lost sandbox", e.json("POST", path, body, bearer(rootKey)...), http.StatusGone, api.CodeClosed)
	wantError(t, "bob: alice's lost sandbox", e.json("POST", path, body, bearer(bobKey)...), http.StatusNotFound, api.CodeNotFound, "sandbox")

	// A sandbox made now is recorded with its owner.
	id := e.create(bobKey)
	rec, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil || !strings.Contains(string(rec), `"owner":"bob"`) {
		t.Errorf("record of bob's sandbox: %s %v; want its owner", rec, err)
	}
}
