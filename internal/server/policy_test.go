package server_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

// policyHook is a policy webhook on loopback: it records every action it is
// sent (decoded, and as raw JSON) and answers what decide says.
type policyHook struct {
	t  *testing.T
	ts *httptest.Server

	mu      sync.Mutex
	actions []api.PolicyAction
	raw     [][]byte
	headers []http.Header
	decide  func(a api.PolicyAction) (status int, body string)
}

func newPolicyHook(t *testing.T, decide func(a api.PolicyAction) (int, string)) *policyHook {
	h := &policyHook{t: t, decide: decide}
	h.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var a api.PolicyAction
		if err == nil {
			err = json.Unmarshal(b, &a)
		}
		if err != nil {
			t.Errorf("hook: %v", err)
		}
		h.mu.Lock()
		h.actions = append(h.actions, a)
		h.raw = append(h.raw, b)
		h.headers = append(h.headers, r.Header.Clone())
		decide := h.decide
		h.mu.Unlock()
		status, body := decide(a)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/elsewhere") // followed, a 3xx would be a 200
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(h.ts.Close)
	return h
}

// last returns the last action the hook was sent, raw and decoded.
func (h *policyHook) last() (api.PolicyAction, []byte, http.Header) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.actions) == 0 {
		h.t.Fatal("the hook was sent no action")
	}
	n := len(h.actions) - 1
	return h.actions[n], h.raw[n], h.headers[n]
}

func (h *policyHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.actions)
}

// policyAllowAll allows everything.
func policyAllowAll(api.PolicyAction) (int, string) { return 200, `{"allow":true}` }

// policyDenyKinds denies the kinds given, with a reason naming the kind, and
// allows the rest.
func policyDenyKinds(kinds ...api.ActionKind) func(api.PolicyAction) (int, string) {
	return func(a api.PolicyAction) (int, string) {
		for _, k := range kinds {
			if a.Kind == k {
				return 200, `{"allow":false,"reason":"no ` + string(k) + ` here","extra":1}`
			}
		}
		return 200, `{"allow":true}`
	}
}

// newPolicyEnv is a server whose policy is a webhook to h.
func newPolicyEnv(t *testing.T, h *policyHook, timeout time.Duration) *env {
	wh, err := server.NewWebhook(server.WebhookOptions{URL: h.ts.URL + "/decide", Timeout: timeout, Token: "hook-secret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wh.CloseIdleConnections)
	return newEnv(t, server.Options{Policy: wh})
}

// policySandbox creates a sandbox and returns its path prefix and
// workspace (a host directory: the local runtime).
func (e *env) policySandbox(body string) (string, string) {
	e.t.Helper()
	r := e.json("POST", "/v1/sandboxes", body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var info api.SandboxInfo
	if err := json.Unmarshal(r.body, &info); err != nil {
		e.t.Fatal(err)
	}
	return "/v1/sandboxes/" + info.ID + "/", info.Workspace
}

// policyWantDenied checks a permission_denied response carrying reason.
func policyWantDenied(t *testing.T, what string, r response, reason string) {
	t.Helper()
	if e := wantError(t, what, r, http.StatusForbidden, api.CodePermissionDenied); e != nil && !strings.Contains(e.Message, reason) {
		t.Errorf("%s: message %q lacks the reason %q", what, e.Message, reason)
	}
}

// policyTar is a tar stream of one file.
func policyTar(name, content string) *bytes.Buffer {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	_, _ = io.WriteString(tw, content)
	_ = tw.Close()
	return &b
}

// markedProcs lists the processes whose environment holds the entry
// kv ("NAME=value").
func markedProcs(kv string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), kv) {
			pids = append(pids, ent.Name())
		}
	}
	return pids
}

// policyNoFile fails if ws/name exists.
func policyNoFile(t *testing.T, ws, name, what string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(ws, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %s exists after a denial (%v)", what, name, err)
	}
}

