package server_test

import (
	"net/http"
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
)

// TestMemoryBudgetGitAndLists: a red team's finding after the budget
// landed. A git operation's answer (a diff's patch up to its
// output_limit) and a directory's listing (100k entries: 50 MB of JSON)
// were held for callers that never read, outside the budget. Both are
// counted now: more than a tenant may ever hold is refused, naming the
// field that set it.
func TestMemoryBudgetGitAndLists(t *testing.T) {
	e := newEnv(t, server.Options{Keys: tenantKeys(), Max: server.Maximums{ResultMemory: 2 << 20}}) // alice's share: 1 MiB
	id := e.create(aliceKey)
	sb := "/v1/sandboxes/" + id + "/"
	r := e.json("POST", sb+"exec", `{"shell":"mkdir big && cd big && seq 20000 | sed s/^/a-file-with-a-long-name-/ | xargs touch","output_limit":4096}`, bearer(aliceKey)...)
	if r.status != http.StatusOK {
		t.Fatalf("exec: %d %s", r.status, r.body)
	}
	r = e.json("GET", sb+"files/list?path=big", "", bearer(aliceKey)...)
	wantError(t, "a listing larger than alice's share", r, http.StatusBadRequest, api.CodeInvalidArgument, "path")
	r = e.json("GET", sb+"files/list?path=.", "", bearer(aliceKey)...)
	if r.status != http.StatusOK {
		t.Errorf("a small listing: %d %s", r.status, r.body)
	}
	r = e.json("POST", sb+"git/status", `{"output_limit":1048576}`, bearer(aliceKey)...)
	wantError(t, "a git answer of up to twice 1 MiB", r, http.StatusBadRequest, api.CodeInvalidArgument, "output_limit")
}
