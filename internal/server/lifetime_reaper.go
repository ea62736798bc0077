package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// probeTimeout bounds one liveness check, and one listing of sessions
// for the idle timeout: a boundary that does not answer within it is
// left for the next round, not declared lost.
const probeTimeout = 10 * time.Second

// reaper is a Server's goroutine that ends sandboxes whose lifetime or
// idle timeout ran out or whose boundary is lost, with what it starts:
// liveness checks and the closes of the sandboxes it ended. Server.Close
// stops it and waits for all of them.
type reaper struct {
	ctx  context.Context // ends at Server.Close
	stop context.CancelFunc
	done chan struct{} // closed when the goroutine has returned
	// work counts checks and closes under way. Add is called with
	// Server.mu held and the Server not closed, so that Close's Wait,
	// after it marked the Server closed, sees every Add.
	work sync.WaitGroup
}

// lifespan is what a create request resolved of its sandbox's lifetimes.
type lifespan struct{ timeout, idle time.Duration }

// lifespan resolves the lifetimes spec asks within the server's bounds,
// and takes them out of spec: the server enforces them, and the
// runtime, which cannot, refuses them.
func (s *Server) lifespan(spec *execbox.Spec) (lifespan, error) {
	timeout, idle, err := s.opts.Lifetimes.resolve(spec)
	spec.Timeout, spec.IdleTimeout = 0, 0
	return lifespan{timeout, idle}, err
}

// startLife gives the new sandbox sb its life, from now. Every sandbox
// the Server serves needs one (whatever made it: a create, a pool).
func (s *Server) startLife(sb *sandbox, ls lifespan) {
	sb.life = newLife(sb.info.CreatedAt, ls.timeout, ls.idle)
	sb.life.check = func() <-chan struct{} { return s.probe(sb) }
}

// startReaper starts the reaper; New calls it last.
func (s *Server) startReaper() {
	r := &s.reaper
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.done = make(chan struct{})
	every := s.opts.Lifetimes.ReapInterval
	if every <= 0 {
		every = DefaultReapInterval
	}
	probeEvery := s.opts.Lifetimes.ProbeInterval
	if probeEvery == 0 {
		probeEvery = DefaultProbeInterval
	}
	go s.reap(every, probeEvery)
}

// stopReaper stops the reaper and waits for it, its checks and its
// closes. The Server is marked closed first, so nothing new starts.
func (s *Server) stopReaper() {
	s.reaper.stop()
	<-s.reaper.done
	s.reaper.work.Wait()
}

func (s *Server) reap(every, probeEvery time.Duration) {
	defer close(s.reaper.done)
	ctx := s.reaper.ctx
	t := time.NewTicker(every)
	defer t.Stop()
	nextProbe := time.Now().Add(probeEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, sb := range s.served() {
				if reason := sb.due(ctx, now); reason != "" {
					s.end(sb, reason, "")
				}
			}
			if probeEvery > 0 && !now.Before(nextProbe) {
				for _, sb := range s.served() {
					s.probe(sb)
				}
				nextProbe = now.Add(probeEvery)
			}
		}
	}
}

// served lists the sandboxes the server holds.
func (s *Server) served() []*sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		out = append(out, sb)
	}
	return out
}

// due says whether s's lifetime or idle timeout has run out at now. A
// running process or an open session is activity: it moves the idle
// deadline on.
func (s *sandbox) due(ctx context.Context, now time.Time) api.EndReason {
	l := s.life
	if l == nil {
		return "" // not started by startLife: a bug, but no reason to crash
	}
	if e := l.expires.Load(); e != 0 && now.UnixNano() >= e {
		return api.EndTimeout
	}
	if l.idle <= 0 || now.UnixNano()-l.active.Load() < int64(l.idle) {
		return ""
	}
	if s.busy() || s.sessionsOpen(ctx) {
		l.active.Store(now.UnixNano())
		return ""
	}
	return api.EndIdle
}

// busy reports whether a process or exec of s is running.
func (s *sandbox) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running > 0
}

// sessionsOpen reports whether s has a session whose interpreter lives,
// or may have: a listing that fails leaves the sandbox be (the liveness
// check decides whether its boundary is lost).
func (s *sandbox) sessionsOpen(ctx context.Context) bool {
	so, ok := s.sb.(execbox.SessionOpener)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	list, err := so.Sessions(ctx)
	if err != nil {
		return true
	}
	for _, si := range list {
		if !si.Exited {
			return true
		}
	}
	return false
}

// end stops serving sb, if the server still serves it, keeps its last
// state for reason (detail: why, for people; empty: the reason's own
// words), and closes it in the background: Close waits for it.
func (s *Server) end(sb *sandbox, reason api.EndReason, detail string) {
	id := sb.info.ID
	s.mu.Lock()
	if s.closed || s.sandboxes[id] != sb {
		s.mu.Unlock()
		return // deleted meanwhile, or Close closes it
	}
	delete(s.sandboxes, id)
	info := s.forget(sb, reason, detail)
	s.reaper.work.Add(1)
	s.mu.Unlock()
	if sb.life != nil {
		sb.life.setEnded(endedError(info)) // after s.mu: probe holds life.mu, then s.mu
	}
	log := sb.log.Info
	if reason == api.EndFailed {
		log = sb.log.Warn
	}
	log("ending", "reason", reason, "detail", info.EndDetail)
	go func() {
		defer s.reaper.work.Done()
		err := sb.sb.Close()
		sb.pooled.release()
		s.restart.release(sb.info.ID)
		s.mu.Lock()
		s.live--
		s.mu.Unlock()
		if err != nil {
			sb.log.Error("close", "reason", reason, "error", err)
		}
		s.observeClosed(sb.runtime, string(reason))
	}()
}

// probe checks, in the background, that sb's boundary is alive: a check
// failing with ErrUnavailable marks sb failed, with the cause, and closes
// it. One check runs at a time per sandbox.
//
// The returned channel closes when the check is done (at once when none
// can run); a check under way is joined, not repeated.
func (s *Server) probe(sb *sandbox) <-chan struct{} {
	l := sb.life
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.probing != nil {
		return l.probing
	}
	done := make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(done)
		return done
	}
	s.reaper.work.Add(1)
	s.mu.Unlock()
	l.probing = done
	go func() {
		defer s.reaper.work.Done()
		if err := alive(s.reaper.ctx, sb.sb); unavailable(err) {
			s.end(sb, api.EndFailed, "its boundary is lost: "+err.Error())
		}
		l.mu.Lock()
		l.probing = nil
		l.mu.Unlock()
		close(done)
	}()
	return done
}

// alive makes a cheap call through sb's boundary: it lists sb's sessions
// (which a runtime with an agent asks the agent), or stats its workspace.
func alive(ctx context.Context, sb execbox.Sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if so, ok := sb.(execbox.SessionOpener); ok {
		_, err := so.Sessions(ctx)
		return err
	}
	_, err := sb.Files().Stat(ctx, ".")
	return err
}

// unavailable reports whether err is what a call through a lost
// boundary fails with: ErrUnavailable, not a closed sandbox or an ended
// context.
func unavailable(err error) bool {
	return errors.Is(err, execbox.ErrUnavailable) && !errors.Is(err, execbox.ErrClosed) && !isContextErr(err)
}
