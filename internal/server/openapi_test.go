package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/metrics"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// TestOpenAPIDocument checks the document itself: OpenAPI 3.1, valid,
// its error codes those of package api, each error status with the code
// that has it.
func TestOpenAPIDocument(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi: %q, want 3.1.0", doc.OpenAPI)
	}
	if want := fmt.Sprintf("%s.%d", strings.TrimPrefix(api.Protocol, "v"), api.Revision); doc.Info.Version != want {
		t.Errorf("info.version of api/openapi.yaml is %q, want %q (protocol %s, revision %d): document the revision's additions, then set it",
			doc.Info.Version, want, api.Protocol, api.Revision)
	}
	var codes []string
	for status := 100; status < 600; status++ {
		if c := api.CodeForStatus(status); !slices.Contains(codes, string(c)) {
			codes = append(codes, string(c))
		}
	}
	var enum []string
	for _, v := range doc.Components.Schemas["Code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	slices.Sort(codes)
	slices.Sort(enum)
	if !slices.Equal(codes, enum) {
		t.Errorf("components.schemas.Code.enum = %q, want the codes of package api %q", enum, codes)
	}
	var gitOps []string
	for _, v := range doc.Components.Schemas["GitOp"].Value.Enum {
		gitOps = append(gitOps, v.(string))
	}
	if !slices.Equal(gitOps, git.Ops) {
		t.Errorf("components.schemas.GitOp.enum = %q, want git.Ops %q", gitOps, git.Ops)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !declaresRequestID(item.Parameters) && !declaresRequestID(op.Parameters) {
				t.Errorf("%s %s: no X-Request-ID parameter (add $ref: \"#/components/parameters/requestID\" to the path's parameters)", method, path)
			}
			for status, resp := range op.Responses.Map() {
				if h := resp.Value.Headers[api.RequestIDHeader]; h == nil || h.Ref != "#/components/headers/RequestID" {
					t.Errorf("%s %s: response %s does not declare the header X-Request-ID (every response carries it: $ref \"#/components/headers/RequestID\")", method, path, status)
				}
				if status < "400" {
					continue
				}
				code := errorCode(resp)
				if code == "" {
					if path == "/v1/health" || strings.HasSuffix(path, "/health") {
						continue // a Health body
					}
					if path == "/metrics" && status == "500" {
						continue // promhttp's own text/plain answer
					}
					t.Errorf("%s %s: response %s has no error code (use a components.responses error)", method, path, status)
					continue
				}
				want := fmt.Sprint(api.Code(code).Status())
				switch status {
				case "413":
					want = status // resource_exhausted, for a body over the limit
				case "415":
					want = status // invalid_argument naming Content-Type
				}
				if status != want {
					t.Errorf("%s %s: response %s has code %s, whose status is %s", method, path, status, code, want)
				}
			}
		}
	}
}

// declaresRequestID reports whether params include the X-Request-ID
// header parameter.
func declaresRequestID(params openapi3.Parameters) bool {
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && p.Value.Name == api.RequestIDHeader {
			return true
		}
	}
	return false
}

// errorCode returns the code an error response's schema pins, or "".
func errorCode(resp *openapi3.ResponseRef) string {
	ct := resp.Value.Content.Get(api.ContentJSON)
	if ct == nil || ct.Schema == nil {
		return ""
	}
	for _, s := range ct.Schema.Value.AllOf {
		if e := s.Value.Properties["error"]; e != nil {
			if c := e.Value.Properties["code"]; c != nil && c.Value.Const != nil {
				return c.Value.Const.(string)
			}
		}
	}
	return ""
}

// docOperations returns "METHOD /path" of every operation of the document.
func docOperations(t *testing.T) []string {
	doc, _ := loadOpenAPI(t)
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}

