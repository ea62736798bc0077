package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// cancelWait bounds how long Exec waits, after its context ends, for the
// server to kill the command and return the partial Result, beyond the
// command's grace period.
const cancelWait = 10 * time.Second

// Sandbox is a sandbox reached over the protocol. It implements
// execbox.Sandbox: errors have the same kinds (and *execbox.FieldError
// fields) as in process, and cancelling an Exec's context kills the
// remote process tree and returns the partial Result. Methods are safe
// for concurrent use.
type Sandbox struct {
	c      *Client
	info   api.SandboxInfo
	prefix string // "/v1/sandboxes/ID/" or "/v1/" for an agent
	agent  bool

	// ctx ends at Close: it bounds background work (stdin pumps).
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
}

var _ execbox.Sandbox = (*Sandbox)(nil)

func (c *Client) newSandbox(info api.SandboxInfo, agent bool) *Sandbox {
	s := &Sandbox{c: c, info: info, agent: agent, prefix: "/v1/"}
	if !agent {
		s.prefix = "/v1/sandboxes/" + url.PathEscape(info.ID) + "/"
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// ID implements execbox.Sandbox.
func (s *Sandbox) ID() string { return s.info.ID }

// Workspace implements execbox.Sandbox: the workspace as commands see it.
func (s *Sandbox) Workspace() string { return s.info.Workspace }

// Info returns what the server said about the sandbox when it was
// created or attached.
func (s *Sandbox) Info() api.SandboxInfo { return s.info }

// Capabilities implements execbox.Sandbox: what the server said the
// sandbox enforces when it was created or attached. A server older than
// revision 2 does not say; the sandbox then claims nothing (its limits
// are still checked by the server).
func (s *Sandbox) Capabilities() execbox.Capabilities {
	if s.info.Capabilities == nil {
		return execbox.Capabilities{}
	}
	return s.info.Capabilities.Capabilities()
}

func (s *Sandbox) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sandbox %s: %w", s.info.ID, execbox.ErrClosed)
	}
	return nil
}

// Close deletes the sandbox on the server, which kills everything it
// started and removes what it made; it returns when that is done. For an
// agent's sandbox (Client.Agent), whose owner is the runtime that started
// the agent, it only stops this Sandbox from being used. It is idempotent.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	if s.agent {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := s.c.doJSON(ctx, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(s.info.ID), nil, nil, nil)
	if errors.Is(err, execbox.ErrClosed) {
		err = nil // deleted by someone else: closed all the same
	}
	return err
}

// SetTimeout makes the sandbox's lifetime end d from now, sooner or
// later than it would have (POST /v1/sandboxes/{id}/timeout, as e2b's
// set_timeout), and returns its description with the new ExpiresAt. The
// server's maximum lifetime bounds the whole life, from creation: asking
// past it is ErrInvalidArgument naming "timeout". An agent's sandbox
// has no lifetime (ErrUnsupported).
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) (api.SandboxInfo, error) {
	if err := s.checkOpen(); err != nil {
		return api.SandboxInfo{}, err
	}
	if s.agent {
		return api.SandboxInfo{}, &execbox.FieldError{Field: "timeout", Kind: execbox.ErrUnsupported,
			Problem: "an agent's sandbox belongs to its runtime, which ends it"}
	}
	if d <= 0 {
		return api.SandboxInfo{}, execbox.Invalid("timeout", "must be positive: how long from now the sandbox may live")
	}
	var info api.SandboxInfo
	err := s.c.doJSON(ctx, http.MethodPost, s.prefix+"timeout", nil, api.SandboxTimeoutRequest{TimeoutMS: float64(d) / 1e6}, &info)
	return info, err
}

