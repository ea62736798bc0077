package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
)

// eventsTransport serves a sandbox, a process and, on the first events
// request, body as its NDJSON event stream; later ones get not_found, so
// that a broken stream ends at once instead of reconnecting.
type eventsTransport struct {
	body   []byte
	served bool
}

func (e *eventsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	status, ct, body := http.StatusOK, "application/json", []byte(`{"id":"sb","workspace":"/ws"}`)
	switch {
	case strings.HasSuffix(r.URL.Path, "/events"):
		if e.served {
			status, body = http.StatusNotFound, []byte(`{"error":{"code":"not_found","message":"gone"}}`)
		} else {
			e.served, ct, body = true, "application/x-ndjson", e.body
		}
	case strings.Contains(r.URL.Path, "/processes/"):
		body = []byte(`{"id":"p","running":true}`)
	}
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: status, Header: http.Header{"Content-Type": {ct}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: r,
	}, nil
}

// FuzzEvents: whatever the event stream, Events never panics, ends, never
// yields an event before from or twice (sequence numbers strictly
// increase), yields nothing after the exit event and ends with an error
// unless it saw one.
func FuzzEvents(f *testing.F) {
	f.Add([]byte(`{"seq":1,"kind":"stdout","text":"hi\n"}`+"\n\n"+`{"seq":2,"kind":"stderr","data":"/w=="}`+"\n"+`{"seq":3,"kind":"exit","result":{"exit_code":0,"reason":"exited"}}`+"\n"), uint64(1))
	f.Add([]byte(`{"seq":5,"kind":"stdout","text":"a"}`+"\n"+`{"seq":3,"kind":"stdout","text":"b"}`+"\n"+`{"seq":5,"kind":"exit"}`), uint64(1))
	f.Add([]byte(`{"seq":1,"kind":"stdout"}`+"\n"+`{"kind":"error","error":{"code":"resource_exhausted","message":"window"}}`), uint64(0))
	f.Add([]byte(`{"seq":2,"kind":"stdout","text":"x"}{"seq":`), uint64(3))
	f.Add([]byte(`not json`), uint64(1))
	f.Fuzz(func(t *testing.T, body []byte, from uint64) {
		c, err := client.New("http://execbox.test", client.WithTransport(&eventsTransport{body: body}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sb, err := c.Sandbox(ctx, "sb")
		if err != nil {
			t.Fatal(err)
		}
		p, err := sb.Process(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		var last uint64
		var seen, exited, failed bool
		for ev, err := range p.Events(ctx, from) {
			if exited || failed {
				t.Fatalf("stream %q: a yield after the end: %+v, %v", body, ev, err)
			}
			if err != nil {
				failed = true
				continue
			}
			if ev.Seq < from || (seen && ev.Seq <= last) {
				t.Fatalf("stream %q from %d: event %d after %d", body, from, ev.Seq, last)
			}
			seen, last = true, ev.Seq
			exited = ev.Kind == execbox.EventExit
		}
		if !exited && !failed {
			t.Fatalf("stream %q: ended without an exit event or an error", body)
		}
		if ctx.Err() != nil {
			t.Fatalf("stream %q: not ended in 10s", body)
		}
	})
}