// TestOpenAPIRoutes checks that the routes a server and an agent register
// are the operations of the document, each way.
func TestOpenAPIRoutes(t *testing.T) {
	ops := docOperations(t)
	// With Metrics, as execbox serve has it, so that GET /metrics is served.
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Metrics: metrics.New([]string{"local"}).Handler()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var routes []string
	for _, p := range server.RoutePatterns(srv) {
		if p == "/" { // the catch-all: unsupported
			continue
		}
		for _, p := range docPatterns(p) {
			routes = append(routes, p)
			if !slices.Contains(ops, p) {
				t.Errorf("the server's route %q is not in api/openapi.yaml: add its operation (method, path, parameters, request body, responses)", p)
			}
		}
	}
	for _, op := range ops {
		if !slices.Contains(routes, op) {
			t.Errorf("api/openapi.yaml has %q, which the server does not register", op)
		}
	}

	sb := localSandbox(t)
	agent := server.NewSandboxHandler(sb, "local", server.Options{})
	for _, p := range server.RoutePatterns(agent) {
		if p == "/" {
			continue
		}
		method, path, _ := strings.Cut(p, " ")
		if path != "/v1/version" && path != "/v1/openapi.yaml" {
			path = "/v1/sandboxes/{sandbox}/" + strings.TrimPrefix(path, "/v1/")
		}
		for _, dp := range docPatterns(method + " " + path) {
			if !slices.Contains(ops, dp) {
				t.Errorf("the agent's route %q (%s on a server) is not in api/openapi.yaml", p, dp)
			}
		}
	}
}

// docPatterns returns the operations of the document that a registered
// pattern serves: POST git/{op} is one path per operation of git.Ops
// (each with its own body and answer), and the templated path, which
// answers any other op unsupported.
func docPatterns(pattern string) []string {
	prefix, ok := strings.CutSuffix(pattern, "/git/{op}")
	if !ok {
		return []string{pattern}
	}
	out := []string{pattern}
	for _, op := range git.Ops {
		out = append(out, prefix+"/git/"+op)
	}
	return out
}

// localSandbox returns a sandbox of the local runtime, closed at the end.
func localSandbox(t *testing.T) execbox.Sandbox {
	t.Helper()
	sb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// TestOpenAPIServed checks GET /v1/openapi.yaml: the document, without
// a token, from a server and from an agent.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, server.Options{Token: "secret"})
	agent := httptest.NewServer(newAPICheck(t, true).wrap(server.NewSandboxHandler(localSandbox(t), "local", server.Options{Token: "secret"})))
	defer agent.Close()
	for _, base := range []string{e.ts.URL, agent.URL} {
		resp, err := http.Get(base + "/v1/openapi.yaml")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.ContentYAML || !bytes.Equal(b, api.OpenAPI) {
			t.Errorf("GET %s/v1/openapi.yaml: %d %s, %d bytes; want 200 %s and api.OpenAPI", base, resp.StatusCode, resp.Header.Get("Content-Type"), len(b), api.ContentYAML)
		}
	}
}

