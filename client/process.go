package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// maxReconnects bounds the reconnects of an event stream (and retries of
// Wait) in a row without progress.
const maxReconnects = 5

// process is a started process reached over the protocol.
type process struct {
	s    *Sandbox
	id   string
	path string // ".../processes/ID"
}

var _ execbox.Process = (*process)(nil)

func (s *Sandbox) process(id string) *process {
	return &process{s: s, id: id, path: s.prefix + "processes/" + url.PathEscape(id)}
}

func (p *process) ID() string { return p.id }

// Events implements execbox.Process. A stream that breaks before the exit
// event (a dropped connection, a restarted proxy) is reopened from the
// sequence number after the last event yielded, so no event is lost or
// repeated; after maxReconnects failures in a row the error is yielded.
func (p *process) Events(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	return p.s.events(ctx, p.path+"/events", from, "process", p.id)
}

// events follows the event stream at path (a process's or a session's)
// from seq from, reconnecting as Process.Events says. kind and id name
// the stream's owner in logs.
func (s *Sandbox) events(ctx context.Context, path string, from uint64, kind, id string) iter.Seq2[execbox.Event, error] {
	return func(yield func(execbox.Event, error) bool) {
		if err := s.checkOpen(); err != nil {
			yield(execbox.Event{}, err)
			return
		}
		next := from
		// got counts the output yielded, when it is all the output
		// before next (from the first event on), so that a dropped
		// event whose count the server could not know gets it here.
		got, counting := int64(0), from <= 1
		for failures := 0; ; {
			done, progressed, err := s.stream(ctx, path, next, func(ev execbox.Event) bool {
				next = ev.Seq + 1
				if ev.Kind == execbox.EventDropped {
					if ev.Dropped < 0 && counting {
						ev.Dropped = ev.Offset - got
					}
					got, counting = ev.Offset, true
				}
				got += int64(len(ev.Data))
				return yield(ev, nil)
			})
			if done {
				return
			}
			if progressed {
				failures = 0
			}
			var te *transportError
			if ctx.Err() != nil || !errors.As(err, &te) || failures >= maxReconnects {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(execbox.Event{}, err)
				return
			}
			s.c.log.Debug("event stream broke; reconnecting", "sandbox", s.info.ID, kind, id, "from", next, "error", err)
			if !backoff(ctx, failures) {
				yield(execbox.Event{}, ctx.Err())
				return
			}
			failures++
		}
	}
}

// stream reads one event stream from seq from, calling yield for each
// event. done means the iteration is over: the exit event was seen or
// yield asked to stop. Otherwise err says why the stream ended: a
// transportError for a broken stream (worth a reconnect), or the error a
// line of kind "error" carried.
func (s *Sandbox) stream(ctx context.Context, path string, from uint64, yield func(execbox.Event) bool) (done, progressed bool, err error) {
	q := url.Values{"from": {strconv.FormatUint(from, 10)}}
	resp, err := s.c.do(ctx, request{method: http.MethodGet, path: path, query: q, accept: api.ContentNDJSON})
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the stream ends after the exit event only
			}
			return false, progressed, &transportError{fmt.Errorf("event stream: %w", err)}
		}
		if ev.Kind == api.EventError {
			if ev.Error == nil { // else Err is nil: the caller would see an empty event and no error
				return false, progressed, &transportError{errors.New("event stream: an error line without its error")}
			}
			return false, progressed, ev.Error.Err()
		}
		if ev.Seq < from {
			continue // never yield an event twice, nor one before from
		}
		from = ev.Seq + 1
		progressed = true
		if !yield(ev.Event()) || ev.Kind == execbox.EventExit {
			return true, true, nil
		}
	}
}

func (p *process) WriteStdin(ctx context.Context, b []byte) (int, error) {
	if err := p.s.checkOpen(); err != nil {
		return 0, err
	}
	var out api.StdinResponse
	resp, err := p.s.c.do(ctx, request{method: http.MethodPost, path: p.path + "/stdin", body: bytes.NewReader(b), ctype: api.ContentBytes})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, &transportError{fmt.Errorf("stdin: decoding the response: %w", err)}
	}
	return int(out.Written), nil
}

func (p *process) CloseStdin(ctx context.Context) error {
	if err := p.s.checkOpen(); err != nil {
		return err
	}
	return p.s.c.doJSON(ctx, http.MethodPost, p.path+"/stdin/close", nil, nil, nil)
}

// pump copies r to the process's stdin, then closes it. It stops when r
// ends, the process ends or the sandbox is closed.
func (p *process) pump(r io.Reader) {
	ctx := p.s.ctx
	_, err := p.s.c.do(ctx, request{method: http.MethodPost, path: p.path + "/stdin", body: r, ctype: api.ContentBytes})
	if err == nil {
		err = p.s.c.doJSON(ctx, http.MethodPost, p.path+"/stdin/close", nil, nil, nil)
	}
	if err != nil && !errors.Is(err, execbox.ErrClosed) && ctx.Err() == nil {
		p.s.c.log.Debug("stdin copy failed", "sandbox", p.s.info.ID, "process", p.id, "error", err)
	}
}

func (p *process) Signal(ctx context.Context, sig execbox.Signal) error {
	if err := p.s.checkOpen(); err != nil {
		return err
	}
	return p.s.c.doJSON(ctx, http.MethodPost, p.path+"/signal", nil, api.SignalRequest{Signal: api.SignalValue(sig)}, nil)
}

func (p *process) Kill(ctx context.Context) error {
	if err := p.s.checkOpen(); err != nil {
		return err
	}
	return p.s.c.doJSON(ctx, http.MethodPost, p.path+"/kill", nil, nil, nil)
}

func (p *process) Poll(ctx context.Context) (*execbox.Result, error) {
	if err := p.s.checkOpen(); err != nil {
		return nil, err
	}
	var st api.ProcessStatus
	if err := p.s.c.doResult(ctx, request{method: http.MethodGet, path: p.path}, &st, statusOutputs(&st)); err != nil {
		return nil, err
	}
	if st.Result == nil {
		return nil, nil
	}
	res := st.Result.Result()
	return &res, nil
}

// Wait implements execbox.Process: a long poll, retried when the
// connection breaks. Cancelling ctx stops waiting, not the process.
func (p *process) Wait(ctx context.Context) (execbox.Result, error) {
	return p.s.wait(ctx, p.path+"/wait")
}

// wait long-polls the wait endpoint at path (a process's or a session's)
// for a Result, retrying when the connection breaks.
func (s *Sandbox) wait(ctx context.Context, path string) (execbox.Result, error) {
	for failures := 0; ; failures++ {
		if err := s.checkOpen(); err != nil {
			return execbox.Result{}, err
		}
		var out api.Result
		err := s.c.doResult(ctx, request{method: http.MethodGet, path: path}, &out, resultOutputs(&out))
		if err == nil {
			return out.Result(), nil
		}
		var te *transportError
		if ctx.Err() != nil {
			return execbox.Result{}, ctx.Err()
		}
		if !errors.As(err, &te) || failures >= maxReconnects || !backoff(ctx, failures) {
			return execbox.Result{}, err
		}
	}
}
