package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/local"
)

// FuzzEventsFrom: GET events?from=F of an ended process answers 400
// naming "from" when F is not a sequence number, else the events from F
// on, in order, as NDJSON or SSE (where Last-Event-ID applies only
// without from).
func FuzzEventsFrom(f *testing.F) {
	for _, s := range []string{"", "0", "1", "2", "3", "4", "99", "-1", "1.5", "+1", " 1", "0x1", "18446744073709551615", "18446744073709551616"} {
		f.Add(s, false, "")
		f.Add(s, true, "1")
	}
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{})
	if err != nil {
		f.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	f.Cleanup(func() { ts.Close(); srv.Close() })
	c, err := client.New(ts.URL)
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { sb.Close() })
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sh", "-c", "printf a; printf b >&2"}})
	if err != nil {
		f.Fatal(err)
	}
	res, err := p.Wait(ctx)
	if err != nil || !res.Success() {
		f.Fatalf("%v, %v", res, err)
	}
	var all []uint64
	for ev, err := range p.Events(ctx, 1) {
		if err != nil {
			f.Fatal(err)
		}
		all = append(all, ev.Seq)
	}
	last := all[len(all)-1]
	path := ts.URL + "/v1/sandboxes/" + sb.ID() + "/processes/" + p.ID() + "/events"

	f.Fuzz(func(t *testing.T, from string, sse bool, lastID string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		u := path
		if from != "" {
			u += "?" + url.Values{"from": {from}}.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sse {
			req.Header.Set("Accept", api.ContentSSE)
			if lastID != "" && !strings.ContainsFunc(lastID, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				req.Header.Set("Last-Event-ID", lastID)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, perr := strconv.ParseUint(from, 10, 64)
		if from != "" && perr != nil {
			var body struct{ Error api.Error }
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != http.StatusBadRequest || body.Error.Code != api.CodeInvalidArgument || len(body.Error.Fields) == 0 || body.Error.Fields[0].Field != "from" {
				t.Fatalf("from=%q: status %d, %+v; want 400 invalid_argument naming from", from, resp.StatusCode, body.Error)
			}
			return
		}
		want := n
		if from == "" && sse && req.Header.Get("Last-Event-ID") != "" {
			if id, err := strconv.ParseUint(lastID, 10, 64); err == nil {
				want = max(id, id+1) // resumes after it: the last possible id means nothing more
			}
		}
		seqs := readSeqs(t, resp, sse)
		if want > last {
			if len(seqs) != 0 {
				t.Fatalf("from=%q last-id=%q sse=%v: events %v after the exit %d", from, lastID, sse, seqs, last)
			}
			return
		}
		if len(seqs) == 0 || seqs[len(seqs)-1] != last {
			t.Fatalf("from=%q last-id=%q sse=%v: events %v, want through the exit %d", from, lastID, sse, seqs, last)
		}
		for i, s := range seqs {
			if s < want || (i > 0 && s <= seqs[i-1]) {
				t.Fatalf("from=%q last-id=%q sse=%v: events %v, want increasing from %d", from, lastID, sse, seqs, want)
			}
		}
	})
}

// readSeqs reads an event stream to its end and returns the sequence
// numbers of its events.
func readSeqs(t *testing.T, resp *http.Response, sse bool) []uint64 {
	t.Helper()
	var seqs []uint64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		if sse {
			var ok bool
			if line, ok = bytes.CutPrefix(line, []byte("data: ")); !ok {
				continue
			}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev api.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		if ev.Kind == api.EventError {
			t.Fatalf("error event %+v", ev.Error)
		}
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}