// TestOpenAPIEveryRoute sends real requests to every route of a server on
// the local runtime; the check of newEnv validates each, and every
// operation of the document must have answered a success.
func TestOpenAPIEveryRoute(t *testing.T) {
	testutil.Require(t, needBash, gitDep)
	m := metrics.New([]string{"local"})
	e, _, _ := imageEnv(t, server.Options{AllowHostPaths: true, Metrics: m.Handler(), Observer: m.Observer(),
		Lifetimes: server.Lifetimes{Timeout: time.Hour, MaxTimeout: 2 * time.Hour, IdleTimeout: time.Hour}})
	ok := func(r response, status int, what string) response {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		return r
	}
	ok(e.json("GET", "/v1/version", ""), 200, "version")
	ok(e.json("GET", "/v1/openapi.yaml", ""), 200, "openapi")
	ok(e.json("GET", "/v1/health", ""), 200, "health")
	ok(e.json("GET", "/v1/runtimes", ""), 200, "runtimes")
	sb := e.sandbox()
	id := strings.TrimSuffix(strings.TrimPrefix(sb, "/v1/sandboxes/"), "/")
	ok(e.json("GET", "/v1/sandboxes", "", "X-Request-ID", "client chosen id"), 200, "list")
	ok(e.json("GET", "/v1/sandboxes?label=a=b&label=c=d", ""), 200, "list with label filters")
	ok(e.json("GET", "/v1/sandboxes/"+id, ""), 200, "get")
	ok(e.json("POST", sb+"timeout", `{"timeout_ms":60000}`), 200, "timeout")
	var tok api.SandboxToken
	json.Unmarshal(ok(e.json("POST", sb+"tokens", `{"ttl_ms":60000}`), 201, "create token").body, &tok)
	ok(e.json("POST", sb+"tokens", ""), 201, "create token without a body")
	ok(e.json("GET", sb+"tokens", ""), 200, "tokens")
	ok(e.json("DELETE", sb+"tokens/"+tok.ID, ""), 204, "revoke token")
	ok(e.json("GET", "/metrics", ""), 200, "metrics")
	ok(e.json("GET", sb+"health", ""), 200, "sandbox health")
	ok(e.json("GET", sb+"info", ""), 200, "info")

	// Exec: JSON, multipart stdin, a multipart result, cancel.
	ok(e.json("POST", sb+"exec?id=e1", `{"command":["echo","hi"],"env":{"A":"b"},"timeout_ms":5000}`), 200, "exec")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="request"`}, "Content-Type": {api.ContentJSON}})
	io.WriteString(w, `{"command":["cat"]}`)
	w, _ = mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="stdin"`}, "Content-Type": {api.ContentBytes}})
	io.WriteString(w, "streamed\n")
	mw.Close()
	ok(e.do("POST", sb+"exec", &body, "Content-Type", "multipart/mixed; boundary="+mw.Boundary()), 200, "exec multipart")
	big := `{"shell":"head -c 200000 /dev/zero; echo err >&2"}`
	r := ok(e.json("POST", sb+"exec", big, "Accept", "multipart/mixed, application/json"), 200, "exec multipart result")
	if !strings.HasPrefix(r.header.Get("Content-Type"), "multipart/mixed") {
		t.Errorf("exec with 200 kB of output, Accept multipart: Content-Type %q", r.header.Get("Content-Type"))
	}
	ok(e.json("POST", sb+"exec", `{"shell":"head -c 1000 /dev/zero; exit 3","output_limit":100}`), 200, "exec past output_limit")
	ok(e.json("POST", sb+"exec", `{"command":["sleep","10"],"timeout_ms":10}`), 200, "exec timed out")
	ok(e.json("POST", sb+"exec/e9/cancel", ""), 204, "cancel exec")

	// Processes.
	var st api.ProcessStatus
	json.Unmarshal(ok(e.json("POST", sb+"processes", `{"command":["cat"]}`), 201, "start").body, &st)
	p := sb + "processes/" + st.ID + "/"
	ok(e.do("POST", p+"stdin", strings.NewReader("in\n"), "Content-Type", api.ContentBytes), 200, "stdin")
	ok(e.json("POST", p+"stdin/close", ""), 204, "stdin close")
	ok(e.json("GET", p+"wait", ""), 200, "wait")
	ok(e.json("GET", sb+"processes/"+st.ID, ""), 200, "poll")
	ok(e.json("GET", p+"events", ""), 200, "events")
	ok(e.json("GET", p+"events?from=1", "", "Accept", api.ContentSSE), 200, "events SSE")
	json.Unmarshal(ok(e.json("POST", sb+"processes", `{"command":["sleep","30"]}`), 201, "start").body, &st)
	p = sb + "processes/" + st.ID + "/"
	ok(e.json("POST", p+"signal", `{"signal":"SIGCONT"}`), 204, "signal")
	ok(e.json("POST", p+"kill", ""), 200, "kill")
	ok(e.json("GET", sb+"processes/"+st.ID, "", "Accept", "multipart/mixed"), 200, "poll ended")

	// Sessions: bash runs, a PTY's write, resize and events.
	s := e.session(sb, `{"kind":"bash"}`)
	ok(e.json("POST", s+"run?id=r1", `{"code":"x=1; echo $x"}`), 200, "run")
	ok(e.json("POST", s+"run/r9/cancel", ""), 204, "cancel run")
	ok(e.json("GET", sb+"sessions", ""), 200, "sessions")
	ok(e.json("GET", strings.TrimSuffix(s, "/"), ""), 200, "session")
	ok(e.json("DELETE", strings.TrimSuffix(s, "/"), ""), 200, "close session")
	pty := e.session(sb, `{"kind":"pty","command":["sh"],"rows":24,"cols":80}`)
	ok(e.json("POST", pty+"resize", `{"rows":40,"cols":120}`), 204, "resize")
	ok(e.do("POST", pty+"write", strings.NewReader("exit 3\n"), "Content-Type", api.ContentBytes), 200, "write")
	ok(e.json("GET", pty+"wait", ""), 200, "session wait")
	ok(e.json("GET", pty+"events", ""), 200, "session events")

	// Files.
	ok(e.do("PUT", sb+"files?path=d/f.txt&mode=0600&parents=true", strings.NewReader("content"), "Content-Type", api.ContentBytes), 204, "write file")
	ok(e.json("GET", sb+"files?path=d/f.txt&limit=100", ""), 200, "read file")
	ok(e.json("GET", sb+"files?path=d", "", "Accept", api.ContentJSON), 200, "read directory")
	ok(e.json("GET", sb+"files/stat?path=d/f.txt", ""), 200, "stat")
	ok(e.json("GET", sb+"files/list?path=d", ""), 200, "list")
	ok(e.json("POST", sb+"files/mkdir?path=e/f&parents=true&mode=0700", ""), 204, "mkdir")
	tarball := ok(e.json("GET", sb+"files/tar?path=d", ""), 200, "download").body
	ok(e.do("PUT", sb+"files/tar?path=copy", bytes.NewReader(tarball), "Content-Type", api.ContentTar), 204, "upload")
	ok(e.json("GET", sb+"snapshot", ""), 200, "snapshot")
	ok(e.json("DELETE", sb+"files?path=e&recursive=true", ""), 204, "remove")

	// Images, from an OCI layout on this machine.
	dir := imageLayout(t, map[string]v1.Image{"a": smallImage(t, "a")})
	ok(e.json("POST", "/v1/images/pull", `{"ref":"`+dir+`:a"}`), 200, "pull")
	ok(e.json("GET", "/v1/images", ""), 200, "images")
	ok(e.json("POST", "/v1/images/remove", `{"ref":"`+dir+`:a"}`), 200, "remove image")
	ok(e.json("POST", "/v1/images/prune", `{"max_size":0}`), 200, "prune")
	// Commit needs a sandbox made from an image on a runtime that can
	// save one (runtimes/sandbox): the local runtime answers unsupported.
	ok(e.json("POST", sb+"commit", `{"dest":"`+t.TempDir()+`/out:x"}`), 501, "commit")

	// Code: JSON, and a multipart stdin with a multipart result.
	ok(e.json("POST", sb+"code", `{"language":"bash","source":"echo \"$1\"; cat","args":["a"],"stdin":{"text":"in"},"env":{"A":"b"},"files":[{"path":"lib.sh","text":"x=1","mode":"0600"}],"timeout_ms":5000}`), 200, "code")
	body.Reset()
	mw = multipart.NewWriter(&body)
	w, _ = mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="request"`}, "Content-Type": {api.ContentJSON}})
	io.WriteString(w, `{"language":"sh","source":"head -c 200000 /dev/zero; cat; echo err >&2"}`)
	w, _ = mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="stdin"`}, "Content-Type": {api.ContentBytes}})
	io.WriteString(w, "streamed\n")
	mw.Close()
	r = ok(e.do("POST", sb+"code", &body, "Content-Type", "multipart/mixed; boundary="+mw.Boundary(), "Accept", "multipart/mixed, application/json"), 200, "code multipart")
	if !strings.HasPrefix(r.header.Get("Content-Type"), "multipart/mixed") {
		t.Errorf("code with 200 kB of output, Accept multipart: Content-Type %q", r.header.Get("Content-Type"))
	}

	// Git: every operation, against a bare repository on this machine.
	origin := originRepo(t, t.TempDir(), "origin.git")
	gitOK := func(op, body string) {
		t.Helper()
		if rep := gitReply(t, op, ok(e.json("POST", sb+"git/"+op, body), 200, "git "+op)); rep.Error != nil {
			t.Fatalf("git %s: %+v", op, rep.Error)
		}
	}
	gitOK("init", `{"path":"fresh","branch":"trunk"}`)
	gitOK("clone", `{"url":"`+origin+`","path":"app"}`)
	ok(e.do("PUT", sb+"files?path=app/new.txt", strings.NewReader("new\n"), "Content-Type", api.ContentBytes), 204, "write file")
	gitOK("status", `{"dir":"app","untracked":"all"}`)
	gitOK("add", `{"dir":"app","paths":["new.txt"]}`)
	gitOK("commit", `{"dir":"app","message":"add new",`+identity+`}`)
	gitOK("diff", `{"dir":"app","from":"HEAD~1","to":"HEAD","context":1}`)
	gitOK("log", `{"dir":"app","max_count":5}`)
	gitOK("push", `{"dir":"app","remote":"origin","refspecs":["main"]}`)
	gitOK("fetch", `{"dir":"app","prune":true}`)
	gitOK("pull", `{"dir":"app","ff_only":true,`+identity+`}`)
	gitOK("checkout", `{"dir":"app","branch":"topic","create":true}`)
	gitOK("worktree_add", `{"dir":"app","path":"wt","branch":"feature"}`)
	gitOK("worktrees", `{"dir":"app"}`)
	gitOK("worktree_remove", `{"dir":"app","path":"wt"}`)
	if rep := gitReply(t, "commit", e.json("POST", sb+"git/commit", `{"dir":"app","message":"again",`+identity+`}`)); rep.Error == nil || rep.Error.Kind != "nothing_to_commit" {
		t.Errorf("a commit with nothing to commit: %+v, want a git failure of kind nothing_to_commit", rep)
	}
	ok(e.json("POST", sb+"git/rebase", `{}`), 501, "an unknown git operation")

	// Warm pools: define, list, take, delete.
	ok(e.json("POST", "/v1/pools", `{"name":"warm","runtime":"local","spec":{"env":{"A":"b"},"labels":{"t":"u"}},"initial":2,"min_idle":1,"max":3,"fallback":"create"}`), 201, "define a pool")
	e.waitPool("warm", "filled", idleIs(2))
	ok(e.json("GET", "/v1/pools", ""), 200, "pools")
	var taken api.SandboxInfo
	json.Unmarshal(ok(e.json("POST", "/v1/sandboxes", `{"pool":"warm","env":{"B":"c"},"labels":{"k":"v"},"timeout_ms":60000}`), 201, "take from a pool").body, &taken)
	if taken.Pool != "warm" {
		t.Errorf("a sandbox taken from pool warm says pool %q", taken.Pool)
	}
	ok(e.json("GET", "/v1/pools/warm", ""), 200, "pool")
	ok(e.json("DELETE", "/v1/pools/warm", ""), 204, "delete a pool")

	ok(e.json("DELETE", "/v1/sandboxes/"+id, ""), 204, "delete")
	ok(e.json("GET", "/v1/sandboxes/"+id, ""), 200, "get an ended sandbox")
	ok(e.json("POST", "/v1/sandboxes?runtime=local", `{"env":{"A":"b"},"labels":{"k":"v"},"timeout_ms":60000,"idle_timeout_ms":30000,"assets":[{"path":"a.txt","content":{"text":"x"},"mode":"0644"}],"setup":[{"shell":"true"}]}`), 201, "create with a spec")

	for _, op := range e.api.uncovered() {
		if op == "POST /v1/sandboxes/{sandbox}/commit" || op == "POST /v1/sandboxes/{sandbox}/git/{op}" {
			continue // above; the second has no success (unknown operations)
		}
		t.Errorf("%s: no request of this test got a success; exercise it", op)
	}
}

