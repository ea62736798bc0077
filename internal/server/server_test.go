package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// env is a server on loopback backed by the local runtime.
type env struct {
	t   *testing.T
	srv *server.Server
	ts  *httptest.Server
	api *apiCheck // every request and response checked against api/openapi.yaml
}

func newEnv(t *testing.T, opts server.Options) *env {
	t.Helper()
	opts.Logger = testutil.Logger(t)
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, opts)
	if err != nil {
		t.Fatal(err)
	}
	check := newAPICheck(t, false)
	ts := httptest.NewServer(check.wrap(srv))
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return &env{t: t, srv: srv, ts: ts, api: check}
}

// response is what a raw request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request; body is JSON unless header says otherwise.
func (e *env) do(method, path string, body io.Reader, header ...string) response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.ts.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil || method == "POST" || method == "PUT" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func (e *env) json(method, path, body string, header ...string) response {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return e.do(method, path, r, header...)
}

// sandbox creates a sandbox and returns its path prefix.
func (e *env) sandbox() string {
	e.t.Helper()
	r := e.json("POST", "/v1/sandboxes", `{}`)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var info api.SandboxInfo
	if err := json.Unmarshal(r.body, &info); err != nil {
		e.t.Fatal(err)
	}
	return "/v1/sandboxes/" + info.ID + "/"
}

// wantError checks an error response: status, code, and the fields.
func wantError(t *testing.T, what string, r response, status int, code api.Code, fields ...string) *api.Error {
	t.Helper()
	var er api.ErrorResponse
	if err := json.Unmarshal(r.body, &er); err != nil || er.Error == nil {
		t.Errorf("%s: status %d, body %q: not an error response", what, r.status, r.body)
		return nil
	}
	if r.status != status || er.Error.Code != code {
		t.Errorf("%s: status %d, code %q (%s); want %d, %q", what, r.status, er.Error.Code, er.Error.Message, status, code)
	}
	var got []string
	for _, f := range er.Error.Fields {
		got = append(got, f.Field)
	}
	for _, f := range fields {
		if !slices.Contains(got, f) {
			t.Errorf("%s: fields %q (%s), want %q among them", what, got, er.Error.Message, f)
		}
	}
	if r.header.Get(api.ProtocolHeader) != api.Protocol {
		t.Errorf("%s: %s header %q", what, api.ProtocolHeader, r.header.Get(api.ProtocolHeader))
	}
	return er.Error
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	for _, tc := range []struct {
		name, method, path, body string
		fields                   []string
	}{
		{"bad-json", "POST", "exec", `{"command": [`, []string{"body"}},
		{"not-an-object", "POST", "exec", `["true"]`, []string{"body"}},
		{"trailing-data", "POST", "exec", `{"command":["true"]} {}`, []string{"body"}},
		{"empty-body", "POST", "exec", ``, []string{"body"}},
		{"wrong-type", "POST", "exec", `{"command":"true"}`, []string{"command"}},
		{"unknown-fields", "POST", "exec", `{"command":["true"],"bogus":1,"limits":{"memory_mb":2}}`, []string{"bogus", "limits.memory_mb"}},
		// timeout is the Go API's name; the wire's is timeout_ms.
		{"go-name-of-a-duration", "POST", "processes", `{"command":["true"],"timeout":5}`, []string{"timeout"}},
		{"missing-command", "POST", "exec", `{}`, []string{"command"}},
		{"every-problem-at-once", "POST", "exec", `{"timeout_ms":-5,"output_limit":-1,"limits":{"cpu_time_ms":-1}}`,
			[]string{"command", "timeout_ms", "output_limit", "limits.cpu_time_ms"}},
		{"nested-unknown", "POST", "/v1/sandboxes", `{"setup":[{"shell":"true"},{"shell":"true","timeout":5}],"assets":[{"path":"x","contents":"y"}]}`,
			[]string{"setup[1].timeout", "assets[0].contents"}},
		{"bad-mode", "PUT", "files?path=x&mode=rwx", `data`, []string{"mode"}},
		{"bad-bool", "PUT", "files?path=x&parents=maybe", `data`, []string{"parents"}},
		{"missing-path", "PUT", "files", `data`, []string{"path"}},
		{"bad-limit", "GET", "files?path=x&limit=-3", ``, []string{"limit"}},
		{"bad-from", "GET", "processes/p1/events?from=x", ``, []string{"process"}},
		{"bad-exec-id", "POST", "exec?id=a/b", `{"command":["true"]}`, []string{"id"}},
		{"wrong-content-type", "POST", "exec", `command=true`, []string{"Content-Type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if !strings.HasPrefix(path, "/") {
				path = sb + path
			}
			var header []string
			if tc.name == "wrong-content-type" {
				header = []string{"Content-Type", "application/x-www-form-urlencoded"}
			}
			r := e.json(tc.method, path, tc.body, header...)
			code, status := api.CodeInvalidArgument, http.StatusBadRequest
			if tc.name == "wrong-content-type" {
				status = http.StatusUnsupportedMediaType // refused before any handler
			}
			if tc.name == "bad-from" {
				code, status = api.CodeNotFound, http.StatusNotFound // the process is looked up first
			}
			wantError(t, tc.name, r, status, code, tc.fields...)
		})
	}
	t.Run("missing-signal", func(t *testing.T) {
		r := e.json("POST", sb+"processes", `{"command":["sleep","10"]}`)
		var st api.ProcessStatus
		json.Unmarshal(r.body, &st)
		defer e.json("POST", sb+"processes/"+st.ID+"/kill", "")
		wantError(t, "signal {}", e.json("POST", sb+"processes/"+st.ID+"/signal", `{}`), 400, api.CodeInvalidArgument, "signal")
		wantError(t, "signal name", e.json("POST", sb+"processes/"+st.ID+"/signal", `{"signal":"SIGNOPE"}`), 400, api.CodeInvalidArgument, "signal")
		if r := e.json("POST", sb+"processes/"+st.ID+"/signal", `{"signal":"TERM"}`); r.status != http.StatusNoContent {
			t.Errorf("signal TERM: %d %s", r.status, r.body)
		}
	})
}

