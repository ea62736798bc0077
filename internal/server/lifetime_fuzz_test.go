package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/local"
)

// fuzzServer is a server of the local runtime whose reaper never comes
// during a fuzz run, with a client.
func fuzzServer(f *testing.F, l server.Lifetimes) (*httptest.Server, *client.Client) {
	l.ReapInterval, l.ProbeInterval = time.Hour, -1
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Lifetimes: l})
	if err != nil {
		f.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	f.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	c, _ := client.New(ts.URL)
	return ts, c
}

// fuzzCall sends a request and decodes its body into out when it
// succeeds, or returns the error response.
func fuzzCall(t *testing.T, method, u, body string, out any) (int, *api.Error) {
	req, _ := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if method == "POST" {
		req.Header.Set("Content-Type", api.ContentJSON)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var er api.ErrorResponse
		if json.Unmarshal(b, &er) != nil || er.Error == nil {
			t.Fatalf("%s %s: %d %q is not an error response", method, u, resp.StatusCode, b)
		}
		return resp.StatusCode, er.Error
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, u, resp.StatusCode, b, err)
	}
	return resp.StatusCode, nil
}

// FuzzLabelFilter: GET /v1/sandboxes?label=A&label=B either refuses a
// filter that is not KEY=VALUE, naming label, or lists exactly the
// sandboxes having both labels.
func FuzzLabelFilter(f *testing.F) {
	ts, c := fuzzServer(f, server.Lifetimes{})
	all := []map[string]string{{"env": "dev", "team": "a"}, {"env": "dev", "q": "x=y", "": "e"}, nil}
	var ids []string
	for _, labels := range all {
		sb, err := c.Create(f.Context(), execbox.Spec{Labels: labels}, client.CreateOptions{})
		if err != nil {
			f.Fatal(err)
		}
		ids = append(ids, sb.ID())
	}
	for _, seed := range [][2]string{{"env=dev", "team=a"}, {"q=x=y", "env=dev"}, {"team", "=e"}, {"env=", "=="}, {"\x00=\xff", "env=dev"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		var l api.SandboxList
		status, e := fuzzCall(t, "GET", ts.URL+"/v1/sandboxes?"+url.Values{"label": {a, b}}.Encode(), "", &l)
		bad := func(s string) bool { k, _, ok := strings.Cut(s, "="); return !ok || k == "" }
		if bad(a) || bad(b) {
			if status != 400 || e.Code != api.CodeInvalidArgument || len(e.Fields) == 0 || e.Fields[0].Field != "label" {
				t.Fatalf("labels %q, %q: %d %+v, want invalid_argument naming label", a, b, status, e)
			}
			return
		}
		if e != nil {
			t.Fatalf("labels %q, %q: %+v", a, b, e)
		}
		var want []string
		for i, labels := range all {
			has := func(s string) bool { k, v, _ := strings.Cut(s, "="); got, ok := labels[k]; return ok && got == v }
			if has(a) && has(b) {
				want = append(want, ids[i])
			}
		}
		var got []string
		for _, info := range l.Sandboxes {
			got = append(got, info.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("labels %q, %q: %v, want %v", a, b, got, want)
		}
	})
}

// FuzzSandboxTimeout: POST /v1/sandboxes/{id}/timeout either sets an end
// in the future within the maximum lifetime from creation, or is
// refused as invalid_argument; never anything else.
func FuzzSandboxTimeout(f *testing.F) {
	const max = time.Hour
	ts, c := fuzzServer(f, server.Lifetimes{MaxTimeout: max})
	sb, err := c.Create(f.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		f.Fatal(err)
	}
	created := sb.Info().CreatedAt
	for _, seed := range []string{`{"timeout_ms": 60000}`, `{"timeout_ms": 0.5}`, `{"timeout_ms": -1}`, `{"timeout_ms": 1e400}`, `{"timeout_ms": 3600001}`, `{}`, `[]`, `{"timeout_ms": "1"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before := time.Now()
		var info api.SandboxInfo
		status, e := fuzzCall(t, "POST", ts.URL+"/v1/sandboxes/"+sb.ID()+"/timeout", body, &info)
		if e != nil {
			if status != 400 && status != 413 || e.Code != api.CodeInvalidArgument && e.Code != api.CodeResourceExhausted {
				t.Fatalf("body %q: %d %+v, want invalid_argument", body, status, e)
			}
			return
		}
		if info.ExpiresAt.Before(before) || info.ExpiresAt.Sub(created) > max {
			t.Fatalf("body %q: expires at %v, created %v, set at %v: not within the maximum of %v", body, info.ExpiresAt, created, before, max)
		}
	})
}
