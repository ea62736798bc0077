package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

var (
	python3 = testutil.Command("python3")
	gcc     = testutil.Command("gcc")
)

func codeResponse(t *testing.T, what string, r response) api.CodeResponse {
	t.Helper()
	var out api.CodeResponse
	if r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil {
		t.Fatalf("%s: %d %s", what, r.status, r.body)
	}
	return out
}

// TestCodeEndpoint runs programs through POST code: a python program
// with files, args and stdin, a C compile error, and bad requests.
func TestCodeEndpoint(t *testing.T) {
	testutil.Require(t, python3)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()

	r := e.json("POST", sb+"code", `{"language":"py","source":"import sys, helper\nprint(helper.X, sys.argv[1], input())\nsys.exit(3)",
		"files":[{"path":"helper.py","text":"X = 41 + 1\n"}],"args":["a1"],"stdin":{"text":"in\n"}}`)
	out := codeResponse(t, "python", r)
	res := out.Result
	if res.Phase != "run" || res.Language != "python" || res.Reason != execbox.ReasonExited || res.ExitCode != 3 ||
		res.Stdout.Text != "42 a1 in\n" || res.Compile != nil || res.Toolchain == "" || len(res.Command) == 0 ||
		!strings.HasPrefix(res.Dir, code.RunsDir+"/") || out.Error != nil {
		t.Errorf("python: %s", r.body)
	}
	// The run directory is in the workspace, with the source and files.
	if r := e.json("GET", sb+"files?path="+res.Dir+"/helper.py", ""); r.status != http.StatusOK || string(r.body) != "X = 41 + 1\n" {
		t.Errorf("helper.py: %d %q", r.status, r.body)
	}

	// Large output, multipart accepted: raw parts, as for exec.
	r = e.json("POST", sb+"code", `{"language":"python","source":"print('x' * 200000)"}`, "Accept", api.ContentMultipart+", "+api.ContentJSON)
	if ct := r.header.Get("Content-Type"); r.status != http.StatusOK || !strings.HasPrefix(ct, api.ContentMultipart) || !strings.Contains(string(r.body), `name="stdout"`) {
		t.Errorf("multipart: %d %s", r.status, ct)
	}

	for _, c := range []struct {
		what, body string
		status     int
		code       api.Code
		fields     []string
	}{
		{"unknown field", `{"language":"python","source":"1","bogus":1}`, 400, api.CodeInvalidArgument, []string{"bogus"}},
		{"no source", `{"language":"cobol"}`, 400, api.CodeInvalidArgument, []string{"language", "source"}},
		{"bad file", `{"language":"python","source":"1","files":[{"path":"../x","text":"1"},{"path":"y","mode":"9"}]}`, 400, api.CodeInvalidArgument, []string{"files[0].path", "files[1].mode"}},
		{"negative timeouts", `{"language":"python","source":"1","timeout_ms":-1,"compile_timeout_ms":-1}`, 400, api.CodeInvalidArgument, []string{"compile_timeout_ms", "timeout_ms"}},
	} {
		wantError(t, c.what, e.json("POST", sb+"code", c.body), c.status, c.code, c.fields...)
	}
}

// TestCodeCompileError: a C program that does not compile ends in the
// compile phase, with the compiler's message.
func TestCodeCompileError(t *testing.T) {
	testutil.Require(t, gcc)
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	res := codeResponse(t, "c", e.json("POST", sb+"code", `{"language":"c","source":"int main(void) { return x; }"}`)).Result
	if res.Phase != "compile" || res.Compile == nil || res.ExitCode == 0 || !strings.Contains(res.Stderr.Text, "x") ||
		res.Compile.Stderr.Text != res.Stderr.Text || res.Toolchain != "gcc" {
		t.Errorf("compile error: %+v", res)
	}
	res = codeResponse(t, "c ok", e.json("POST", sb+"code", `{"language":"c","source":"#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }"}`)).Result
	if res.Phase != "run" || res.Compile == nil || res.Compile.Reason != execbox.ReasonExited || res.Stdout.Text != "hi\n" {
		t.Errorf("c: %+v", res)
	}
}

