package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// File endpoints take the path in the query (?path=P), never in the URL
// path: a URL path is cleaned by routers and proxies ("a/../b", "//x"),
// which would change what an absolute or ".." path means, and the
// workspace is the one to judge those.

// pathParam returns the path parameter; required ones must be present.
func pathParam(r *http.Request, required bool) (string, error) {
	q := r.URL.Query()
	if !q.Has("path") {
		if required {
			return "", execbox.Invalid("path", "is required")
		}
		return ".", nil
	}
	return q.Get("path"), nil
}

func modeParam(r *http.Request) (fs.FileMode, error) {
	s := r.URL.Query().Get("mode")
	if s == "" {
		return 0, nil
	}
	return api.ParseMode("mode", s)
}

// readSize is the most a file read with limit holds (zero: the default).
func readSize(limit int64) int64 {
	if limit <= 0 {
		return execbox.DefaultReadLimit
	}
	return limit
}

func (s *sandbox) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit")
	if err == nil {
		limit, err = s.opts.Max.readLimit(limit)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f := s.sb.Files()
	// KEP-539.2: GET on a directory lists it for clients asking for JSON.
	if accept := r.Header.Get("Accept"); strings.Contains(accept, api.ContentJSON) && !strings.Contains(accept, api.ContentBytes) {
		if fi, err := f.Stat(r.Context(), p); err == nil && fi.IsDir() {
			s.list(w, r)
			return
		}
	}
	h, err := reserve(r, "a file read", "limit", readSize(limit))
	defer h.release()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, err := f.ReadFile(r.Context(), p, execbox.ReadOptions{Limit: limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h.shrink(int64(len(data)))
	w.Header().Set("Content-Type", api.ContentBytes)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	defer writeDeadline(w, r, int64(len(data)))()
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *sandbox) writeFile(w http.ResponseWriter, r *http.Request) {
	p, err1 := pathParam(r, true)
	mode, err2 := modeParam(r)
	parents, err3 := queryBool(r, "parents")
	if err := errors.Join(err1, err2, err3); err != nil {
		s.fail(w, r, err)
		return
	}
	h, err := reserve(r, "a file write", "body", bodySize(r, s.opts.MaxFileBody))
	defer h.release()
	var data []byte
	if err == nil {
		data, err = readBody(r.Body, s.opts.MaxFileBody)
	}
	if err == nil && s.opts.Policy != nil {
		err = s.allowFile(r, api.ActionFileWrite, api.FileAction{Path: p, Mode: fileMode(mode), Parents: parents}, data)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.sb.Files().WriteFile(r.Context(), p, data, execbox.WriteOptions{Mode: mode, Parents: parents}); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sandbox) remove(w http.ResponseWriter, r *http.Request) {
	p, err1 := pathParam(r, true)
	rec, err2 := queryBool(r, "recursive")
	err := errors.Join(err1, err2)
	if err == nil && s.opts.Policy != nil {
		err = s.allowFile(r, api.ActionFileRemove, api.FileAction{Path: p, Recursive: rec}, nil)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.sb.Files().Remove(r.Context(), p, execbox.RemoveOptions{Recursive: rec}); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sandbox) stat(w http.ResponseWriter, r *http.Request) {
	p, _ := pathParam(r, false)
	fi, err := s.sb.Files().Stat(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.NewFileInfo(fi))
}

func (s *sandbox) list(w http.ResponseWriter, r *http.Request) {
	p, _ := pathParam(r, false)
	ents, err := s.sb.Files().List(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.FileList{Entries: make([]api.FileInfo, len(ents))}
	for i, e := range ents {
		out.Entries[i] = api.NewFileInfo(e)
	}
	if err := writeJSONHeld(w, r, nil, "a directory's listing", "path", http.StatusOK, out); err != nil {
		s.fail(w, r, err)
	}
}

func (s *sandbox) mkdir(w http.ResponseWriter, r *http.Request) {
	p, err1 := pathParam(r, true)
	mode, err2 := modeParam(r)
	parents, err3 := queryBool(r, "parents")
	err := errors.Join(err1, err2, err3)
	if err == nil && s.opts.Policy != nil {
		err = s.allowFile(r, api.ActionFileMkdir, api.FileAction{Path: p, Mode: fileMode(mode), Parents: parents}, nil)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.sb.Files().Mkdir(r.Context(), p, execbox.MkdirOptions{Mode: mode, Parents: parents}); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sandbox) upload(w http.ResponseWriter, r *http.Request) {
	p, _ := pathParam(r, false)
	body, err := s.opts.Max.uploadBody(r)
	if err == nil && s.opts.Policy != nil {
		err = s.allowFile(r, api.ActionFileUpload, api.FileAction{Path: p, Size: r.ContentLength}, nil)
	}
	if err == nil {
		err = s.sb.Files().Upload(r.Context(), p, body)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sandbox) download(w http.ResponseWriter, r *http.Request) {
	p, _ := pathParam(r, false)
	s.stream(w, r, func(ctx context.Context, out io.Writer) error {
		return s.sb.Files().Download(ctx, p, out)
	})
}

func (s *sandbox) snapshot(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, s.sb.Snapshot)
}

// stream answers with the tar stream fn writes. An error before the
// first byte is an ordinary error response; after it, the status is
// already sent, so the error goes in the Execbox-Error trailer.
func (s *sandbox) stream(w http.ResponseWriter, r *http.Request, fn func(context.Context, io.Writer) error) {
	lw := &lazyWriter{w: w}
	err := fn(r.Context(), lw)
	switch {
	case err == nil && !lw.started:
		lw.begin()
	case err != nil && !lw.started:
		s.fail(w, r, err)
	case err != nil:
		s.log.Debug("stream failed", "path", r.URL.Path, "error", err)
		b, _ := json.Marshal(api.NewError(err))
		w.Header().Set(api.ErrorTrailer, string(b)) // declared by begin
	}
}

// lazyWriter sends the status line with the first byte.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) begin() {
	l.started = true
	l.w.Header().Set("Content-Type", api.ContentTar)
	// Declaring the trailer makes the response chunked, so it can carry
	// an error after the data.
	l.w.Header().Set("Trailer", api.ErrorTrailer)
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.begin()
	}
	return l.w.Write(p)
}
