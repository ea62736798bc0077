package server

import (
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// exec runs a command to completion: POST exec[?id=ID]. The body is the
// api.ExecRequest as JSON, or multipart/form-data with the request in a
// part named "request" and the command's stdin streamed in a part named
// "stdin". The response comes when the command has ended.
func (s *sandbox) exec(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id != "" && !validID(id) {
		s.fail(w, r, execbox.Invalid("id", "%q is not an exec ID (1-64 of A-Z a-z 0-9 . _ -)", id))
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	req, in, err := s.execRequest(w, r, cancel)
	defer in.drain(w)
	if err == nil && s.opts.Policy != nil {
		err = s.allowExec(r, api.ActionExec, &req)
	}
	var h *hold
	if err == nil {
		h, err = reserve(r, "an exec's result", "output_limit", resultSize(req.OutputLimit))
	}
	defer h.release()
	if err == nil {
		err = s.acquire()
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer s.release()
	if id != "" {
		if !s.addExec(id, cancel) {
			s.fail(w, r, execbox.Invalid("id", "exec %q is already running", id))
			return
		}
		defer s.removeExec(id)
	}

	start := time.Now()
	res, err := s.sb.Exec(ctx, req)
	h.shrink(int64(len(res.Stdout.Data) + len(res.Stderr.Data)))
	outcome := string(res.Reason)
	if err != nil {
		outcome = "error:" + string(api.CodeOf(err))
	}
	if f := s.opts.Observer.Exec; f != nil {
		f(ExecStats{Runtime: s.runtime, Outcome: outcome, Duration: time.Since(start)})
	}
	switch {
	case err != nil && isContextErr(err) && res.Reason != "":
		// Cancelled: the partial Result, and why.
		writeExecResponse(w, r, res, api.NewError(err))
	case err != nil:
		s.fail(w, r, err)
	default:
		writeExecResponse(w, r, res, nil)
	}
}

// checkedExec returns every problem of a decoded request at once: err,
// the wire's (durations out of range), the request's own (Validate:
// negative values, a missing command, NUL bytes) and the server's
// maximums, each naming its wire field (api.NewError).
func checkedExec(req *execbox.ExecRequest, err error, max *Maximums) error {
	return errors.Join(err, req.Validate(), max.checkExec(req))
}

// resultSize is the most a result of a command with output limit limit
// holds (zero: the default): both streams full.
func resultSize(limit int64) int64 {
	if limit <= 0 {
		limit = execbox.DefaultOutputLimit
	}
	return 2 * limit
}

// execRequest decodes an exec request, JSON or multipart, and returns
// its streamed stdin, if any (see readStreamed). A streamed stdin that
// breaks (the client went away) cancels the exec.
func (s *sandbox) execRequest(w http.ResponseWriter, r *http.Request, cancel context.CancelCauseFunc) (execbox.ExecRequest, *streamReader, error) {
	var wire api.ExecRequest
	in, err := s.readStreamed(w, r, cancel, &wire)
	if err != nil {
		return execbox.ExecRequest{}, in, err
	}
	req, err := wire.ExecRequest()
	req.Env = s.lateEnv(req.Env)
	if err = checkedExec(&req, err, &s.opts.Max); err != nil {
		return req, in, err
	}
	if in != nil {
		if req.Stdin != nil {
			return req, in, execbox.Invalid("stdin", "given twice: in the request and as a part")
		}
		req.Stdin = in
	}
	return req, in, nil
}

// readStreamed decodes a request that may stream its stdin: a JSON body
// decoded into wire, or multipart/form-data with the JSON in a part named
// "request" and the stdin, returned as a reader, in a part named "stdin"
// (nil without one). The reader cancels the call when the stream breaks
// (the client went away). The handler must call its drain once it has
// answered (a nil reader's drain does nothing).
func (s *sandbox) readStreamed(w http.ResponseWriter, r *http.Request, cancel context.CancelCauseFunc, wire any) (*streamReader, error) {
	switch ct := mediaType(r.Header.Get("Content-Type")); ct {
	case "", api.ContentJSON:
		return nil, readJSON(r, s.opts.MaxJSONBody, wire, true)
	case "multipart/mixed":
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, execbox.Invalid("body", "%v", err)
		}
		part, err := mr.NextPart()
		if err != nil || part.FormName() != "request" {
			return nil, execbox.Invalid("body", `the first part must be named "request" (the JSON request)`)
		}
		h, err := reserve(r, "a JSON request part", "body", s.opts.MaxJSONBody)
		if err != nil {
			return nil, err
		}
		b, err := readBody(part, s.opts.MaxJSONBody)
		if err == nil {
			err = decodeJSON(b, wire, true)
		}
		h.release()
		if err != nil {
			return nil, err
		}
		part, err = mr.NextPart()
		switch {
		case errors.Is(err, io.EOF):
			return nil, nil
		case err != nil:
			return nil, execbox.Invalid("body", "%v", err)
		case part.FormName() != "stdin":
			return nil, execbox.Invalid("body", `the second part must be named "stdin", not %q`, part.FormName())
		}
		// The response may come before all of stdin is read (the command
		// exits without reading it): let reads and writes interleave.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			s.log.Debug("full duplex unavailable", "error", err)
		}
		return &streamReader{part: part, body: r.Body, cancel: cancel}, nil
	default:
		return nil, execbox.Invalid("Content-Type", "%q is not supported here (want %s or multipart/mixed)", ct, api.ContentJSON)
	}
}

// streamReader reads a streamed request part, the command's stdin, and
// cancels the call when the stream breaks before its end: the client is
// gone.
type streamReader struct {
	// mu serialises Read and drain: the command's stdin copy may still be
	// reading when the response has gone.
	mu     sync.Mutex
	part   *multipart.Part
	body   io.Reader // the whole request body, which part reads
	cancel context.CancelCauseFunc
}

func (s *streamReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.part.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.cancel(err)
	}
	return n, err
}

// drain sends the response written to w, then reads and discards what
// is left of the request body, until its end or until the client stops
// sending. A command may end without reading all of its stdin, and the
// response then comes first; but HTTP/1.1 carries the next request on
// the connection only after this one's whole body, and a server that
// stopped reading would close the connection under a client still
// sending (which may then see its write fail rather than the response),
// or after a client that had sent everything into the socket's buffers
// (whose next request would fail).
func (s *streamReader) drain(w http.ResponseWriter) {
	if s == nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.Copy(io.Discard, s.body)
}