func TestOversizedBodies(t *testing.T) {
	e := newEnv(t, server.Options{MaxJSONBody: 1024, MaxFileBody: 10})
	sb := e.sandbox()
	big := `{"command":["true"],"env":{"X":"` + strings.Repeat("x", 2000) + `"}}`
	wantError(t, "exec over MaxJSONBody", e.json("POST", sb+"exec", big), http.StatusRequestEntityTooLarge, api.CodeResourceExhausted, "body")
	wantError(t, "write over MaxFileBody", e.json("PUT", sb+"files?path=f", "01234567890"), http.StatusRequestEntityTooLarge, api.CodeResourceExhausted, "body")
	if r := e.json("PUT", sb+"files?path=f", "0123456789"); r.status != http.StatusNoContent {
		t.Errorf("write of MaxFileBody bytes: %d %s", r.status, r.body)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, server.Options{Token: "t0ken"})
	for _, tc := range []struct {
		name, path string
		header     []string
		status     int
	}{
		{"none", "/v1/sandboxes", nil, 401},
		{"wrong", "/v1/sandboxes", []string{"Authorization", "Bearer t0ke"}, 401},
		{"longer", "/v1/sandboxes", []string{"Authorization", "Bearer t0ken2"}, 401},
		{"not-bearer", "/v1/sandboxes", []string{"Authorization", "Basic t0ken"}, 401},
		{"right", "/v1/sandboxes", []string{"Authorization", "Bearer t0ken"}, 200},
		{"health-is-public", "/v1/health", nil, 200},
		{"version-is-public", "/v1/version", nil, 200},
		{"unknown-endpoint-needs-token", "/v1/nope", nil, 401},
	} {
		r := e.json("GET", tc.path, "", tc.header...)
		if r.status != tc.status {
			t.Errorf("%s: GET %s: status %d, want %d", tc.name, tc.path, r.status, tc.status)
		}
		if tc.status == 401 {
			wantError(t, tc.name, r, 401, api.CodeUnauthenticated)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: no WWW-Authenticate header", tc.name)
			}
		}
	}
	c, _ := client.New(e.ts.URL, client.WithToken("wrong"))
	if _, err := c.Sandboxes(t.Context()); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("client with a wrong token: %v, want ErrPermission", err)
	}
	c, _ = client.New(e.ts.URL, client.WithToken("t0ken"))
	if _, err := c.Sandboxes(t.Context()); err != nil {
		t.Errorf("client with the token: %v", err)
	}
}

