package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

// TestValidationEveryProblem: a request with several problems gets
// them all in one answer, however they are found (decoding the wire,
// the request's own checks, the server's maximums, the lifetimes), each
// named by its wire field in the fields and in the message: timeout_ms,
// not the Go name timeout. Before, the first stage that failed hid the
// others, and the message said "timeout: must not be negative".
func TestValidationEveryProblem(t *testing.T) {
	testutil.Require(t, needBash)
	e := newEnv(t, server.Options{Max: server.Maximums{OutputLimit: 1 << 20, Timeout: time.Minute}})
	sb, _ := e.policySandbox(`{}`)
	s := e.session(sb, `{"kind":"bash"}`)
	for _, tc := range []struct {
		what, method, path, body string
		fields                   []string
	}{
		{"exec", "POST", sb + "exec",
			`{"command":[],"timeout_ms":1e30,"grace_period_ms":-1,"output_limit":99999999,"limits":{"memory":-1}}`,
			[]string{"command", "timeout_ms", "grace_period_ms", "output_limit", "limits.memory"}},
		{"start", "POST", sb + "processes",
			`{"command":["true"],"timeout_ms":-1,"output_limit":99999999,"event_window":-1}`,
			[]string{"timeout_ms", "output_limit", "event_window"}},
		{"create", "POST", "/v1/sandboxes",
			`{"timeout_ms":-1,"idle_timeout_ms":-1,"limits":{"memory":-1},"env":{"A=B":"x"}}`,
			[]string{"timeout_ms", "idle_timeout_ms", "limits.memory", "env.A=B"}},
		{"session run", "POST", s + "run",
			`{"code":"","timeout_ms":-1,"output_limit":99999999}`,
			[]string{"timeout_ms", "output_limit"}},
		{"session open", "POST", sb + "sessions",
			`{"kind":"bash","grace_period_ms":-1,"limits":{"pids":-1}}`,
			[]string{"grace_period_ms", "limits.pids"}},
	} {
		r := e.json(tc.method, tc.path, tc.body)
		er := wantError(t, tc.what, r, http.StatusBadRequest, api.CodeInvalidArgument, tc.fields...)
		if er == nil {
			continue
		}
		if len(er.Fields) != len(tc.fields) {
			t.Errorf("%s: fields %+v, want %q each once", tc.what, er.Fields, tc.fields)
		}
		for _, f := range []string{"timeout", "grace_period", "idle_timeout"} {
			if regexp.MustCompile(`(^|\n| )` + f + `:`).MatchString(er.Message) {
				t.Errorf("%s: the message names the Go field %q, not its wire name %s_ms: %q", tc.what, f, f, er.Message)
			}
		}
	}
}

// TestTooManyRequestsRetryAfter: a 429 says when to try again.
func TestTooManyRequestsRetryAfter(t *testing.T) {
	e := newEnv(t, server.Options{Max: server.Maximums{Processes: 1}})
	sb, _ := e.policySandbox(`{}`)
	r := e.json("POST", sb+"processes", `{"command":["sleep","5"]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	var st api.ProcessStatus
	_ = json.Unmarshal(r.body, &st)
	defer e.json("POST", sb+"processes/"+st.ID+"/kill", "")
	r = e.json("POST", sb+"exec", `{"command":["true"]}`)
	wantError(t, "an exec over max_processes", r, http.StatusTooManyRequests, api.CodeResourceExhausted)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("the 429's Retry-After: %q, want 1", got)
	}
}
