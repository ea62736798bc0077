package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

var _ execbox.SessionOpener = (*Sandbox)(nil)

// OpenSession implements execbox.SessionOpener. ctx bounds the start
// only; the session lives on the server until Close, its interpreter
// exits, or the sandbox is closed.
func (s *Sandbox) OpenSession(ctx context.Context, opts execbox.SessionOptions) (execbox.Session, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var info api.SessionInfo
	if err := s.c.doJSON(ctx, http.MethodPost, s.prefix+"sessions", nil, api.NewSessionOptions(opts), &info); err != nil {
		return nil, err
	}
	return s.session(info, opts.GracePeriod), nil
}

// Sessions implements execbox.SessionOpener.
func (s *Sandbox) Sessions(ctx context.Context) ([]execbox.SessionInfo, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var l api.SessionList
	if err := s.c.doJSON(ctx, http.MethodGet, s.prefix+"sessions", nil, nil, &l); err != nil {
		return nil, err
	}
	out := make([]execbox.SessionInfo, len(l.Sessions))
	for i, info := range l.Sessions {
		out[i] = info.SessionInfo()
	}
	return out, nil
}

// Session implements execbox.SessionOpener: it attaches to an open
// session, made by this or another client.
func (s *Sandbox) Session(ctx context.Context, id string) (execbox.Session, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var info api.SessionInfo
	if err := s.c.doJSON(ctx, http.MethodGet, s.prefix+"sessions/"+url.PathEscape(id), nil, nil, &info); err != nil {
		return nil, err
	}
	return s.session(info, 0), nil
}

// session is a session reached over the protocol. It implements
// execbox.Session as the in-process one does; the interpreter and its
// state live on the server, so several session values (one per
// OpenSession or Session call) may share one. After Close through one
// value the server forgets the session: the others' calls then fail with
// ErrNotFound, and their Close does nothing.
type session struct {
	s     *Sandbox
	info  api.SessionInfo
	path  string        // ".../sessions/ID"
	grace time.Duration // the session's grace period, if known (else 0)

	mu     sync.Mutex
	closed bool
	final  *execbox.Result // the interpreter's Result, from Close

	closeOnce sync.Once
	closeErr  error
}

var _ execbox.Session = (*session)(nil)

func (s *Sandbox) session(info api.SessionInfo, grace time.Duration) *session {
	return &session{s: s, info: info, path: s.prefix + "sessions/" + url.PathEscape(info.ID), grace: grace}
}

func (c *session) ID() string                { return c.info.ID }
func (c *session) Kind() execbox.SessionKind { return c.info.Kind }

// check returns ErrClosed once this session value or its sandbox was
// closed.
func (c *session) check() error {
	if err := c.s.checkOpen(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("session %s is closed: %w", c.info.ID, execbox.ErrClosed)
	}
	return nil
}

// Run implements execbox.Session. req.Stdin, if set, is streamed to the
// server as the command reads it (a multipart request). If ctx ends
// first, Run asks the server to cancel the run, which interrupts the
// command as in process (or abandons a run still waiting for its turn),
// and returns the partial Result with ctx's error.
func (c *session) Run(ctx context.Context, req execbox.SessionRequest) (execbox.SessionResult, error) {
	if err := c.check(); err != nil {
		return execbox.SessionResult{}, err
	}
	if err := req.Validate(); err != nil {
		return execbox.SessionResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return execbox.SessionResult{}, err
	}
	id := newExecID()
	hreq := request{method: http.MethodPost, path: c.path + "/run", query: url.Values{"id": {id}}}
	stop, err := c.s.streamedBody(&hreq, api.NewSessionRequest(req), req.Stdin)
	if err != nil {
		return execbox.SessionResult{}, err
	}
	defer stop()
	// After a cancel the interpreter gets SIGINT; a command that does not
	// stop is killed after the grace period, and the session after
	// another (in bash).
	grace := c.grace
	if grace == 0 {
		grace = execbox.DefaultGracePeriod
	}
	return cancellable(ctx, c.s, hreq, c.path+"/run/"+id+"/cancel", 2*grace+cancelWait, c.sendRun)
}

// sendRun sends a run request and decodes its response.
func (c *session) sendRun(ctx context.Context, hreq request) (execbox.SessionResult, error) {
	var out api.RunResponse
	if err := c.s.c.doResult(ctx, hreq, &out, func() (*api.Output, *api.Output) { return &out.Result.Stdout, &out.Result.Stderr }); err != nil {
		return execbox.SessionResult{}, err
	}
	return out.Result.SessionResult(), out.Error.Err()
}

// Write implements execbox.Session.
func (c *session) Write(ctx context.Context, p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	resp, err := c.s.c.do(ctx, request{method: http.MethodPost, path: c.path + "/write", body: bytes.NewReader(p), ctype: api.ContentBytes})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out api.WriteResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, &transportError{fmt.Errorf("write: decoding the response: %w", err)}
	}
	return int(out.Written), nil
}

// Resize implements execbox.Session.
func (c *session) Resize(ctx context.Context, rows, cols int) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.s.c.doJSON(ctx, http.MethodPost, c.path+"/resize", nil, api.ResizeRequest{Rows: rows, Cols: cols}, nil)
}

// Events implements execbox.Session, reconnecting as Process.Events
// does.
func (c *session) Events(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	if err := c.check(); err != nil {
		return func(yield func(execbox.Event, error) bool) { yield(execbox.Event{}, err) }
	}
	return c.s.events(ctx, c.path+"/events", from, "session", c.info.ID)
}

// Wait implements execbox.Session: a long poll, retried when the
// connection breaks. After Close it returns the Result Close received.
func (c *session) Wait(ctx context.Context) (execbox.Result, error) {
	c.mu.Lock()
	final := c.final
	c.mu.Unlock()
	if final != nil {
		return *final, nil
	}
	return c.s.wait(ctx, c.path+"/wait")
}

// Close implements execbox.Session: it returns once the interpreter and
// everything it started are gone. Closing a session that is already
// closed (through another session value, or with its sandbox) does
// nothing. It is idempotent.
func (c *session) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		if c.s.checkOpen() != nil {
			return // the sandbox's Close closed it
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out api.Result
		err := c.s.c.doResult(ctx, request{method: http.MethodDelete, path: c.path}, &out, resultOutputs(&out))
		switch {
		case err == nil:
			res := out.Result()
			c.mu.Lock()
			c.final = &res
			c.mu.Unlock()
		case errors.Is(err, execbox.ErrNotFound) || errors.Is(err, execbox.ErrClosed):
			err = nil // closed already
		}
		c.closeErr = err
	})
	return c.closeErr
}
