package server

import (
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
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
	if id != "" && !execIDPattern.MatchString(id) {
		s.fail(w, r, execbox.Invalid("id", "%q is not an exec ID (1-64 of A-Z a-z 0-9 . _ -)", id))
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	req, err := s.execRequest(w, r, cancel)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if id != "" {
		if err := s.addExec(id, cancel); err != nil {
			s.fail(w, r, err)
			return
		}
		defer s.removeExec(id)
	}

	start := time.Now()
	res, err := s.sb.Exec(ctx, req)
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
		writeJSON(w, http.StatusOK, api.ExecResponse{Result: api.NewResult(res), Error: api.NewError(err)})
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, api.ExecResponse{Result: api.NewResult(res)})
	}
}

// execRequest decodes an exec request, JSON or multipart. A streamed
// stdin that breaks (the client went away) cancels the exec.
func (s *sandbox) execRequest(w http.ResponseWriter, r *http.Request, cancel context.CancelCauseFunc) (execbox.ExecRequest, error) {
	var wire api.ExecRequest
	switch ct := mediaType(r.Header.Get("Content-Type")); ct {
	case "", api.ContentJSON:
		if err := readJSON(r, s.opts.MaxJSONBody, &wire, true); err != nil {
			return execbox.ExecRequest{}, err
		}
		return wire.ExecRequest()
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			return execbox.ExecRequest{}, execbox.Invalid("body", "%v", err)
		}
		part, err := mr.NextPart()
		if err != nil || part.FormName() != "request" {
			return execbox.ExecRequest{}, execbox.Invalid("body", `the first part must be named "request" (the JSON request)`)
		}
		b, err := readBody(part, s.opts.MaxJSONBody)
		if err != nil {
			return execbox.ExecRequest{}, err
		}
		if err := decodeJSON(b, &wire, true); err != nil {
			return execbox.ExecRequest{}, err
		}
		req, err := wire.ExecRequest()
		if err != nil {
			return req, err
		}
		part, err = mr.NextPart()
		switch {
		case errors.Is(err, io.EOF):
			return req, nil
		case err != nil:
			return req, execbox.Invalid("body", "%v", err)
		case part.FormName() != "stdin":
			return req, execbox.Invalid("body", `the second part must be named "stdin", not %q`, part.FormName())
		case req.Stdin != nil:
			return req, execbox.Invalid("stdin", "given twice: in the request and as a part")
		}
		// The response may come before all of stdin is read (the command
		// exits without reading it): let reads and writes interleave.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			s.log.Debug("full duplex unavailable", "error", err)
		}
		req.Stdin = &streamReader{r: part, cancel: cancel}
		return req, nil
	default:
		return execbox.ExecRequest{}, execbox.Invalid("Content-Type", "%q is not supported here (want %s or multipart/form-data)", ct, api.ContentJSON)
	}
}

// streamReader reads a streamed request part and cancels the exec when
// the stream breaks before its end: the client is gone.
type streamReader struct {
	r      *multipart.Part
	cancel context.CancelCauseFunc
}

func (s *streamReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.cancel(err)
	}
	return n, err
}