// Exec implements execbox.Sandbox. req.Stdin, if set, is streamed to the
// server as the command reads it (a multipart request); Exec may return
// before all of it was read, as in process. If ctx ends first, Exec asks
// the server to cancel the command, which kills its whole tree, and
// returns the partial Result with ctx's error.
func (s *Sandbox) Exec(ctx context.Context, req execbox.ExecRequest) (execbox.Result, error) {
	if err := s.checkOpen(); err != nil {
		return execbox.Result{}, err
	}
	if err := req.Validate(); err != nil {
		return execbox.Result{}, err
	}
	id := newExecID()
	wire := api.NewExecRequest(req)
	hreq := request{method: http.MethodPost, path: s.prefix + "exec", query: url.Values{"id": {id}}, limit: req.OutputLimit}
	if hreq.limit == 0 {
		hreq.limit = execbox.DefaultOutputLimit
	}
	stop, err := s.streamedBody(&hreq, wire, req.Stdin)
	if err != nil {
		return execbox.Result{}, err
	}
	defer stop()
	grace := req.GracePeriod
	if grace == 0 {
		grace = execbox.DefaultGracePeriod
	}
	return cancellable(ctx, s, hreq, s.prefix+"exec/"+id+"/cancel", grace+cancelWait, s.sendExec)
}

// cancellable sends hreq, a long call the server runs under the ID named
// in cancelPath, and decodes its response with send. The request outlives
// ctx: when ctx ends first, the server is asked to cancel (POST
// cancelPath), and the response, which then carries what was done until
// then, is awaited for up to wait more. The result comes back with ctx's
// error. If no response comes within wait, the connection is dropped
// (which the server takes as a cancel too) and the zero T is returned.
func cancellable[T any](ctx context.Context, s *Sandbox, hreq request, cancelPath string, wait time.Duration, send func(context.Context, request) (T, error)) (T, error) {
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rcancel()
	if ctx.Done() == nil { // cannot be cancelled: no need to watch it
		return send(rctx, hreq)
	}
	type outcome struct {
		res T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := send(rctx, hreq)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
	}
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		defer cancel()
		if err := s.c.doJSON(cctx, http.MethodPost, cancelPath, nil, nil, nil); err != nil {
			s.c.log.Debug("cancel failed", "sandbox", s.info.ID, "path", cancelPath, "error", err)
		}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case o := <-done:
		return o.res, ctx.Err()
	case <-t.C:
		rcancel() // drops the connection: the server cancels too
		var zero T
		return zero, ctx.Err()
	}
}

// sendExec sends an exec request and decodes its response.
func (s *Sandbox) sendExec(ctx context.Context, hreq request) (execbox.Result, error) {
	var out api.ExecResponse
	if err := s.c.doResult(ctx, hreq, &out, func() (*api.Output, *api.Output) { return &out.Result.Stdout, &out.Result.Stderr }); err != nil {
		return execbox.Result{}, err
	}
	return out.Result.Result(), out.Error.Err()
}

// streamedBody sets the body of hreq: wire as JSON, or, with a stdin,
// a multipart body of wire (the part "request") followed by stdin (the
// part "stdin"), streamed as the server reads it. stop ends the stream
// once the call has returned.
func (s *Sandbox) streamedBody(hreq *request, wire any, stdin io.Reader) (stop func(), err error) {
	if err := api.CheckUTF8(wire); err != nil {
		return nil, err // JSON would alter these strings
	}
	if stdin == nil {
		b, err := json.Marshal(wire)
		if err != nil {
			return nil, err
		}
		hreq.body, hreq.ctype = bytes.NewReader(b), api.ContentJSON
		return func() {}, nil
	}
	hreq.body, hreq.ctype, stop = s.multipartBody(wire, stdin)
	return stop, nil
}

