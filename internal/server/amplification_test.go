package server_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/server"
)

// Red-team findings against the HTTP server.

// A JSON body within the server's limit (MaxJSONBody, 8 MiB) is decoded
// twice (as generic values, then as the spec) and every element of an
// array is validated on its own, each problem becoming an error of its
// own in the response: a 1 MiB create request of empty setup commands
// makes the server allocate hundreds of MiB and answer with a 49 MB
// error message. Eight concurrent 8 MiB requests (about 60 MiB on the
// wire, with the token) took execbox serve past 22 GiB of RSS and the
// host's global OOM killer ended it.
func TestCreateErrorAmplification(t *testing.T) {
	e := newEnv(t, server.Options{})
	e.api.disable() // the OpenAPI check's own allocations would count
	n := (1 << 20) / 3
	body := "{\"setup\":[" + strings.Repeat("{},", n-1) + "{}]}"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp := e.do("POST", "/v1/sandboxes", bytes.NewReader([]byte(body)))
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte create request: status %d, a %d-byte answer, %d MiB allocated", len(body), resp.status, len(resp.body), alloc>>20)
	if len(resp.body) > len(body) {
		t.Errorf("the answer (%d bytes) is larger than the request (%d bytes)", len(resp.body), len(body))
	}
	if alloc > 64<<20 {
		t.Errorf("one %d-byte request allocated %d MiB on the server", len(body), alloc>>20)
	}
}
