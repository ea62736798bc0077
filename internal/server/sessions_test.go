package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

var needBash = testutil.Command("bash")

// session opens a session of kind in the sandbox at sb and returns its
// path prefix.
func (e *env) session(sb, body string) string {
	e.t.Helper()
	r := e.json("POST", sb+"sessions", body)
	var info api.SessionInfo
	if err := json.Unmarshal(r.body, &info); err != nil || r.status != http.StatusCreated || info.ID == "" {
		e.t.Fatalf("open session %s: %d %s", body, r.status, r.body)
	}
	if loc := r.header.Get("Location"); loc != sb+"sessions/"+info.ID {
		e.t.Errorf("Location %q", loc)
	}
	return sb + "sessions/" + info.ID + "/"
}

func runResponse(t *testing.T, r response) api.RunResponse {
	t.Helper()
	var out api.RunResponse
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != http.StatusOK {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	return out
}

func TestSessionEndpoints(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	s := e.session(sb, `{"kind":"bash","grace_period_ms":500}`)
	id := strings.TrimSuffix(strings.TrimPrefix(s, sb+"sessions/"), "/")

	out := runResponse(t, e.json("POST", s+"run", `{"code":"x=41; echo $((x+1))"}`))
	if out.Error != nil || out.Result.Reason != execbox.ReasonExited || string(out.Result.Stdout.Bytes()) != "42\n" {
		t.Errorf("run: %+v", out)
	}
	out = runResponse(t, e.json("POST", s+"run", `{"code":"cat; echo $x","stdin":{"text":"in\n"}}`))
	if got := string(out.Result.Stdout.Bytes()); got != "in\n41\n" {
		t.Errorf("run with stdin: %q", got)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, _ := mw.CreateFormField("request")
	io.WriteString(w, `{"code":"tr a-z A-Z"}`)
	w, _ = mw.CreateFormField("stdin")
	io.WriteString(w, "streamed")
	mw.Close()
	out = runResponse(t, e.do("POST", s+"run", &buf, "Content-Type", "multipart/mixed; boundary="+mw.Boundary()))
	if got := string(out.Result.Stdout.Bytes()); got != "STREAMED" {
		t.Errorf("run with streamed stdin: %q", got)
	}

	r := e.json("GET", sb+"sessions", "")
	var list api.SessionList
	if json.Unmarshal(r.body, &list); r.status != 200 || len(list.Sessions) != 1 || list.Sessions[0].ID != id || list.Sessions[0].Kind != execbox.SessionBash {
		t.Errorf("list: %d %s", r.status, r.body)
	}
	r = e.json("GET", strings.TrimSuffix(s, "/"), "")
	var info api.SessionInfo
	if json.Unmarshal(r.body, &info); r.status != 200 || info.ID != id || len(info.Command) == 0 || info.CreatedAt.IsZero() {
		t.Errorf("get: %d %s", r.status, r.body)
	}
	wantError(t, "write on bash", e.json("POST", s+"write", "x"), http.StatusNotImplemented, api.CodeUnsupported, "kind")
	wantError(t, "resize on bash", e.json("POST", s+"resize", `{"rows":10,"cols":10}`), http.StatusNotImplemented, api.CodeUnsupported, "kind")

	// exit ends the interpreter during the command: the result, and why.
	out = runResponse(t, e.json("POST", s+"run", `{"code":"echo bye; exit 3"}`))
	if out.Error == nil || out.Error.Code != api.CodeClosed || out.Result.ExitCode != 3 || string(out.Result.Stdout.Bytes()) != "bye\n" {
		t.Errorf("exit 3: %+v", out)
	}
	wantError(t, "run after exit", e.json("POST", s+"run", `{"code":"true"}`), http.StatusGone, api.CodeClosed)
	r = e.json("GET", s+"wait", "")
	var res api.Result
	if json.Unmarshal(r.body, &res); r.status != 200 || res.ExitCode != 3 {
		t.Errorf("wait: %d %s", r.status, r.body)
	}
	r = e.json("DELETE", strings.TrimSuffix(s, "/"), "")
	if json.Unmarshal(r.body, &res); r.status != 200 || res.ExitCode != 3 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	wantError(t, "delete again", e.json("DELETE", strings.TrimSuffix(s, "/"), ""), http.StatusNotFound, api.CodeNotFound, "session")
}

func TestSessionBadRequests(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	for _, tc := range []struct {
		name, body string
		fields     []string
	}{
		{"no-kind", `{}`, []string{"kind"}},
		{"unknown-fields", `{"kind":"bash","shell":"zsh","limits":{"memory_mb":1}}`, []string{"shell", "limits.memory_mb"}},
		// The Go API's name of a duration is not the wire's.
		{"go-name", `{"kind":"bash","grace_period":5}`, []string{"grace_period"}},
		{"every-problem-at-once", `{"kind":"fish","rows":-1,"grace_period_ms":-1,"event_window":-1}`,
			[]string{"kind", "rows", "grace_period_ms", "event_window"}},
	} {
		wantError(t, tc.name, e.json("POST", sb+"sessions", tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.fields...)
	}
	wantError(t, "rlimit on local", e.json("POST", sb+"sessions", `{"kind":"bash","limits":{"memory":1048576}}`), http.StatusNotImplemented, api.CodeUnsupported, "limits.memory")
	wantError(t, "unknown session", e.json("POST", sb+"sessions/s99/run", `{"code":"true"}`), http.StatusNotFound, api.CodeNotFound, "session")

	s := e.session(sb, `{"kind":"bash"}`)
	for _, tc := range []struct {
		name, method, path, body string
		fields                   []string
	}{
		{"run-unknown-field", "POST", "run", `{"code":"true","timeout":1}`, []string{"timeout"}},
		{"run-negatives", "POST", "run", `{"code":"true","timeout_ms":-1,"output_limit":-1}`, []string{"timeout_ms", "output_limit"}},
		{"run-bad-id", "POST", "run?id=a/b", `{"code":"true"}`, []string{"id"}},
		{"run-empty-body", "POST", "run", ``, []string{"body"}},
		{"cancel-bad-id", "POST", "run/a%20b/cancel", ``, []string{"run"}},
	} {
		wantError(t, tc.name, e.json(tc.method, s+tc.path, tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.fields...)
	}
	// The session is intact after bad requests.
	out := runResponse(t, e.json("POST", s+"run", `{"code":"echo ok"}`))
	if string(out.Result.Stdout.Bytes()) != "ok\n" {
		t.Errorf("after bad requests: %+v", out)
	}
}

func TestSessionRunCancelByID(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	s := e.session(sb, `{"kind":"bash"}`)
	done := make(chan response, 1)
	go func() {
		done <- e.json("POST", s+"run?id=r1", `{"code":"x=kept; echo started; : > started; sleep 30; echo after"}`)
	}()
	testutil.Eventually(t, 10*time.Second, func() bool {
		return e.json("GET", sb+"files/stat?path=started", "").status == http.StatusOK
	}, "the run to start")
	if r := e.json("POST", s+"run/r1/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case r := <-done:
		out := runResponse(t, r)
		if out.Error == nil || out.Error.Code != api.CodeCanceled || out.Result.Reason != execbox.ReasonKilled || string(out.Result.Stdout.Bytes()) != "started\n" {
			t.Errorf("cancelled run: %+v; want killed, canceled, and the output so far", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled run did not return")
	}
	// A cancel that comes before its run is remembered: the run never
	// starts, and answers with the error alone, as Run with a done ctx.
	e.json("POST", s+"run/early/cancel", "")
	wantError(t, "run cancelled before it came", e.json("POST", s+"run?id=early", `{"code":"x=changed"}`), 499, api.CodeCanceled)
	// The session and its state live on.
	out := runResponse(t, e.json("POST", s+"run", `{"code":"echo $x"}`))
	if string(out.Result.Stdout.Bytes()) != "kept\n" {
		t.Errorf("after the cancels: %+v", out)
	}
}

func TestSessionPTYEvents(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	s := e.session(sb, `{"kind":"pty","command":["sh"],"rows":30,"cols":100}`)
	if r := e.json("POST", s+"resize", `{"rows":40,"cols":120}`); r.status != http.StatusNoContent {
		t.Errorf("resize: %d %s", r.status, r.body)
	}
	wantError(t, "resize to zero", e.json("POST", s+"resize", `{"rows":0,"cols":120}`), http.StatusBadRequest, api.CodeInvalidArgument, "size")
	r := e.do("POST", s+"write", strings.NewReader("stty size; exit 4\n"), "Content-Type", api.ContentBytes)
	var wr api.WriteResponse
	if json.Unmarshal(r.body, &wr); r.status != 200 || wr.Written != 18 {
		t.Errorf("write: %d %s", r.status, r.body)
	}
	wantError(t, "run on a pty", e.json("POST", s+"run", `{"code":"true"}`), http.StatusNotImplemented, api.CodeUnsupported, "kind")
	r = e.json("GET", s+"wait", "")
	if r.status != 200 {
		t.Fatalf("wait: %d %s", r.status, r.body)
	}
	// The whole stream, then from the last event: the same sequence
	// numbers as a process's.
	r = e.json("GET", s+"events?from=1", "")
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
	var out strings.Builder
	var last api.Event
	for _, l := range lines {
		var ev api.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out.Write(ev.Bytes())
		last = ev
	}
	if !strings.Contains(out.String(), "40 120") || last.Kind != execbox.EventExit || last.Result == nil || last.Result.ExitCode != 4 {
		t.Errorf("events: %q, last %+v", out.String(), last)
	}
	r = e.json("GET", s+"events?from="+itoa(last.Seq), "", "Accept", api.ContentSSE)
	if !strings.HasPrefix(string(r.body), "id: "+itoa(last.Seq)+"\nevent: exit\n") {
		t.Errorf("SSE from the last event: %q", r.body)
	}
	// Events of a bash session: unsupported, in the stream.
	b := e.session(sb, `{"kind":"bash"}`)
	r = e.json("GET", b+"events", "")
	var ev api.Event
	if json.Unmarshal(r.body, &ev); ev.Kind != api.EventError || ev.Error == nil || ev.Error.Code != api.CodeUnsupported {
		t.Errorf("events of a bash session: %s", r.body)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestSessionsUnsupported checks that a sandbox without sessions answers
// unsupported, and that the info endpoint carries its capabilities.
func TestSessionsUnsupported(t *testing.T) {
	sb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ts := httptest.NewServer(server.NewSandboxHandler(plain{sb}, "local", server.Options{Logger: testutil.Logger(t)}))
	defer ts.Close()
	e := &env{t: t, ts: ts}
	wantError(t, "open", e.json("POST", "/v1/sessions", `{"kind":"bash"}`), http.StatusNotImplemented, api.CodeUnsupported)
	wantError(t, "list", e.json("GET", "/v1/sessions", ""), http.StatusNotImplemented, api.CodeUnsupported)
	wantError(t, "run", e.json("POST", "/v1/sessions/s1/run", `{"code":"true"}`), http.StatusNotImplemented, api.CodeUnsupported)
	r := e.json("GET", "/v1/info", "")
	var info api.SandboxInfo
	if json.Unmarshal(r.body, &info); info.Capabilities == nil || info.Capabilities.Capabilities() != sb.Capabilities() {
		t.Errorf("info: %s, want the capabilities %+v", r.body, sb.Capabilities())
	}
}

// TestUnreadStreamedStdinKeepsConnection is the regression test of runs
// (and execs) that failed after one whose command left its streamed stdin
// unread: the next request on the connection got EOF, or the call itself
// its write's EPIPE instead of the response, because the server stopped
// reading the body and closed the connection after answering.
func TestUnreadStreamedStdinKeepsConnection(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	s := e.session(sb, `{"kind":"bash"}`)
	hc := &http.Client{Transport: &http.Transport{}} // a pool of its own
	defer hc.CloseIdleConnections()
	// More than a pipe holds (up to 1 MiB with F_SETPIPE_SZ) and than the
	// server's own discard after a reply (256 KiB).
	chunk := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	post := func(path, request string, stdin func(w io.Writer)) *http.Response {
		t.Helper()
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			w, _ := mw.CreateFormField("request")
			io.WriteString(w, request)
			w, _ = mw.CreateFormField("stdin")
			stdin(w)
			pw.CloseWithError(mw.Close())
		}()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.ts.URL+path, pr)
		req.Header.Set("Content-Type", "multipart/mixed; boundary="+mw.Boundary())
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return resp
	}
	next := func(what string) {
		t.Helper()
		var reused bool
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+sb+"info", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: the next request: %v", what, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !reused {
			t.Errorf("%s: the next request: status %d, reused connection %v; want 200 on the same connection", what, resp.StatusCode, reused)
		}
	}
	for _, tc := range []struct{ name, path, request string }{
		{"exec", sb + "exec", `{"command":["true"]}`},
		{"run", s + "run", `{"code":"true"}`},
	} {
		// The whole body sent at once. Go's Transport reuses a
		// connection only if its request's write ended within 50 ms of
		// the response's end: the test waits for the body to be taken,
		// so that a loaded machine does not fail it.
		taken := make(chan struct{})
		resp := post(tc.path, tc.request, func(w io.Writer) {
			defer close(taken)
			for range 3 {
				w.Write(chunk)
			}
		})
		select {
		case <-taken:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the body was not taken", tc.name)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d", tc.name, resp.StatusCode)
		}
		next(tc.name + " after the whole body")

		// The response comes while the client still sends.
		answered := make(chan struct{})
		sent := make(chan struct{})
		resp = post(tc.path, tc.request, func(w io.Writer) {
			defer close(sent)
			w.Write(chunk)
			<-answered
			for range 2 {
				w.Write(chunk)
			}
		})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s while sending: status %d %s", tc.name, resp.StatusCode, b)
		}
		close(answered)
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the rest of the body could not be sent", tc.name)
		}
	}
}

// TestSessionMaximums: sessions are bounded as execs are: their limits,
// event window, each run's timeout and output limit (invalid_argument
// naming the field), and their number per sandbox (resource_exhausted).
func TestSessionMaximums(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{Max: server.Maximums{
		Sessions: 1, Timeout: time.Minute, OutputLimit: 1 << 20, EventWindow: 1 << 20,
		Limits: execbox.Limits{CPUTime: 10 * time.Second},
	}})
	sb := e.sandbox()
	wantError(t, "a session over the maximum CPU time", e.json("POST", sb+"sessions", `{"kind":"bash","limits":{"cpu_time_ms":60000}}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "limits.cpu_time_ms")
	wantError(t, "a session over the maximum event window", e.json("POST", sb+"sessions", `{"kind":"pty","event_window":2097152}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "event_window")
	wantError(t, "a session whose grace period is over the maximum timeout", e.json("POST", sb+"sessions", `{"kind":"bash","grace_period_ms":3600000}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "grace_period_ms")
	wantError(t, "an exec whose grace period is over the maximum timeout", e.json("POST", sb+"exec", `{"command":["true"],"grace_period_ms":3600000}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "grace_period_ms")
	s := e.session(sb, `{"kind":"bash"}`)
	wantError(t, "a run over the maximum timeout", e.json("POST", s+"run", `{"code":"true","timeout_ms":3600000}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "timeout_ms")
	wantError(t, "a run over the maximum output limit", e.json("POST", s+"run", `{"code":"true","output_limit":2097152}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "output_limit")
	if out := runResponse(t, e.json("POST", s+"run", `{"code":"echo ok"}`)); string(out.Result.Stdout.Bytes()) != "ok\n" {
		t.Errorf("a run within the maximums: %+v", out)
	}
	wantError(t, "a second session over the maximum of 1", e.json("POST", sb+"sessions", `{"kind":"bash"}`),
		http.StatusTooManyRequests, api.CodeResourceExhausted)
}