// TestOpenAPIAgent validates an agent's requests and responses against
// the document (its routes are the server's per-sandbox ones at /v1/).
func TestOpenAPIAgent(t *testing.T) {
	testutil.Require(t, gitDep)
	check := newAPICheck(t, true)
	ts := httptest.NewServer(check.wrap(server.NewSandboxHandler(localSandbox(t), "local", server.Options{})))
	defer ts.Close()
	e := &env{t: t, ts: ts, api: check}
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/version", "", 200},
		{"GET", "/v1/health", "", 200},
		{"GET", "/v1/info", "", 200},
		{"POST", "/v1/exec", `{"shell":"echo hi"}`, 200},
		{"POST", "/v1/files/mkdir?path=d", "", 204},
		{"GET", "/v1/files/list", "", 200},
		{"GET", "/v1/processes/nope", "", 404},
		{"POST", "/v1/code", `{"language":"sh","source":"echo hi"}`, 200},
		{"POST", "/v1/git/init", `{"path":"repo"}`, 200},
		{"POST", "/v1/git/status", `{"dir":"repo"}`, 200},
		{"POST", "/v1/git/log", `{"dir":"nowhere"}`, 200}, // a git failure: data
		{"POST", "/v1/git/rebase", `{}`, 501},
		{"GET", "/v1/sandboxes", "", 501}, // a server's route
	} {
		if r := e.json(c.method, c.path, c.body); r.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.status, r.body, c.status)
		}
	}
}

