package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
	"github.com/execbox/execbox/internal/agent/session"
)

var _ execbox.SessionOpener = (*Sandbox)(nil)

// sessionTable holds a sandbox's open sessions.
type sessionTable struct {
	mu   sync.Mutex
	next uint64
	list []*agentSession // oldest first
}

// agentSession is a session of the sandbox: closing it also forgets its
// process.
type agentSession struct {
	*session.Session
	sb     *Sandbox
	procID string
}

// Close implements execbox.Session.
func (a *agentSession) Close() error {
	err := a.Session.Close()
	a.sb.forget(a.procID)
	t := &a.sb.sessions
	t.mu.Lock()
	t.list = slices.DeleteFunc(t.list, func(x *agentSession) bool { return x == a })
	t.mu.Unlock()
	return err
}

// OpenSession implements execbox.SessionOpener. The interpreter is one of
// the sandbox's processes, started exactly as Exec starts a command (the
// same environment policy, limits checks, user and tree kill), with no
// timeout of its own.
func (s *Sandbox) OpenSession(ctx context.Context, opts execbox.SessionOptions) (execbox.Session, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	cmd := opts.Command
	if len(cmd) == 0 {
		switch opts.Kind {
		case execbox.SessionBash:
			cmd = []string{"bash"}
		case execbox.SessionPython:
			cmd = []string{"python3"}
		default:
			cmd = execbox.DefaultPTYCommand
		}
	}
	req := execbox.ExecRequest{
		Command:   cmd,
		Dir:       opts.Dir,
		Env:       opts.Env,
		EnvPolicy: opts.EnvPolicy,
		EnvAllow:  opts.EnvAllow,
		Limits:    opts.Limits,
		User:      opts.User,
	}
	t := &s.sessions
	t.mu.Lock()
	t.next++
	id := "s" + strconv.FormatUint(t.next, 10)
	t.mu.Unlock()

	var procID string
	sess, err := session.Open(ctx, session.Config{
		ID:   id,
		Kind: opts.Kind,
		Start: func(adjust func(*proc.Options) error) (*proc.Process, error) {
			p, err := s.startWith(req, false, adjust)
			if err != nil {
				return nil, err
			}
			procID = p.id
			return p.Process, nil
		},
		Rows:        uint16(opts.Rows),
		Cols:        uint16(opts.Cols),
		EventWindow: opts.EventWindow,
		FlowControl: opts.FlowControl,
		GracePeriod: opts.GracePeriod,
		Logger:      s.log,
	})
	if err != nil {
		if procID != "" {
			s.forget(procID)
		}
		return nil, err
	}
	a := &agentSession{Session: sess, sb: s, procID: procID}
	t.mu.Lock()
	t.list = append(t.list, a)
	t.mu.Unlock()
	// Close may have run meanwhile and missed it.
	if err := s.checkOpen(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Sessions implements execbox.SessionOpener.
func (s *Sandbox) Sessions(ctx context.Context) ([]execbox.SessionInfo, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]execbox.SessionInfo, 0, len(t.list))
	for _, a := range t.list {
		out = append(out, a.Info())
	}
	return out, nil
}

// Session implements execbox.SessionOpener.
func (s *Sandbox) Session(ctx context.Context, id string) (execbox.Session, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.list {
		if a.ID() == id {
			return a, nil
		}
	}
	return nil, &execbox.FieldError{Field: "session", Problem: fmt.Sprintf("no session %q", id), Kind: execbox.ErrNotFound}
}

// closeSessions closes every session, in wg's goroutines (Sandbox.Close).
func (s *Sandbox) closeSessions(wg *sync.WaitGroup) {
	t := &s.sessions
	t.mu.Lock()
	list := slices.Clone(t.list)
	t.mu.Unlock()
	for _, a := range list {
		wg.Go(func() { a.Close() })
	}
}
