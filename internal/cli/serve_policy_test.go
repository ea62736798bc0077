package cli

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
)

// TestServePolicy: execbox serve with server.policy_url asks the hook,
// with its token, before each action; a denial is permission_denied with
// the reason and nothing happens; the hook's token reaches no command.
func TestServePolicy(t *testing.T) {
	var mu sync.Mutex
	var kinds []api.ActionKind
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer hook-tok" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		var a api.PolicyAction
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &a); err != nil {
			t.Errorf("hook: %v: %s", err, b)
		}
		mu.Lock()
		kinds = append(kinds, a.Kind)
		mu.Unlock()
		switch {
		case a.Command != nil && strings.Contains(a.Command.Shell, "forbidden"):
			_, _ = io.WriteString(w, `{"allow":false,"reason":"forbidden is forbidden"}`)
		case a.File != nil && a.File.Path == "denied.txt":
			_, _ = io.WriteString(w, `{"allow":false,"reason":"not that file"}`)
		default:
			_, _ = io.WriteString(w, `{"allow":true}`)
		}
	}))
	defer hook.Close()
	const tokenVar, hookVar = "EXECBOX_TEST_SERVE_TOKEN", "EXECBOX_TEST_HOOK_TOKEN"
	t.Setenv(tokenVar, "tok")
	t.Setenv(hookVar, "hook-tok")
	t.Setenv("EXECBOX_SERVER_POLICY_TOKEN_ENV", hookVar)
	url, stop := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar,
		"--policy-url", hook.URL+"/decide", "--policy-timeout", "2s")
	defer stop()
	ctx := t.Context()
	c, _ := client.New(url, client.WithToken("tok"))
	defer c.Close()
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, err = sb.Exec(ctx, execbox.ExecRequest{Shell: "touch ran; echo forbidden"})
	if !errors.Is(err, execbox.ErrPermission) || !strings.Contains(err.Error(), "forbidden is forbidden") {
		t.Errorf("denied exec: %v, want ErrPermission with the reason", err)
	}
	if err := sb.Files().WriteFile(ctx, "denied.txt", []byte("x"), execbox.WriteOptions{}); !errors.Is(err, execbox.ErrPermission) || !strings.Contains(err.Error(), "not that file") {
		t.Errorf("denied write: %v, want ErrPermission with the reason", err)
	}
	// Through the API: the workspace may be inside a boundary.
	if err := sb.Files().WriteFile(ctx, "allowed.txt", []byte("x"), execbox.WriteOptions{}); err != nil {
		t.Errorf("allowed write: %v", err)
	}
	for name, want := range map[string]bool{"ran": false, "denied.txt": false, "allowed.txt": true} {
		if _, err := sb.Files().Stat(ctx, name); (err == nil) != want || (!want && !errors.Is(err, execbox.ErrNotFound)) {
			t.Errorf("stat %s: %v; want it there: %v", name, err, want)
		}
	}
	t.Logf("runtime %s", sb.Info().Runtime)
	res, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"env"}, EnvPolicy: execbox.EnvInherit})
	if err != nil || strings.Contains(string(res.Stdout.Data), "hook-tok") {
		t.Errorf("allowed exec: %v; the hook's token reaches commands: %v", err, strings.Contains(string(res.Stdout.Data), "hook-tok"))
	}
	mu.Lock()
	got := append([]api.ActionKind(nil), kinds...)
	mu.Unlock()
	want := []api.ActionKind{api.ActionCreate, api.ActionExec, api.ActionFileWrite, api.ActionFileWrite, api.ActionExec}
	if strings.Join(policyKindNames(got), " ") != strings.Join(policyKindNames(want), " ") {
		t.Errorf("the hook was asked %q, want %q", got, want)
	}

	// The hook gone: refused, unavailable.
	hook.Close()
	if _, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "true"}); !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("exec with the hook down: %v, want ErrUnavailable", err)
	}
}

func policyKindNames(kinds []api.ActionKind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// TestServePolicyTokenRequired: a token variable that is named but empty
// stops serve at start, naming the key.
func TestServePolicyTokenRequired(t *testing.T) {
	var stderr strings.Builder
	code := Main(t.Context(), []string{"serve", "--config=", "--listen", "127.0.0.1:0", "--no-auth",
		"--policy-url", "http://127.0.0.1:9/", "--policy-token-env", "EXECBOX_TEST_UNSET_HOOK_TOKEN"}, nil, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "--policy-token-env: $EXECBOX_TEST_UNSET_HOOK_TOKEN is empty") {
		t.Errorf("serve = %d, stderr %q; want a failure naming --policy-token-env", code, stderr.String())
	}
}