func TestHostPaths(t *testing.T) {
	e := newEnv(t, server.Options{})
	dir := t.TempDir()
	r := e.json("POST", "/v1/sandboxes", `{"workspace":"`+dir+`","assets":[{"source":"/etc/passwd","path":"pw"},{"content":{"text":"ok"},"path":"c"}]}`)
	wantError(t, "host paths", r, http.StatusForbidden, api.CodePermissionDenied, "workspace", "assets[0].source")
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("the refused workspace was written to")
	}
	r = e.json("POST", "/v1/sandboxes?runtime=docker", `{}`)
	wantError(t, "unknown runtime", r, http.StatusNotFound, api.CodeNotFound, "runtime")
	r = e.json("POST", "/v1/sandboxes", `{"assets":[{"content":{"text":"ok"},"path":"c","mode":"0600"}],"setup":[{"shell":"test \"$(cat c)\" = ok"}]}`)
	if r.status != http.StatusCreated {
		t.Errorf("content asset and setup: %d %s", r.status, r.body)
	}
}

func TestSetupErrorOverTheWire(t *testing.T) {
	e := newEnv(t, server.Options{})
	c, _ := client.New(e.ts.URL)
	_, err := c.Create(t.Context(), execbox.Spec{Setup: []execbox.ExecRequest{{Shell: "true"}, {Shell: "echo boom >&2; exit 7"}}}, client.CreateOptions{})
	var se *execbox.SetupError
	if !errors.As(err, &se) || !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("Create with a failing setup on the server: %v, want a *SetupError", err)
	}
	if se.Index != 1 || se.Result.ExitCode != 7 || !strings.Contains(se.Result.Stderr.Text(), "boom") {
		t.Errorf("SetupError: index %d, %s, stderr %q", se.Index, se.Result.String(), se.Result.Stderr.Text())
	}
	if l, _ := c.Sandboxes(t.Context()); len(l) != 0 {
		t.Errorf("sandboxes after a failed create: %v", l)
	}
}

func TestDeletedSandbox(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	id := strings.Split(sb, "/")[3]
	r := e.json("GET", "/v1/sandboxes/"+id, "")
	var info api.SandboxInfo
	if json.Unmarshal(r.body, &info); r.status != 200 || info.ID != id || info.Runtime != "local" || info.Workspace == "" {
		t.Errorf("GET sandbox: %d %s", r.status, r.body)
	}
	if r := e.json("DELETE", "/v1/sandboxes/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(info.Workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace after DELETE: %v", err)
	}
	wantError(t, "exec in a deleted sandbox", e.json("POST", sb+"exec", `{"command":["true"]}`), http.StatusGone, api.CodeClosed)
	wantError(t, "second DELETE", e.json("DELETE", "/v1/sandboxes/"+id, ""), http.StatusGone, api.CodeClosed)
	wantError(t, "unknown sandbox", e.json("GET", "/v1/sandboxes/sb-nope/info", ""), http.StatusNotFound, api.CodeNotFound, "sandbox")
	wantError(t, "unknown endpoint", e.json("GET", "/v1/nope", ""), http.StatusNotImplemented, api.CodeUnsupported, "path")
	wantError(t, "wrong method", e.json("PATCH", "/v1/health", ""), http.StatusNotImplemented, api.CodeUnsupported, "path")
	wantError(t, "unknown process", e.json("GET", e.sandbox()+"processes/p9/wait", ""), http.StatusNotFound, api.CodeNotFound, "process")
}

func TestExecStdinForms(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	stdout := func(r response) string {
		t.Helper()
		var out api.ExecResponse
		if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
			t.Fatalf("exec: %d %s", r.status, r.body)
		}
		return string(out.Result.Stdout.Bytes())
	}
	if got := stdout(e.json("POST", sb+"exec", `{"command":["cat"],"stdin":{"text":"hi\n"}}`)); got != "hi\n" {
		t.Errorf("stdin text: %q", got)
	}
	if got := stdout(e.json("POST", sb+"exec", `{"command":["cat"],"stdin":{"data":"/wA="}}`)); got != "\xff\x00" {
		t.Errorf("stdin data: %q", got)
	}
	multi := func(parts ...string) (io.Reader, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for i := 0; i+1 < len(parts); i += 2 {
			w, _ := mw.CreateFormField(parts[i])
			io.WriteString(w, parts[i+1])
		}
		mw.Close()
		return &buf, "multipart/mixed; boundary=" + mw.Boundary()
	}
	body, ct := multi("request", `{"command":["cat"]}`, "stdin", "streamed")
	if got := stdout(e.do("POST", sb+"exec", body, "Content-Type", ct)); got != "streamed" {
		t.Errorf("multipart stdin: %q", got)
	}
	body, ct = multi("request", `{"command":["cat"]}`)
	if got := stdout(e.do("POST", sb+"exec", body, "Content-Type", ct)); got != "" {
		t.Errorf("multipart without stdin: %q", got)
	}
	body, ct = multi("req", `{"command":["cat"]}`)
	wantError(t, "multipart misnamed", e.do("POST", sb+"exec", body, "Content-Type", ct), 400, api.CodeInvalidArgument, "body")
	body, ct = multi("request", `{"command":["cat"],"stdin":{"text":"x"}}`, "stdin", "y")
	wantError(t, "stdin twice", e.do("POST", sb+"exec", body, "Content-Type", ct), 400, api.CodeInvalidArgument, "stdin")
}