// TestCodeMaximums: the server's maximums bound a run's timeouts, output
// limit and limits, and the language's defaults are lowered to them.
func TestCodeMaximums(t *testing.T) {
	testutil.Require(t, python3)
	e := newEnv(t, server.Options{Max: server.Maximums{Timeout: 5 * time.Second, OutputLimit: 1000, Limits: execbox.Limits{CPUTime: 3 * time.Second}}})
	sb := e.sandbox()
	wantError(t, "over", e.json("POST", sb+"code", `{"language":"python","source":"1","timeout_ms":6000,"compile_timeout_ms":6000,"output_limit":2000,"limits":{"cpu_time_ms":4000}}`),
		400, api.CodeInvalidArgument, "compile_timeout_ms", "limits.cpu_time_ms", "output_limit", "timeout_ms")
	res := codeResponse(t, "bounded", e.json("POST", sb+"code", `{"language":"python","source":"print('y' * 5000)"}`)).Result
	if res.Stdout.Total != 5001 || len(res.Stdout.Text) != 1000 || res.Limits == nil || res.Limits.CPUTimeMS != 3000 {
		t.Errorf("bounded: total %d kept %d limits %+v", res.Stdout.Total, len(res.Stdout.Text), res.Limits)
	}
}

// TestCodeRemoteSameResult: code.Run over the remote runtime (one POST
// code) gives what code.Run gives in process for the same request.
func TestCodeRemoteSameResult(t *testing.T) {
	testutil.Require(t, python3, gcc)
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Token: "t", Logger: testutil.Logger(t)})
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
	rsb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rsb.Close() })
	if _, ok := rsb.(code.Delegate); !ok {
		t.Fatalf("%T is not a code.Delegate", rsb)
	}
	lsb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lsb.Close() })

	reqs := []code.Request{
		{Language: code.Python, Source: "import sys, m\nprint(m.f(), sys.argv[1:], input())\nprint('err', file=sys.stderr)\nsys.exit(2)",
			Files: []code.File{{Path: "m.py", Content: []byte("def f(): return 7\n")}}, Args: []string{"x", "y"}, Env: map[string]string{"A": "1"}},
		{Language: code.C, Source: "int main(void) { return x; }"},
		{Language: code.C, Source: "#include <stdio.h>\nint main(int c, char **v) { printf(\"%s\\n\", v[1]); return 5; }", Args: []string{"arg"}, Limits: execbox.Limits{CPUTime: 2 * time.Second}},
	}
	for i, req := range reqs {
		req.Stdin = strings.NewReader("line\n")
		want, werr := code.Run(t.Context(), lsb, req)
		req.Stdin = strings.NewReader("line\n")
		got, gerr := code.Run(t.Context(), rsb, req)
		if werr != nil || gerr != nil {
			t.Fatalf("request %d: in process %v, remote %v", i, werr, gerr)
		}
		if a, b := comparable(want, lsb.Workspace()), comparable(got, rsb.Workspace()); !reflect.DeepEqual(a, b) {
			t.Errorf("request %d:\n in process %+v\n remote     %+v", i, a, b)
		}
	}
	// Errors keep their fields over the wire.
	_, err = code.Run(t.Context(), rsb, code.Request{Language: "cobol", Source: "x"})
	if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "cobol") {
		t.Errorf("cobol: %v", err)
	}
}

// comparable is r without what differs between two runs: times, run
// directories and workspaces (and the paths holding them).
func comparable(r code.Result, workspace string) code.Result {
	norm := func(res *execbox.Result) {
		res.Duration, res.UserTime, res.SystemTime, res.PeakMemory = 0, 0, 0, 0
	}
	norm(&r.Result)
	if r.Compile != nil {
		c := *r.Compile
		norm(&c)
		r.Compile = &c
	}
	dir := r.Dir
	r.Dir = ""
	cmd := make([]string, len(r.Command))
	for i, a := range r.Command {
		cmd[i] = strings.ReplaceAll(strings.ReplaceAll(a, dir, "RUN"), workspace, "WS")
	}
	r.Command = cmd
	return r
}
