package server

import (
	"context"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// events streams a process's events from a sequence number:
// GET processes/{process}/events?from=N (see streamEvents).
func (s *sandbox) events(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) { s.streamEvents(w, r, p.Events) })
}

// streamEvents streams the events of a process or a PTY session from the
// sequence number in ?from=, as NDJSON (one api.Event per line) or, when
// the request accepts text/event-stream, as server-sent events (id: SEQ,
// event: KIND, data: the api.Event). Without from, an SSE reconnect
// resumes after its Last-Event-ID. Idle streams carry a blank line
// (NDJSON) or a comment (SSE) every Options.Heartbeat. The stream ends
// after the exit event; an error line (kind "error") ends it early.
func (s *sandbox) streamEvents(w http.ResponseWriter, r *http.Request, events func(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error]) {
	sse := strings.Contains(r.Header.Get("Accept"), api.ContentSSE)
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.fail(w, r, execbox.Invalid("from", "%q is not a sequence number", v))
			return
		}
		from = n
	} else if last := r.Header.Get("Last-Event-ID"); sse && last != "" {
		if n, err := strconv.ParseUint(last, 10, 64); err == nil {
			from = max(n, n+1) // the largest id stays: n+1 would wrap to 0 and replay all
		}
	}

	ct := api.ContentNDJSON
	if sse {
		ct = api.ContentSSE
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	// Writes come from this goroutine and the heartbeat's. The exit
	// event's Result is streamed into its line (jsonBody), not encoded
	// whole.
	var mu sync.Mutex
	send := func(ev api.Event, outs []streamed) bool {
		b, err := jsonBody(&ev, outs) // one line, ending with "\n"
		if err != nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if sse {
			head := "event: " + string(ev.Kind) + "\ndata: "
			if ev.Kind != api.EventError {
				head = "id: " + strconv.FormatUint(ev.Seq, 10) + "\n" + head
			}
			if _, err := io.WriteString(w, head); err != nil {
				return false
			}
		}
		if b.writeTo(w) != nil {
			return false
		}
		if sse {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	_ = rc.Flush()

	stop := make(chan struct{})
	var beats sync.WaitGroup
	beats.Go(func() {
		beat := []byte("\n")
		if sse {
			beat = []byte(": keep-alive\n\n")
		}
		t := time.NewTicker(s.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				_, _ = w.Write(beat)
				_ = rc.Flush()
				mu.Unlock()
			}
		}
	})
	defer beats.Wait()
	defer close(stop)

	ctx := r.Context()
	for ev, err := range events(ctx, from) {
		if err != nil {
			if ctx.Err() == nil {
				send(api.Event{Kind: api.EventError, Error: api.NewError(err)}, nil)
			}
			return
		}
		if !send(wireEvent(ev)) || ev.Kind == execbox.EventExit {
			return
		}
	}
}

// wireEvent returns ev for the wire without its Result's outputs, and
// those outputs, for send to stream.
func wireEvent(ev execbox.Event) (api.Event, []streamed) {
	if ev.Result == nil {
		return api.NewEvent(ev), nil
	}
	full := *ev.Result
	res := stripped(full)
	ev.Result = &res
	we := api.NewEvent(ev)
	return we, outputs(&we.Result.Stdout, &we.Result.Stderr, full.Stdout, full.Stderr)
}
