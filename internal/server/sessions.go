package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Sessions: the endpoints under B sessions, over the sandbox's
// execbox.SessionOpener. A sandbox without one answers unsupported. The
// sandbox keeps its sessions by ID; the handlers keep nothing.

// opener returns the sandbox's SessionOpener, or an ErrUnsupported error.
func (s *sandbox) opener() (execbox.SessionOpener, error) {
	so, ok := s.sb.(execbox.SessionOpener)
	if !ok {
		// As execbox.OpenSession says it in process.
		return nil, fmt.Errorf("sandbox %s: sessions: %w", s.info.ID, execbox.ErrUnsupported)
	}
	return so, nil
}

// withSession wraps the endpoints of one session.
func (s *sandbox) withSession(w http.ResponseWriter, r *http.Request, fn func(sess execbox.Session)) {
	so, err := s.opener()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sess, err := so.Session(r.Context(), r.PathValue("session"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fn(sess)
}

// openSession starts a session: POST sessions, body api.SessionOptions.
// The request's context bounds the start only.
func (s *sandbox) openSession(w http.ResponseWriter, r *http.Request) {
	so, err := s.opener()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var wire api.SessionOptions
	if err := readJSON(r, s.opts.MaxJSONBody, &wire, true); err != nil {
		s.fail(w, r, err)
		return
	}
	opts, err := wire.SessionOptions()
	opts.Env = s.lateEnv(opts.Env)
	err = errors.Join(err, opts.Validate(), s.opts.Max.checkSession(&opts))
	if err == nil {
		err = s.checkSessions(r, so)
	}
	if err == nil && s.opts.Policy != nil {
		err = s.allowSessionOpen(r, &opts)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sess, err := so.OpenSession(r.Context(), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info := api.SessionInfo{ID: sess.ID(), Kind: sess.Kind()}
	if list, err := so.Sessions(r.Context()); err == nil {
		for _, i := range list {
			if i.ID == sess.ID() {
				info = api.NewSessionInfo(i)
			}
		}
	}
	s.log.Debug("session opened", "session", sess.ID(), "kind", sess.Kind())
	w.Header().Set("Location", r.URL.Path+"/"+sess.ID())
	writeJSON(w, http.StatusCreated, info)
}

// listSessions: GET sessions, oldest first.
func (s *sandbox) listSessions(w http.ResponseWriter, r *http.Request) {
	so, err := s.opener()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := so.Sessions(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.SessionList{Sessions: make([]api.SessionInfo, len(list))}
	for i, info := range list {
		out.Sessions[i] = api.NewSessionInfo(info)
	}
	writeJSON(w, http.StatusOK, out)
}

// getSession: GET sessions/{session}.
func (s *sandbox) getSession(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(sess execbox.Session) {
		so, _ := s.opener()
		list, err := so.Sessions(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, info := range list {
			if info.ID == sess.ID() {
				writeJSON(w, http.StatusOK, api.NewSessionInfo(info))
				return
			}
		}
		// Closed between the two calls.
		s.fail(w, r, &execbox.FieldError{Field: "session", Problem: fmt.Sprintf("no session %q", sess.ID()), Kind: execbox.ErrNotFound})
	})
}

// closeSession: DELETE sessions/{session}. It answers once the
// interpreter and everything it started are gone, with the interpreter's
// Result.
func (s *sandbox) closeSession(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(sess execbox.Session) {
		if err := sess.Close(); err != nil {
			s.fail(w, r, err)
			return
		}
		// Close has ended the interpreter: Wait answers at once.
		res, err := sess.Wait(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.log.Debug("session closed", "session", sess.ID())
		writeResultResponse(w, r, res)
	})
}

// run runs one command or cell: POST sessions/{session}/run[?id=RUN].
// The body is the api.SessionRequest as JSON, or multipart/form-data with
// the request in a part named "request" and the command's stdin streamed
// in a part named "stdin", as for exec. The response comes when the
// command has ended. POST sessions/{session}/run/{run}/cancel, or the
// client going away, cancels it as a cancelled ctx does in process.
func (s *sandbox) run(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id != "" && !validID(id) {
		s.fail(w, r, execbox.Invalid("id", "%q is not a run ID (1-64 of A-Z a-z 0-9 . _ -)", id))
		return
	}
	s.withSession(w, r, func(sess execbox.Session) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		var wire api.SessionRequest
		in, err := s.readStreamed(w, r, cancel, &wire)
		defer in.drain(w)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		req, err := wire.SessionRequest()
		err = errors.Join(err, req.Validate(), s.opts.Max.checkRun(&req))
		if err == nil && in != nil {
			if req.Stdin != nil {
				err = execbox.Invalid("stdin", "given twice: in the request and as a part")
			}
			req.Stdin = in
		}
		if err == nil && s.opts.Policy != nil {
			err = s.allowRun(r, sess, &req)
		}
		var h *hold
		if err == nil {
			h, err = reserve(r, "a run's result", "output_limit", resultSize(req.OutputLimit))
		}
		defer h.release()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if id != "" {
			key := runKey(sess.ID(), id)
			if !s.addExec(key, cancel) {
				s.fail(w, r, execbox.Invalid("id", "run %q of session %s is already running", id, sess.ID()))
				return
			}
			defer s.removeExec(key)
		}
		res, err := sess.Run(ctx, req)
		h.shrink(int64(len(res.Stdout.Data) + len(res.Stderr.Data)))
		switch {
		case err != nil && res.Reason != "":
			// Cancelled, or the interpreter ended: what the command did,
			// and why it stopped.
			writeRunResponse(w, r, res, api.NewError(err))
		case err != nil:
			s.fail(w, r, err)
		default:
			writeRunResponse(w, r, res, nil)
		}
	})
}

// runKey is the key of a session's run among the sandbox's cancellable
// calls (exec IDs have no "/").
func runKey(session, run string) string { return "sessions/" + session + "/" + run }

// cancelRun: POST sessions/{session}/run/{run}/cancel. A cancel that
// comes before its run is remembered, as for exec.
func (s *sandbox) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	if !validID(id) {
		s.fail(w, r, execbox.Invalid("run", "%q is not a run ID (1-64 of A-Z a-z 0-9 . _ -)", id))
		return
	}
	if _, err := s.opener(); err != nil {
		s.fail(w, r, err)
		return
	}
	s.cancel(runKey(r.PathValue("session"), id))
	w.WriteHeader(http.StatusNoContent)
}

// write types the body into a PTY session's terminal:
// POST sessions/{session}/write.
func (s *sandbox) write(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(sess execbox.Session) {
		n, err := copyBody(r, sess.Write)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, api.WriteResponse{Written: n})
	})
}

// copyBody hands r's body to write a chunk at a time, and returns how
// many bytes write took.
func copyBody(r *http.Request, write func(ctx context.Context, p []byte) (int, error)) (int64, error) {
	buf := make([]byte, stdinChunk)
	var total int64
	for {
		n, rerr := r.Body.Read(buf)
		if n > 0 {
			m, err := write(r.Context(), buf[:n])
			total += int64(m)
			if err != nil {
				return total, fmt.Errorf("after %d bytes: %w", total, err)
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return total, fmt.Errorf("body: %w", rerr)
			}
			return total, nil
		}
	}
}

// resize: POST sessions/{session}/resize, body {"rows", "cols"}.
func (s *sandbox) resize(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(sess execbox.Session) {
		var req api.ResizeRequest
		if err := readJSON(r, s.opts.MaxJSONBody, &req, true); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := sess.Resize(r.Context(), req.Rows, req.Cols); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// sessionEvents: GET sessions/{session}/events?from=N, as for a process.
func (s *sandbox) sessionEvents(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(sess execbox.Session) { s.streamEvents(w, r, sess.Events) })
}

// waitSession: GET sessions/{session}/wait, a long poll for the
// interpreter's Result.
func (s *sandbox) waitSession(w http.ResponseWriter, r *http.Request) {
	s.withSession(w, r, func(sess execbox.Session) {
		res, err := sess.Wait(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeResultResponse(w, r, res)
	})
}
