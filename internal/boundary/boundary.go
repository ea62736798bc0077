// Package boundary is the host's side of a sandbox whose agent runs
// inside a boundary (namespaces, a container) and is reached over the
// protocol: a client.Sandbox whose errors say what happened to the
// boundary. A call that Close cut short fails with ErrClosed, not with
// the broken connection it saw; a call whose boundary died on its own
// fails with the cause the runtime finds (Config.Lost).
package boundary

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/git"
)

// Sandbox is the agent's sandbox as the runtime hands it out; a runtime
// embeds it and adds its Close, which calls MarkClosed first.
type Sandbox struct {
	*client.Sandbox
	id        string
	lost      func(error) error
	closed    chan struct{}
	closeOnce sync.Once
}

// New wraps the agent's sandbox csb of the sandbox id. lost, if not nil,
// is asked about every error that reaches the caller while the sandbox
// is open and may return a better one (the boundary died, and why).
func New(id string, csb *client.Sandbox, lost func(error) error) *Sandbox {
	return &Sandbox{Sandbox: csb, id: id, lost: lost, closed: make(chan struct{})}
}

// MarkClosed records that Close has begun: from now on calls cut short
// fail with ErrClosed. It is idempotent.
func (s *Sandbox) MarkClosed() { s.closeOnce.Do(func() { close(s.closed) }) }

// Closed reports whether MarkClosed was called.
func (s *Sandbox) Closed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Err maps the error of a call: ErrClosed if Close cut it short, the
// runtime's cause if the boundary is lost, else err.
func (s *Sandbox) Err(err error) error {
	if err == nil || errors.Is(err, execbox.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if s.Closed() {
		return fmt.Errorf("sandbox %s: %w", s.id, execbox.ErrClosed)
	}
	if s.lost != nil && errors.Is(err, execbox.ErrUnavailable) {
		return s.lost(err)
	}
	return err
}

var (
	_ execbox.Sandbox       = (*Sandbox)(nil)
	_ execbox.SessionOpener = (*Sandbox)(nil)
)

// Exec implements execbox.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, req execbox.ExecRequest) (execbox.Result, error) {
	res, err := s.Sandbox.Exec(ctx, req)
	return res, s.Err(err)
}

// Start implements execbox.Sandbox.
func (s *Sandbox) Start(ctx context.Context, req execbox.ExecRequest) (execbox.Process, error) {
	p, err := s.Sandbox.Start(ctx, req)
	if err != nil {
		return nil, s.Err(err)
	}
	return &process{Process: p, s: s}, nil
}

// Attach returns the agent's started process id without asking it; see
// client.Sandbox.Attach.
func (s *Sandbox) Attach(id string) execbox.Process {
	return &process{Process: s.Sandbox.Attach(id), s: s}
}

// OpenSession implements execbox.SessionOpener: a session of the agent,
// reached over the protocol.
func (s *Sandbox) OpenSession(ctx context.Context, opts execbox.SessionOptions) (execbox.Session, error) {
	sess, err := s.Sandbox.OpenSession(ctx, opts)
	if err != nil {
		return nil, s.Err(err)
	}
	return &session{Session: sess, s: s}, nil
}

// Sessions implements execbox.SessionOpener.
func (s *Sandbox) Sessions(ctx context.Context) ([]execbox.SessionInfo, error) {
	list, err := s.Sandbox.Sessions(ctx)
	return list, s.Err(err)
}

// Session implements execbox.SessionOpener.
func (s *Sandbox) Session(ctx context.Context, id string) (execbox.Session, error) {
	sess, err := s.Sandbox.Session(ctx, id)
	if err != nil {
		return nil, s.Err(err)
	}
	return &session{Session: sess, s: s}, nil
}

// Snapshot implements execbox.Sandbox.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer) error {
	return s.Err(s.Sandbox.Snapshot(ctx, w))
}

// RunCode implements code.Delegate: the agent runs the whole program.
func (s *Sandbox) RunCode(ctx context.Context, req code.Request) (code.Result, error) {
	res, err := s.Sandbox.RunCode(ctx, req)
	return res, s.Err(err)
}

// RunGit implements git.Delegate: the agent runs the whole operation. A
// git command that failed (an unreachable remote is ErrUnavailable too)
// says nothing of the boundary.
func (s *Sandbox) RunGit(ctx context.Context, call git.Call) (git.Reply, error) {
	rep, err := s.Sandbox.RunGit(ctx, call)
	if _, ok := err.(*git.Error); ok {
		return rep, err
	}
	return rep, s.Err(err)
}

// process maps the errors of a process whose sandbox was closed under it
// to ErrClosed.
type process struct {
	execbox.Process
	s *Sandbox
}

func (p *process) Wait(ctx context.Context) (execbox.Result, error) {
	res, err := p.Process.Wait(ctx)
	return res, p.s.Err(err)
}

func (p *process) Poll(ctx context.Context) (*execbox.Result, error) {
	res, err := p.Process.Poll(ctx)
	return res, p.s.Err(err)
}

func (p *process) Kill(ctx context.Context) error {
	if err := p.Process.Kill(ctx); err != nil && !p.s.Closed() {
		return err
	}
	return nil
}

func (p *process) Signal(ctx context.Context, sig execbox.Signal) error {
	return p.s.Err(p.Process.Signal(ctx, sig))
}

func (p *process) WriteStdin(ctx context.Context, b []byte) (int, error) {
	n, err := p.Process.WriteStdin(ctx, b)
	return n, p.s.Err(err)
}

func (p *process) CloseStdin(ctx context.Context) error {
	return p.s.Err(p.Process.CloseStdin(ctx))
}

// session maps the errors of a session whose sandbox was closed under it
// to ErrClosed.
type session struct {
	execbox.Session
	s *Sandbox
}

func (c *session) Run(ctx context.Context, req execbox.SessionRequest) (execbox.SessionResult, error) {
	res, err := c.Session.Run(ctx, req)
	return res, c.s.Err(err)
}

func (c *session) Write(ctx context.Context, p []byte) (int, error) {
	n, err := c.Session.Write(ctx, p)
	return n, c.s.Err(err)
}

func (c *session) Resize(ctx context.Context, rows, cols int) error {
	return c.s.Err(c.Session.Resize(ctx, rows, cols))
}

func (c *session) Events(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	return func(yield func(execbox.Event, error) bool) {
		for ev, err := range c.Session.Events(ctx, from) {
			if !yield(ev, c.s.Err(err)) {
				return
			}
		}
	}
}

func (c *session) Wait(ctx context.Context) (execbox.Result, error) {
	res, err := c.Session.Wait(ctx)
	return res, c.s.Err(err)
}
