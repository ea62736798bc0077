package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
)

// TestServeTenants runs execbox serve with a keys file: tenants see
// their own sandboxes alone, the admin sees all, a key's maximum holds,
// and a sandbox token reaches its sandbox alone.
func TestServeTenants(t *testing.T) {
	const alice, bob, ops = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef", "ops-key-0123456789abcdef"
	aliceSum := sha256.Sum256([]byte(alice))
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	data := "- {name: alice, key_sha256: " + hex.EncodeToString(aliceSum[:]) + "}\n" +
		"- {name: bob, key: " + bob + ", max_sandboxes: 1}\n" +
		"- {name: ops, key: " + ops + ", admin: true}\n"
	if err := os.WriteFile(keys, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := startServeProcess(t, nil, "--listen", "127.0.0.1:0", "--runtime", "local", "--keys-file", keys)
	ctx := t.Context()
	as := func(key string) *client.Client {
		c, err := client.New(url, client.WithToken(key))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, err := as(alice).Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := as(bob).Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	if l, err := as(alice).Sandboxes(ctx); err != nil || len(l) != 1 || l[0].ID != a.ID() || l[0].Owner != "alice" {
		t.Errorf("alice's list: %+v, %v", l, err)
	}
	if _, err := as(bob).Sandbox(ctx, a.ID()); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("bob attaching alice's sandbox: %v, want ErrNotFound", err)
	}
	if _, err := as(bob).Create(ctx, execbox.Spec{}, client.CreateOptions{}); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("bob's second sandbox: %v, want ErrResourceExhausted", err)
	}
	if l, err := as(ops).Sandboxes(ctx); err != nil || len(l) != 2 {
		t.Errorf("the admin's list: %+v, %v", l, err)
	}
	if _, err := as("wrong-key-0123456789abcdef").Sandboxes(ctx); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("a wrong key: %v, want ErrPermission", err)
	}

	tok, err := a.CreateToken(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := as(tok.Token).Sandbox(ctx, a.ID())
	if err != nil {
		t.Fatalf("attach with the sandbox token: %v", err)
	}
	if res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "echo hi"}); err != nil || res.Stdout.Text() != "hi\n" {
		t.Errorf("exec with the sandbox token: %v, %v", res, err)
	}
	if _, err := as(tok.Token).Sandbox(ctx, b.ID()); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("the token on bob's sandbox: %v, want ErrNotFound", err)
	}
	if _, err := as(tok.Token).Sandboxes(ctx); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("the token listing: %v, want ErrPermission", err)
	}
	if err := sb.Close(); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("the token deleting its sandbox: %v, want ErrPermission", err)
	}
	if err := a.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := as(tok.Token).Sandbox(ctx, a.ID()); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("a revoked token: %v, want ErrPermission (unauthenticated)", err)
	}
}

// TestServeBadKeys: execbox serve refuses to start on a bad keys file,
// naming the entry and the setting.
func TestServeBadKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, data string
		mode       os.FileMode
		args       []string
		want       []string
	}{
		{"same name", "- {name: a, key: aaaaaaaaaaaaaaaaaaaa}\n- {name: a, key: bbbbbbbbbbbbbbbbbbbb}\n", 0o600, nil, []string{"keys.yaml:2: keys[1].name", `key "a"`}},
		{"short key", "- {name: a, key: short}\n", 0o600, nil, []string{"keys[0].key", "at least 16"}},
		{"readable", "- {name: a, key: aaaaaaaaaaaaaaaaaaaa}\n", 0o644, nil, []string{"keys.yaml", "chmod go-rwx"}},
		{"no-auth", "- {name: a, key: aaaaaaaaaaaaaaaaaaaa}\n", 0o600, []string{"--no-auth"}, []string{"--no-auth"}},
	} {
		path := filepath.Join(dir, "keys.yaml")
		os.Remove(path)
		if err := os.WriteFile(path, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		args := append([]string{"serve", "--config=", "--listen", "127.0.0.1:0", "--runtime", "local", "--keys-file", path}, tc.args...)
		code := Main(t.Context(), args, nil, &bytes.Buffer{}, &stderr)
		if code == 0 {
			t.Errorf("%s: exit 0", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr %q, want %q in it", tc.name, stderr.String(), w)
			}
		}
	}
}