// TestOpenAPICheckFails checks the check: an undocumented route, field or
// status, or a request the document refuses but the server accepts, each
// fail it, naming what is missing.
func TestOpenAPICheckFails(t *testing.T) {
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentJSON)
			w.Header().Set(api.RequestIDHeader, "0123456789abcdef")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	version := fmt.Sprintf(`{"protocol":"v1","revision":%d,"role":"server"`, api.Revision)
	for _, c := range []struct {
		name, method, path, body string
		h                        http.HandlerFunc
		want                     string
	}{
		{"route", "GET", "/v1/new", "", answer(200, `{}`), "GET /v1/new (status 200) is not in api/openapi.yaml"},
		{"field", "GET", "/v1/version", "", answer(200, version+`,"uptime_ms":5}`), `additional properties 'uptime_ms' not allowed`},
		{"status", "GET", "/v1/version", "", answer(202, version+`}`), "status is not supported"},
		{"code", "GET", "/v1/runtimes", "", answer(404, `{"error":{"code":"not_found","message":"x"}}`), "status is not supported"},
		{"wrong-code", "GET", "/v1/sandboxes/x", "", answer(404, `{"error":{"code":"closed","message":"x"}}`), "closed"},
		{"type-array", "GET", "/v1/sandboxes/x/sessions", "", answer(200, `{"sessions":5}`), "at /sessions: value must be one of array, null"},
		{"null-allowed", "GET", "/v1/sandboxes/x/sessions", "", answer(200, `{"sessions":null}`), ""},
		{"query", "GET", "/v1/sandboxes?owner=alice", "", answer(200, `{"sandboxes":[]}`), `query parameter "owner" is not declared`},
		{"query-declared", "GET", "/v1/sandboxes?label=a=b&label=c=d", "", answer(200, `{"sandboxes":[]}`), ""},
		{"request-id", "GET", "/v1/version", "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentJSON)
			io.WriteString(w, version+`}`)
		}, `response header "X-Request-ID" missing`},
		{"token-secret", "GET", "/v1/sandboxes/x/tokens", "", answer(200, `{"tokens":[{"id":"tok-1","token":"s","sandbox":"x","created_at":"2026-01-02T15:04:05Z"}]}`), "at /tokens/0"},
		{"git-reply", "POST", "/v1/sandboxes/x/git/status", `{}`, answer(200, `{"hash":"abc"}`), "GitStatusReply"},
		{"git-request", "POST", "/v1/sandboxes/x/git/status", `{"url":"u"}`, answer(200, `{"error":{"op":"status","message":"m","result":{"reason":"","exit_code":0,"stdout":{"total":0},"stderr":{"total":0},"duration_ms":0,"user_time_ms":0,"system_time_ms":0,"peak_memory":0}}}`),
			"the server accepted (status 200) a request api/openapi.yaml refuses"},
		{"pool-field", "GET", "/v1/pools", "", answer(200, `{"pools":[{"name":"p","runtime":"local","spec":{},"fallback":"create","idle":0,"creating":0,"handed_out":0,"hits":0,"misses":0,"tenant":"x"}]}`), "at /pools/0"},
		{"request", "POST", "/v1/sandboxes/x/processes", `{"command":["true"],"niceness":5}`, answer(201, `{"id":"p1","running":true}`),
			"the server accepted (status 201) a request api/openapi.yaml refuses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordTB{TB: t}
			ts := httptest.NewServer(newAPICheck(rec, false).wrap(c.h))
			defer ts.Close()
			e := &env{t: t, ts: ts}
			e.json(c.method, c.path, c.body)
			ts.Close()
			got := rec.text()
			if c.want == "" && got != "" || !strings.Contains(got, c.want) {
				t.Errorf("the check said %q; want it to say %q", got, c.want)
			}
		})
	}
}

// recordTB records what a check reports instead of failing the test.
type recordTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordTB) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}