// TestPolicyDenies: each denied action answers permission_denied with
// the hook's reason, and nothing happened: no file, no process, no
// sandbox, no session.
func TestPolicyDenies(t *testing.T) {
	testutil.Require(t, needBash)
	h := newPolicyHook(t, policyDenyKinds(api.ActionExec, api.ActionStart, api.ActionSessionRun,
		api.ActionFileWrite, api.ActionFileUpload, api.ActionFileMkdir, api.ActionFileRemove))
	e := newPolicyEnv(t, h, 0)
	sb, ws := e.policySandbox(`{}`)
	if err := os.WriteFile(filepath.Join(ws, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}

	policyWantDenied(t, "exec", e.json("POST", sb+"exec", `{"shell":"touch ran-exec"}`), "no exec here")
	// Start returns once its process runs: a process started for the
	// denied request, which would sleep, is in /proc when the answer
	// comes (the other actions are done, if at all, before theirs).
	mark := "start-" + time.Now().Format("150405.000000000")
	policyWantDenied(t, "start", e.json("POST", sb+"processes", `{"command":["sleep","60"],"env":{"EXECBOX_POLICY_MARK":"`+mark+`"}}`), "no start here")
	if pids := markedProcs("EXECBOX_POLICY_MARK=" + mark); len(pids) > 0 {
		t.Errorf("the denied start started processes %v", pids)
	}
	policyWantDenied(t, "write", e.do("PUT", sb+"files?path=written", strings.NewReader("x"), "Content-Type", api.ContentBytes), "no file.write here")
	policyWantDenied(t, "mkdir", e.json("POST", sb+"files/mkdir?path=made", ""), "no file.mkdir here")
	policyWantDenied(t, "remove", e.json("DELETE", sb+"files?path=keep", ""), "no file.remove here")
	policyWantDenied(t, "upload", e.do("PUT", sb+"files/tar?path=.", policyTar("uploaded", "u"), "Content-Type", api.ContentTar), "no file.upload here")
	s := e.session(sb, `{"kind":"bash"}`)
	policyWantDenied(t, "run", e.json("POST", s+"run", `{"code":"touch ran-run"}`), "no session.run here")

	for _, name := range []string{"ran-exec", "written", "made", "uploaded", "ran-run"} {
		policyNoFile(t, ws, name, "denied action")
	}
	if _, err := os.Stat(filepath.Join(ws, "keep")); err != nil {
		t.Errorf("the denied remove removed keep: %v", err)
	}
	// The session lives on: a denied run is not the interpreter's end.
	h.mu.Lock()
	h.decide = policyAllowAll
	h.mu.Unlock()
	out := runResponse(t, e.json("POST", s+"run", `{"code":"echo alive"}`))
	if string(out.Result.Stdout.Bytes()) != "alive\n" {
		t.Errorf("run after a denied run: %+v", out)
	}

	// A denied create makes no sandbox, and a denied session open none.
	h.mu.Lock()
	h.decide = policyDenyKinds(api.ActionCreate, api.ActionSessionOpen)
	h.mu.Unlock()
	policyWantDenied(t, "create", e.json("POST", "/v1/sandboxes", `{"labels":{"team":"x"}}`), "no create here")
	var list api.SandboxList
	if err := json.Unmarshal(e.json("GET", "/v1/sandboxes", "").body, &list); err != nil || len(list.Sandboxes) != 1 {
		t.Errorf("sandboxes after a denied create: %+v, %v; want the first only", list, err)
	}
	policyWantDenied(t, "session open", e.json("POST", sb+"sessions", `{"kind":"bash"}`), "no session.open here")
	var sl api.SessionList
	if err := json.Unmarshal(e.json("GET", sb+"sessions", "").body, &sl); err != nil || len(sl.Sessions) != 1 {
		t.Errorf("sessions after a denied open: %+v, %v; want the first only", sl, err)
	}
}

// TestPolicySeesStartStdin (red team): a process started without stdin
// in its request keeps its stdin open, fed later by POST
// processes/{p}/stdin, which the hook is never asked about. The start
// reached the hook with no stdin_size, so a hook following the
// documented rule (deny interpreters reading a streamed stdin) allowed
// POST processes {"command":["bash"]}, and any command then went in
// through its stdin. The start now says stdin_size -1: the rule denies
// it; a start whose stdin is in the request is shown it, and its stdin
// cannot be written to afterwards.
func TestPolicySeesStartStdin(t *testing.T) {
	testutil.Require(t, needBash)
	h := newPolicyHook(t, func(a api.PolicyAction) (int, string) {
		if c := a.Command; c != nil && len(c.Command) > 0 && c.Command[0] == "bash" && c.StdinSize < 0 {
			return 200, `{"allow":false,"reason":"no interpreter reading a streamed stdin"}`
		}
		return 200, `{"allow":true}`
	})
	e := newPolicyEnv(t, h, 0)
	sb, ws := e.policySandbox(`{}`)

	r := e.json("POST", sb+"processes", `{"command":["bash"]}`)
	if r.status == http.StatusCreated {
		var st api.ProcessStatus
		_ = json.Unmarshal(r.body, &st)
		e.do("POST", sb+"processes/"+st.ID+"/stdin", strings.NewReader("touch pwned\n"), "Content-Type", api.ContentBytes)
		e.json("POST", sb+"processes/"+st.ID+"/stdin/close", "")
		e.json("GET", sb+"processes/"+st.ID+"/wait", "")
	}
	policyWantDenied(t, "start bash with an open stdin", r, "no interpreter reading a streamed stdin")
	if a, raw, _ := h.last(); a.Kind != api.ActionStart || a.Command == nil || a.Command.StdinSize != -1 {
		t.Errorf("the start's action: %s; want stdin_size -1", raw)
	}
	policyNoFile(t, ws, "pwned", "a command fed through an open stdin")

	// Its stdin in the request: the hook sees it, and nothing more can
	// be written to it.
	r = e.json("POST", sb+"processes", `{"command":["bash"],"stdin":{"text":"touch ok; sleep 1\n"}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("start with its stdin: %d %s", r.status, r.body)
	}
	if a, raw, _ := h.last(); a.Command == nil || a.Command.StdinSize != 18 || a.Command.Stdin != "touch ok; sleep 1\n" {
		t.Errorf("the start's action: %s; want its stdin", raw)
	}
	var st api.ProcessStatus
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	w := e.do("POST", sb+"processes/"+st.ID+"/stdin", strings.NewReader("touch pwned\n"), "Content-Type", api.ContentBytes)
	wantError(t, "a write to a stdin given in the request", w, http.StatusBadRequest, api.CodeInvalidArgument)
	e.json("GET", sb+"processes/"+st.ID+"/wait", "")
	policyNoFile(t, ws, "pwned", "a write to a stdin given in the request")
	if _, err := os.Stat(filepath.Join(ws, "ok")); err != nil {
		t.Errorf("the allowed start did not run: %v", err)
	}

	// A PTY session is typed into: its open says so too.
	e.session(sb, `{"kind":"pty","command":["cat"]}`)
	if a, raw, _ := h.last(); a.Kind != api.ActionSessionOpen || a.Command == nil || a.Command.StdinSize != -1 {
		t.Errorf("a PTY session's open: %s; want stdin_size -1", raw)
	}
}

// TestPolicyAllows: allowed actions happen, and the hook receives the
// documented action for each.
func TestPolicyAllows(t *testing.T) {
	testutil.Require(t, needBash)
	h := newPolicyHook(t, policyAllowAll)
	e := newPolicyEnv(t, h, 0)
	sb, ws := e.policySandbox(`{"labels":{"team":"blue"},"env":{"TOKEN":"create-secret"},"limits":{"open_files":64},
		"assets":[{"path":"a.txt","content":{"text":"abc"},"mode":"0600"}],"setup":[{"shell":"echo set > setup.txt"}]}`)
	id := strings.TrimSuffix(strings.TrimPrefix(sb, "/v1/sandboxes/"), "/")
	a, raw, hdr := h.last()
	if a.Version != api.PolicyVersion || a.Kind != api.ActionCreate || a.Time.IsZero() || time.Since(a.Time) > time.Minute {
		t.Errorf("create action: version %d, kind %q, time %v", a.Version, a.Kind, a.Time)
	}
	if a.Sandbox.ID != "" || a.Sandbox.Runtime != "local" || a.Sandbox.Labels["team"] != "blue" {
		t.Errorf("create action's sandbox: %+v", a.Sandbox)
	}
	c := a.Create
	if c == nil || len(c.EnvNames) != 1 || c.EnvNames[0] != "TOKEN" || c.Limits == nil || c.Limits.OpenFiles != 64 ||
		len(c.Assets) != 1 || c.Assets[0] != (api.ActionAsset{Path: "a.txt", Size: 3, Mode: "0600"}) ||
		len(c.Setup) != 1 || c.Setup[0].Shell != "echo set > setup.txt" {
		t.Errorf("create action: %s", raw)
	}
	if bytes.Contains(raw, []byte("create-secret")) {
		t.Errorf("the action carries an env value: %s", raw)
	}
	if got := hdr.Get("Authorization"); got != "Bearer hook-secret" {
		t.Errorf("the hook got Authorization %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "setup.txt")); err != nil {
		t.Errorf("the allowed create's setup did not run: %v", err)
	}

	r := e.json("POST", sb+"exec", `{"command":["sh","-c","cat > ran; echo $SECRET"],"env":{"SECRET":"hunter2"},
		"stdin":{"text":"some input"},"dir":".","timeout_ms":5000}`, "X-Request-ID", "req-42")
	if r.status != http.StatusOK {
		t.Fatalf("allowed exec: %d %s", r.status, r.body)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ran")); string(b) != "some input" {
		t.Errorf("the allowed exec did not run: ran = %q", b)
	}
	a, raw, hdr = h.last()
	cmd := a.Command
	if a.Kind != api.ActionExec || a.RequestID != "req-42" || hdr.Get("X-Request-ID") != "req-42" ||
		a.Sandbox.ID != id || a.Sandbox.Labels["team"] != "blue" || cmd == nil ||
		strings.Join(cmd.Command, " ") != "sh -c cat > ran; echo $SECRET" || cmd.Dir != "." || cmd.TimeoutMS != 5000 ||
		len(cmd.EnvNames) != 1 || cmd.EnvNames[0] != "SECRET" || cmd.StdinSize != 10 || cmd.Stdin != "some input" || a.Truncated {
		t.Errorf("exec action: %s", raw)
	}
	if bytes.Contains(raw, []byte("hunter2")) {
		t.Errorf("the action carries an env value: %s", raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "kind", "time", "request_id", "sandbox", "command"} {
		if _, ok := m[k]; !ok {
			t.Errorf("exec action lacks %q: %s", k, raw)
		}
	}

	if r := e.do("PUT", sb+"files?path=dir/f.txt&parents=true&mode=0640", strings.NewReader("hello"), "Content-Type", api.ContentBytes); r.status != http.StatusNoContent {
		t.Fatalf("allowed write: %d %s", r.status, r.body)
	}
	a, raw, _ = h.last()
	if a.Kind != api.ActionFileWrite || a.File == nil || *a.File != (api.FileAction{Path: "dir/f.txt", Size: 5, Mode: "0640", Parents: true, Content: "hello"}) {
		t.Errorf("write action: %s", raw)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "dir/f.txt")); string(b) != "hello" {
		t.Errorf("the allowed write wrote %q", b)
	}
	up := policyTar("up.txt", "u")
	size := int64(up.Len())
	if r := e.do("PUT", sb+"files/tar?path=dir", up, "Content-Type", api.ContentTar); r.status != http.StatusNoContent {
		t.Fatalf("allowed upload: %d %s", r.status, r.body)
	}
	if a, raw, _ = h.last(); a.Kind != api.ActionFileUpload || *a.File != (api.FileAction{Path: "dir", Size: size}) {
		t.Errorf("upload action: %s", raw)
	}
	if r := e.json("DELETE", sb+"files?path=dir&recursive=true", ""); r.status != http.StatusNoContent {
		t.Fatalf("allowed remove: %d %s", r.status, r.body)
	}
	if a, raw, _ = h.last(); a.Kind != api.ActionFileRemove || *a.File != (api.FileAction{Path: "dir", Recursive: true}) {
		t.Errorf("remove action: %s", raw)
	}
	policyNoFile(t, ws, "dir", "allowed remove")

	s := e.session(sb, `{"kind":"bash","env":{"K":"session-secret"}}`)
	if a, raw, _ = h.last(); a.Kind != api.ActionSessionOpen || a.Session == nil || a.Session.Kind != execbox.SessionBash ||
		a.Command == nil || len(a.Command.EnvNames) != 1 || bytes.Contains(raw, []byte("session-secret")) {
		t.Errorf("session open action: %s", raw)
	}
	out := runResponse(t, e.json("POST", s+"run", `{"code":"echo ran-in-session"}`))
	if string(out.Result.Stdout.Bytes()) != "ran-in-session\n" {
		t.Errorf("allowed run: %+v", out)
	}
	sid := strings.TrimSuffix(strings.TrimPrefix(s, sb+"sessions/"), "/")
	if a, raw, _ = h.last(); a.Kind != api.ActionSessionRun || a.Session == nil || a.Session.ID != sid ||
		a.Session.Kind != execbox.SessionBash || a.Session.Code != "echo ran-in-session" {
		t.Errorf("session run action: %s", raw)
	}

	// What an agent reads (GET) is not asked about.
	n := h.count()
	e.json("GET", sb+"files/list?path=.", "")
	e.json("GET", sb+"info", "")
	if h.count() != n {
		t.Errorf("reads were sent to the policy: %d actions, want %d", h.count(), n)
	}
}

// TestPolicyTruncates: a long shell line reaches the hook cut, and says
// so.
func TestPolicyTruncates(t *testing.T) {
	h := newPolicyHook(t, policyDenyKinds(api.ActionExec))
	e := newPolicyEnv(t, h, 0)
	sb, _ := e.policySandbox(`{}`)
	long := strings.Repeat("é", api.PolicyMaxText) // two bytes each
	body, _ := json.Marshal(api.ExecRequest{Shell: "echo " + long})
	policyWantDenied(t, "exec", e.json("POST", sb+"exec", string(body)), "no exec here")
	a, raw, _ := h.last()
	if !a.Truncated || a.Command == nil || len(a.Command.Shell) > api.PolicyMaxText || !strings.HasPrefix(a.Command.Shell, "echo éé") ||
		strings.ContainsRune(a.Command.Shell, '\uFFFD') {
		t.Errorf("long shell line: truncated %v, %d bytes", a.Truncated, len(raw))
	}
}

// TestPolicyFailsClosed: a hook that is down, slow, failing or talking
// nonsense refuses the action with unavailable, and nothing runs.
func TestPolicyFailsClosed(t *testing.T) {
	slow := make(chan struct{})
	h := newPolicyHook(t, policyAllowAll)
	e := newPolicyEnv(t, h, 300*time.Millisecond)
	sb, ws := e.policySandbox(`{}`)
	for _, tt := range []struct {
		name, problem string
		decide        func(api.PolicyAction) (int, string)
	}{
		{"500", "answered 500", func(api.PolicyAction) (int, string) { return 500, `{"allow":true}` }},
		{"not JSON", `answered no {"allow"`, func(api.PolicyAction) (int, string) { return 200, `allow` }},
		{"no allow", `answered no {"allow"`, func(api.PolicyAction) (int, string) { return 200, `{"reason":"x"}` }},
		{"string allow", `answered no {"allow"`, func(api.PolicyAction) (int, string) { return 200, `{"allow":"true"}` }},
		{"redirect", "answered 307", func(api.PolicyAction) (int, string) { return 307, `{"allow":true}` }},
		{"slow", "timed out after 300ms", func(api.PolicyAction) (int, string) {
			select {
			case <-slow:
			case <-time.After(5 * time.Second):
			}
			return 200, `{"allow":true}`
		}},
	} {
		h.mu.Lock()
		h.decide = tt.decide
		h.mu.Unlock()
		start := time.Now()
		r := e.json("POST", sb+"exec", `{"shell":"touch ran-`+strings.ReplaceAll(tt.name, " ", "-")+`"}`)
		if er := wantError(t, tt.name, r, http.StatusServiceUnavailable, api.CodeUnavailable); er != nil {
			if !strings.Contains(er.Message, tt.problem) || strings.Contains(er.Message, h.ts.URL) {
				t.Errorf("%s: message %q, want %q and not the hook's address", tt.name, er.Message, tt.problem)
			}
		}
		if d := time.Since(start); tt.name == "slow" && d > 3*time.Second {
			t.Errorf("slow hook: refused after %v, want about the 300ms timeout", d)
		}
	}
	close(slow)
	h.ts.Close() // down
	r := e.json("POST", sb+"exec", `{"shell":"touch ran-down"}`)
	if er := wantError(t, "down", r, http.StatusServiceUnavailable, api.CodeUnavailable); er != nil && !strings.Contains(er.Message, "unreachable") {
		t.Errorf("down: message %q", er.Message)
	}
	r = e.json("POST", "/v1/sandboxes", `{}`)
	wantError(t, "create with the hook down", r, http.StatusServiceUnavailable, api.CodeUnavailable)
	// An exec answers once its command has ended: one run by mistake
	// has left its file by now.
	ents, _ := os.ReadDir(ws)
	for _, ent := range ents {
		t.Errorf("a refused exec ran: %s in the workspace", ent.Name())
	}
	var list api.SandboxList
	if err := json.Unmarshal(e.json("GET", "/v1/sandboxes", "").body, &list); err != nil || len(list.Sandboxes) != 1 {
		t.Errorf("sandboxes after a refused create: %d, %v", len(list.Sandboxes), err)
	}
}

// TestPolicyGoInterface: an embedder's Policy, through the Go client:
// errors classify as ErrPermission and ErrUnavailable.
func TestPolicyGoInterface(t *testing.T) {
	var fail bool
	var mu sync.Mutex
	policy := server.PolicyFunc(func(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return api.PolicyDecision{}, errors.New("rule store down")
		}
		if a.Command != nil && strings.Contains(a.Command.Shell, "rm ") {
			return api.PolicyDecision{Reason: "rm is not allowed"}, nil
		}
		return api.PolicyDecision{Allow: true}, nil
	})
	e := newEnv(t, server.Options{Policy: policy})
	c, err := client.New(e.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "echo ok"}); err != nil || string(res.Stdout.Data) != "ok\n" {
		t.Errorf("allowed exec: %q, %v", res.Stdout.Data, err)
	}
	_, err = sb.Exec(ctx, execbox.ExecRequest{Shell: "rm -rf ."})
	if !errors.Is(err, execbox.ErrPermission) || !strings.Contains(err.Error(), "rm is not allowed") {
		t.Errorf("denied exec: %v, want ErrPermission with the reason", err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	_, err = sb.Exec(ctx, execbox.ExecRequest{Shell: "echo ok"})
	if !errors.Is(err, execbox.ErrUnavailable) || strings.Contains(err.Error(), "rule store") {
		t.Errorf("failing policy: %v, want ErrUnavailable without the policy's own error", err)
	}
}

// TestPolicyNotAskedByAgents: NewSandboxHandler (an agent, inside the
// boundary) never asks a policy: the server in front does.
func TestPolicyNotAskedByAgents(t *testing.T) {
	var asked atomic.Bool
	policy := server.PolicyFunc(func(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error) {
		asked.Store(true)
		return api.PolicyDecision{}, nil
	})
	ts := httptest.NewServer(server.NewSandboxHandler(instant{}, "bench", server.Options{Policy: policy}))
	defer ts.Close()
	c, _ := client.New(ts.URL)
	defer c.Close()
	sb, err := c.Agent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil || asked.Load() {
		t.Errorf("agent exec: %v, policy asked %v; want it run, unasked", err, asked.Load())
	}
}

func TestNewWebhookRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://x/", "http://", "/decide", "http://[::1"} {
		_, err := server.NewWebhook(server.WebhookOptions{URL: u})
		var fe *execbox.FieldError
		if !errors.As(err, &fe) || fe.Field != "url" {
			t.Errorf("NewWebhook(%q) = %v, want a field error naming url", u, err)
		}
	}
}

// TestPolicyTenant: the action names the tenant whose key made the
// request, and, for a sandbox token, the tenant owning the sandbox.
func TestPolicyTenant(t *testing.T) {
	var mu sync.Mutex
	var tenants []string
	policy := server.PolicyFunc(func(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error) {
		mu.Lock()
		defer mu.Unlock()
		tenants = append(tenants, string(a.Kind)+":"+a.Tenant)
		return api.PolicyDecision{Allow: true}, nil
	})
	e := newEnv(t, server.Options{Policy: policy, Keys: tenantKeys()})
	id := e.create(aliceKey)
	tok := e.sandboxToken(aliceKey, id, `{}`)
	for _, key := range []string{aliceKey, tok.Token} {
		if r := e.json("POST", "/v1/sandboxes/"+id+"/exec", `{"command":["true"]}`, bearer(key)...); r.status != http.StatusOK {
			t.Fatalf("exec: %d %s", r.status, r.body)
		}
	}
	e.create(bobKey)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"create:alice", "exec:alice", "exec:alice", "create:bob"}
	if !slices.Equal(tenants, want) {
		t.Errorf("tenants the policy saw: %q, want %q", tenants, want)
	}
}