// multipartBody returns a multipart body streaming stdin after the
// request, and a function that stops the stream once the call returns.
func (s *Sandbox) multipartBody(wire any, stdin io.Reader) (io.Reader, string, func()) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="request"`)
			h.Set("Content-Type", api.ContentJSON)
			part, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if err := json.NewEncoder(part).Encode(wire); err != nil {
				return err
			}
			h = textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="stdin"`)
			h.Set("Content-Type", api.ContentBytes)
			if part, err = mw.CreatePart(h); err != nil {
				return err
			}
			if _, err := io.Copy(part, stdin); err != nil {
				var pe *pipeClosed
				if errors.As(err, &pe) {
					return err
				}
				// As in process, a failing reader ends stdin (EOF); the
				// command goes on.
				s.c.log.Debug("stdin read failed", "sandbox", s.info.ID, "error", err)
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	// multipart/mixed, not form-data: the server refuses the media types
	// an HTML form can send cross-site.
	return pr, "multipart/mixed; boundary=" + mw.Boundary(), func() { pr.CloseWithError(&pipeClosed{}) }
}

// pipeClosed stops the stdin stream of a call that has returned.
type pipeClosed struct{}

func (*pipeClosed) Error() string { return "the call returned" }

func newExecID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start implements execbox.Sandbox. ctx bounds only the start. A
// req.Stdin is copied in the background through the process's stdin
// endpoint and then closed, until it ends, the process ends or the
// sandbox is closed.
func (s *Sandbox) Start(ctx context.Context, req execbox.ExecRequest) (execbox.Process, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var st api.ProcessStatus
	if err := s.c.doJSON(ctx, http.MethodPost, s.prefix+"processes", nil, api.NewExecRequest(req), &st); err != nil {
		return nil, err
	}
	p := s.process(st.ID)
	if req.Stdin != nil {
		go p.pump(req.Stdin)
	}
	return p, nil
}

// Attach returns the started process id without asking the server: an
// operation on a process the server does not know fails with ErrNotFound.
// A server relaying to an agent uses it, so that the agent's table is the
// only one.
func (s *Sandbox) Attach(id string) execbox.Process { return s.process(id) }

// Process returns the started process id, to reattach after a restart of
// the client. It fails with ErrNotFound if the server does not know it.
func (s *Sandbox) Process(ctx context.Context, id string) (execbox.Process, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	p := s.process(id)
	if _, err := p.Poll(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Snapshot implements execbox.Sandbox: the workspace as a tar stream,
// copied to w as it arrives.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	return s.download(ctx, request{method: http.MethodGet, path: s.prefix + "snapshot", accept: api.ContentTar}, w)
}

// CommitImage implements execbox.ImageCommitter over the server's POST
// /v1/sandboxes/{id}/commit: the server saves the sandbox's root changes
// as a new image at dest (a registry reference, or a layout path on the
// server's machine).
func (s *Sandbox) CommitImage(ctx context.Context, dest string) (execbox.CommittedImage, error) {
	if err := s.checkOpen(); err != nil {
		return execbox.CommittedImage{}, err
	}
	if s.agent {
		return execbox.CommittedImage{}, &execbox.FieldError{Field: "sandbox", Kind: execbox.ErrUnsupported,
			Problem: "an agent cannot save its sandbox as an image; its runtime can"}
	}
	var out api.CommittedImage
	if err := s.c.doJSON(ctx, http.MethodPost, s.prefix+"commit", nil, api.CommitRequest{Dest: dest}, &out); err != nil {
		return execbox.CommittedImage{}, err
	}
	return execbox.CommittedImage{Ref: out.Ref, ID: out.ID, Digest: out.Digest}, nil
}

// download copies a streamed response to w, and reports an error the
// server sent in the trailer.
func (s *Sandbox) download(ctx context.Context, req request, w io.Writer) error {
	resp, err := s.c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, &ctxBody{ctx, resp.Body}); err != nil {
		var be *bodyError
		if errors.As(err, &be) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &transportError{be.err}
		}
		return err // the caller's writer
	}
	if t := resp.Trailer.Get(api.ErrorTrailer); t != "" {
		var e api.Error
		if err := json.Unmarshal([]byte(t), &e); err != nil || e.Code == "" {
			return &transportError{fmt.Errorf("bad %s trailer %q", api.ErrorTrailer, t)}
		}
		return e.Err()
	}
	return nil
}

// ctxBody tells errors reading a response body from the caller's writer's.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

func (b *ctxBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err}
	}
	return n, err
}
