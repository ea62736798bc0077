package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// expectThreshold is the body size from which a file write first asks
// the server whether it will take it (Expect: 100-continue), so a refused
// write does not send its whole body.
const expectThreshold = 1 << 20

// Files implements execbox.Sandbox: the workspace over the protocol.
func (s *Sandbox) Files() execbox.Files { return files{s} }

type files struct{ s *Sandbox }

var _ execbox.Files = files{}

func pathQuery(path string) url.Values { return url.Values{"path": {path}} }

func (f files) ReadFile(ctx context.Context, path string, opts execbox.ReadOptions) ([]byte, error) {
	if err := f.s.checkOpen(); err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, execbox.Invalid("limit", "must not be negative")
	}
	q := pathQuery(path)
	limit := int64(execbox.DefaultReadLimit)
	if opts.Limit > 0 {
		limit = opts.Limit
		q.Set("limit", strconv.FormatInt(opts.Limit, 10))
	}
	resp, err := f.s.c.do(ctx, request{method: http.MethodGet, path: f.s.prefix + "files", query: q, accept: api.ContentBytes})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return nil, &execbox.FieldError{Field: "limit", Problem: fmt.Sprintf("the server sent %d bytes, over the limit %d", resp.ContentLength, limit), Kind: execbox.ErrResourceExhausted}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &transportError{err}
	case int64(len(b)) > limit:
		return nil, &execbox.FieldError{Field: "limit", Problem: "the server sent more than the limit", Kind: execbox.ErrResourceExhausted}
	}
	return b, nil
}

func (f files) WriteFile(ctx context.Context, path string, data []byte, opts execbox.WriteOptions) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	q := createQuery(path, opts.Mode, opts.Parents)
	resp, err := f.s.c.do(ctx, request{
		method: http.MethodPut, path: f.s.prefix + "files", query: q,
		body: bytes.NewReader(data), ctype: api.ContentBytes, expect: len(data) >= expectThreshold,
	})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func (f files) Stat(ctx context.Context, path string) (execbox.FileInfo, error) {
	if err := f.s.checkOpen(); err != nil {
		return execbox.FileInfo{}, err
	}
	var fi api.FileInfo
	if err := f.s.c.doJSON(ctx, http.MethodGet, f.s.prefix+"files/stat", pathQuery(path), nil, &fi); err != nil {
		return execbox.FileInfo{}, err
	}
	return fi.FileInfo(), nil
}

func (f files) List(ctx context.Context, path string) ([]execbox.FileInfo, error) {
	if err := f.s.checkOpen(); err != nil {
		return nil, err
	}
	var l api.FileList
	if err := f.s.c.doJSON(ctx, http.MethodGet, f.s.prefix+"files/list", pathQuery(path), nil, &l); err != nil {
		return nil, err
	}
	out := make([]execbox.FileInfo, len(l.Entries))
	for i, e := range l.Entries {
		out[i] = e.FileInfo()
	}
	return out, nil
}

func (f files) Mkdir(ctx context.Context, path string, opts execbox.MkdirOptions) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	q := createQuery(path, opts.Mode, opts.Parents)
	return f.s.c.doJSON(ctx, http.MethodPost, f.s.prefix+"files/mkdir", q, nil, nil)
}

func (f files) Remove(ctx context.Context, path string, opts execbox.RemoveOptions) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	q := pathQuery(path)
	if opts.Recursive {
		q.Set("recursive", "true")
	}
	return f.s.c.doJSON(ctx, http.MethodDelete, f.s.prefix+"files", q, nil, nil)
}

// Upload implements execbox.Files: r is streamed to the server as it is
// read. The server first says whether it takes the upload (Expect:
// 100-continue), so a refused one does not read r.
func (f files) Upload(ctx context.Context, path string, r io.Reader) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	resp, err := f.s.c.do(ctx, request{
		method: http.MethodPut, path: f.s.prefix + "files/tar", query: pathQuery(path),
		body: r, ctype: api.ContentTar, expect: true,
	})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Download implements execbox.Files: the tar stream is copied to w as it
// arrives.
func (f files) Download(ctx context.Context, path string, w io.Writer) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	return f.s.download(ctx, request{method: http.MethodGet, path: f.s.prefix + "files/tar", query: pathQuery(path), accept: api.ContentTar}, w)
}

// createQuery is the query of a request that creates path: its path,
// mode (when not zero) and whether to create missing parents.
func createQuery(path string, mode fs.FileMode, parents bool) url.Values {
	q := pathQuery(path)
	if mode != 0 {
		q.Set("mode", api.FormatMode(mode))
	}
	if parents {
		q.Set("parents", "true")
	}
	return q
}