func TestExecCancelByID(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	run := func(id string) (api.ExecResponse, time.Duration) {
		start := time.Now()
		r := e.json("POST", sb+"exec?id="+id, `{"shell":"echo started; : > started; exec sleep 30"}`)
		var out api.ExecResponse
		if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
			t.Errorf("exec: %d %s", r.status, r.body)
		}
		return out, time.Since(start)
	}
	done := make(chan api.ExecResponse, 1)
	go func() { out, _ := run("abc"); done <- out }()
	// Cancel once it runs (a cancel that comes first is checked below).
	testutil.Eventually(t, 10*time.Second, func() bool {
		return e.json("GET", sb+"files/stat?path=started", "").status == http.StatusOK
	}, "the exec to start")
	if r := e.json("POST", sb+"exec/abc/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case out := <-done:
		if out.Error == nil || out.Error.Code != api.CodeCanceled || out.Result.Reason != execbox.ReasonKilled {
			t.Errorf("cancelled exec: reason %q, error %+v; want killed, canceled", out.Result.Reason, out.Error)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled exec did not return")
	}
	// A cancel that arrives first is remembered.
	e.json("POST", sb+"exec/early/cancel", "")
	out, d := run("early")
	if out.Result.Reason != execbox.ReasonKilled || d > 10*time.Second {
		t.Errorf("exec cancelled before it came: %q after %v", out.Result.Reason, d)
	}
}

func TestEventsSSE(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	r := e.json("POST", sb+"processes", `{"shell":"echo a; sleep 0.05; echo b >&2"}`)
	var st api.ProcessStatus
	if json.Unmarshal(r.body, &st); r.status != http.StatusCreated || st.ID == "" || !st.Running {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	if r := e.json("GET", sb+"processes/"+st.ID+"/wait", ""); r.status != 200 {
		t.Fatalf("wait: %d %s", r.status, r.body)
	}
	r = e.json("GET", sb+"processes/"+st.ID+"/events", "", "Accept", api.ContentSSE, "Last-Event-ID", "1")
	if ct := r.header.Get("Content-Type"); ct != api.ContentSSE {
		t.Errorf("Content-Type %q", ct)
	}
	var ids, kinds []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		switch k {
		case "id":
			ids = append(ids, v)
		case "event":
			kinds = append(kinds, v)
		case "data":
			var ev api.Event
			if err := json.Unmarshal([]byte(v), &ev); err != nil {
				t.Errorf("data line %q: %v", v, err)
			}
		}
	}
	if strings.Join(ids, ",") != "2,3" || strings.Join(kinds, ",") != "stderr,exit" {
		t.Errorf("SSE after Last-Event-ID 1: ids %v, events %v; want 2,3 and stderr,exit\n%s", ids, kinds, r.body)
	}
	// NDJSON from 1: one event per line.
	r = e.json("GET", sb+"processes/"+st.ID+"/events?from=1", "")
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
	if r.header.Get("Content-Type") != api.ContentNDJSON || len(lines) != 3 {
		t.Errorf("NDJSON: %q", r.body)
	}
	var first api.Event
	if json.Unmarshal([]byte(lines[0]), &first); first.Seq != 1 || first.Kind != "stdout" || first.Text != "a\n" {
		t.Errorf("first line %q", lines[0])
	}
}

func TestFilesKEPListing(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	if r := e.json("PUT", sb+"files?path=d/f.txt&parents=true&mode=0600", "content"); r.status != http.StatusNoContent {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	r := e.json("GET", sb+"files?path=d", "", "Accept", api.ContentJSON)
	var l api.FileList
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Entries) != 1 {
		t.Fatalf("GET files on a directory asking for JSON: %d %s", r.status, r.body)
	}
	if fi := l.Entries[0]; fi.Name != "f.txt" || fi.Path != "d/f.txt" || fi.Type != api.TypeFile || fi.Mode != "0600" || fi.Size != 7 || fi.ModifiedAt.IsZero() {
		t.Errorf("entry %+v", fi)
	}
	r = e.json("GET", sb+"files?path=d/f.txt", "")
	if r.status != 200 || string(r.body) != "content" || r.header.Get("Content-Type") != api.ContentBytes {
		t.Errorf("GET file: %d %q %q", r.status, r.body, r.header.Get("Content-Type"))
	}
	wantError(t, "GET a directory as bytes", e.json("GET", sb+"files?path=d", "", "Accept", api.ContentBytes), 400, api.CodeInvalidArgument)
	wantError(t, "path leaving the workspace", e.json("GET", sb+"files?path=../../etc/passwd", ""), 403, api.CodePermissionDenied)
	wantError(t, "absolute path elsewhere", e.json("GET", sb+"files?path=/etc/passwd", ""), 403, api.CodePermissionDenied)
}

func TestObserver(t *testing.T) {
	var mu sync.Mutex
	var routes []string
	var execs []server.ExecStats
	e := newEnv(t, server.Options{Observer: &server.Observer{
		Request: func(s server.RequestStats) { mu.Lock(); routes = append(routes, s.Route); mu.Unlock() },
		Exec:    func(s server.ExecStats) { mu.Lock(); execs = append(execs, s); mu.Unlock() },
	}})
	sb := e.sandbox()
	e.json("POST", sb+"exec", `{"command":["true"]}`)
	e.json("POST", sb+"exec", `{"command":["no-such-program-x"]}`)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(routes, "POST /v1/sandboxes/{sandbox}/exec") || !slices.Contains(routes, "POST /v1/sandboxes") {
		t.Errorf("routes %q", routes)
	}
	if len(execs) != 2 || execs[0].Runtime != "local" || execs[0].Outcome != "exited" || execs[1].Outcome != "error:not_found" {
		t.Errorf("exec stats %+v", execs)
	}
}

// plain hides the process table of a sandbox, so the handler keeps its own.
type plain struct{ execbox.Sandbox }

func TestOwnProcessTable(t *testing.T) {
	sb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ts := httptest.NewServer(server.NewSandboxHandler(plain{sb}, "local", server.Options{Logger: testutil.Logger(t)}))
	defer ts.Close()
	c, _ := client.New(ts.URL)
	rsb, err := c.Agent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p, err := rsb.Start(t.Context(), execbox.ExecRequest{Shell: "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(t.Context())
	if err != nil || string(res.Stdout.Data) != "hi\n" {
		t.Fatalf("Wait = %s %q, %v", res.String(), res.Stdout.Data, err)
	}
	again, err := rsb.Process(t.Context(), p.ID())
	if err != nil {
		t.Fatalf("Process(%s) after it ended: %v", p.ID(), err)
	}
	if r, err := again.Poll(t.Context()); err != nil || r == nil || !r.Success() {
		t.Errorf("Poll = %v, %v", r, err)
	}
	if _, err := rsb.Process(t.Context(), "p999"); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Process(p999): %v, want ErrNotFound", err)
	}
}

func TestCloseClosesEverySandbox(t *testing.T) {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, _ := client.New(ts.URL)
	var workspaces []string
	var procs []execbox.Process
	var pids []int
	dir := t.TempDir()
	for i := range 2 {
		sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pidFile := filepath.Join(dir, strconv.Itoa(i))
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Shell: "echo $$ > " + pidFile + "; exec sleep 300"})
		if err != nil {
			t.Fatal(err)
		}
		workspaces, procs = append(workspaces, sb.Workspace()), append(procs, p)
		pids = append(pids, testutil.WaitPIDFile(t, pidFile))
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close returns once every process is gone.
	for _, pid := range pids {
		if testutil.Alive(pid) {
			t.Errorf("process %d survived Close", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, ws := range workspaces {
		if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("workspace %s after Close: %v", ws, err)
		}
	}
	for _, p := range procs {
		if _, err := p.Wait(t.Context()); !errors.Is(err, execbox.ErrClosed) {
			t.Errorf("Wait after the server closed: %v, want ErrClosed", err)
		}
	}
	if _, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{}); !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("Create after Close: %v, want ErrUnavailable", err)
	}
	h, err := c.Health(t.Context())
	if err != nil || h.Status != api.StatusUnavailable {
		t.Errorf("Health after Close = %+v, %v; want unavailable", h, err)
	}
}
