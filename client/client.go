package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Client talks to an execbox server (execbox serve) or to an agent
// serving one sandbox. It is safe for concurrent use; its methods take a
// context that bounds the call.
type Client struct {
	base  string // scheme://host[/prefix], no trailing slash
	hc    *http.Client
	token string
	log   *slog.Logger
	retry Retry // see retry.go
}

// Option configures a Client.
type Option func(*options)

type options struct {
	hc        *http.Client
	transport http.RoundTripper
	socket    string
	token     string
	log       *slog.Logger
	retry     *Retry
}

// WithHTTPClient makes the client send its requests with hc. Its Timeout
// should be zero: execs and event streams last as long as the command.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithTransport makes the client send its requests through rt.
func WithTransport(rt http.RoundTripper) Option { return func(o *options) { o.transport = rt } }

// WithUnixSocket makes the client connect to the unix socket at path,
// whatever the host of the base URL says.
func WithUnixSocket(path string) Option { return func(o *options) { o.socket = path } }

// WithToken makes the client send token as a bearer token.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithLogger gives the client a logger (reconnects, background stdin
// failures); nil discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New returns a client of the server at baseURL: "http://host:port", with
// an optional path prefix when a proxy mounts the server below one, or
// "unix:///path/to/socket" for a unix socket.
func New(baseURL string, opts ...Option) (*Client, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, execbox.Invalid("url", "%v", err)
	}
	switch u.Scheme {
	case "unix":
		if o.socket == "" {
			o.socket = u.Path
		}
		u = &url.URL{Scheme: "http", Host: "execbox"}
	case "http", "https":
		if u.Host == "" {
			return nil, execbox.Invalid("url", "%q has no host", baseURL)
		}
	default:
		return nil, execbox.Invalid("url", "%q: scheme must be http, https or unix", baseURL)
	}
	c := &Client{
		base:  strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"),
		token: o.token,
		log:   o.log,
	}
	if c.retry, err = o.retry.withDefaults(); err != nil {
		return nil, err
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.hc != nil:
		c.hc = o.hc
	case o.transport != nil:
		c.hc = &http.Client{Transport: o.transport}
	default:
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Agents run many commands in parallel against one server.
		t.MaxIdleConnsPerHost = 64
		if o.socket != "" {
			t.Proxy = nil
			var d net.Dialer
			t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", o.socket)
			}
		}
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// transportError is a failure to reach the server or a broken response:
// execbox.ErrUnavailable, and worth a retry for idempotent calls.
type transportError struct{ err error }

func (e *transportError) Error() string   { return "execbox server unreachable: " + e.err.Error() }
func (e *transportError) Unwrap() []error { return []error{e.err, execbox.ErrUnavailable} }

// request is one call.
type request struct {
	method string
	path   string // from the base, starting with "/v1/"
	query  url.Values
	body   io.Reader
	ctype  string
	accept string
	expect bool // Expect: 100-continue (large or streamed bodies)
	allow  int  // a status >= 400 that is not an error
	// limit bounds each output of a result response (doResult); 0 is
	// maxPartOutput.
	limit int64
}

// send sends req once (do retries) and returns the response for status
// < 400. Other statuses become the Go error of the api.Error in the body;
// a failure to reach the server is a transportError, unless ctx ended
// first (ctx's error).
func (c *Client) send(ctx context.Context, req request) (*http.Response, error) {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	body := req.body
	if body != nil {
		// Never let the transport close a caller's reader.
		body = struct{ io.Reader }{body}
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, err
	}
	if br, ok := req.body.(*bytes.Reader); ok {
		hr.ContentLength = int64(br.Len())
		snap := *br
		hr.GetBody = func() (io.ReadCloser, error) { r := snap; return io.NopCloser(&r), nil }
	}
	hr.Header.Set(api.ProtocolHeader, api.Protocol)
	hr.Header.Set("User-Agent", "execbox-client/"+api.Protocol)
	switch {
	case req.ctype != "":
		hr.Header.Set("Content-Type", req.ctype)
	case req.method == http.MethodPost || req.method == http.MethodPut:
		// The server refuses a POST or PUT without an API media type
		// (the defence against cross-site requests), even a bodiless one.
		hr.Header.Set("Content-Type", api.ContentJSON)
	}
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	} else {
		hr.Header.Set("Accept", api.ContentJSON)
	}
	if req.expect {
		hr.Header.Set("Expect", "100-continue")
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	if id := api.RequestID(ctx); id != "" {
		hr.Header.Set(api.RequestIDHeader, id)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &transportError{err}
	}
	if resp.StatusCode < 400 || resp.StatusCode == req.allow {
		return resp, nil
	}
	defer resp.Body.Close()
	err = responseError(resp)
	if d, ok := retryAfter(resp); ok {
		err = &refusedError{err: err, after: d}
	}
	return nil, err
}

// responseError decodes the error of a response with status >= 400.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var er api.ErrorResponse
	if json.Unmarshal(b, &er) == nil && er.Error != nil && er.Error.Code != "" {
		return er.Error.Err()
	}
	// Not an execbox error body: a proxy's page, or a server of another
	// protocol.
	text := strings.TrimSpace(string(b))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	e := &api.Error{Code: api.CodeForStatus(resp.StatusCode), Message: fmt.Sprintf("HTTP %s: %s", resp.Status, text)}
	return e.Err()
}

// doJSON sends in (if not nil) as JSON and decodes the response into out
// (if not nil).
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	req := request{method: method, path: path, query: query}
	if in != nil {
		if err := api.CheckUTF8(in); err != nil {
			return err // JSON would alter these strings
		}
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		req.body, req.ctype = bytes.NewReader(b), api.ContentJSON
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transportError{fmt.Errorf("%s %s: decoding the response: %w", method, path, err)}
	}
	return nil
}

// Version asks the server which protocol it speaks.
func (c *Client) Version(ctx context.Context) (api.Version, error) {
	var v api.Version
	err := c.doJSON(ctx, http.MethodGet, "/v1/version", nil, nil, &v)
	return v, err
}

// Health probes the server (or agent). A server that answers but is not
// ready returns a Health with Status "unavailable" and a nil error.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/health", allow: http.StatusServiceUnavailable})
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, &transportError{fmt.Errorf("GET /v1/health: decoding the response: %w", err)}
	}
	return h, nil
}

// Runtimes lists the server's runtimes with their health and
// capabilities; the default comes first.
func (c *Client) Runtimes(ctx context.Context) ([]api.RuntimeInfo, error) {
	var l api.RuntimeList
	err := c.doJSON(ctx, http.MethodGet, "/v1/runtimes", nil, nil, &l)
	return l.Runtimes, err
}

// CreateOptions for Client.Create.
type CreateOptions struct {
	// Runtime is the server's runtime to use; empty means its default.
	Runtime string
}

// Create creates a sandbox on the server from spec. The spec travels as
// is: Workspace and asset Sources are paths on the server's host (which
// it refuses unless started with --allow-host-paths), and Snapshot cannot
// travel (ErrUnsupported). runtimes/remote provisions a spec from the
// client's host instead.
func (c *Client) Create(ctx context.Context, spec execbox.Spec, opts CreateOptions) (*Sandbox, error) {
	wire, err := api.NewSpec(spec)
	if err != nil {
		return nil, err
	}
	var q url.Values
	if opts.Runtime != "" {
		q = url.Values{"runtime": {opts.Runtime}}
	}
	var info api.SandboxInfo
	if err := c.doJSON(ctx, http.MethodPost, "/v1/sandboxes", q, wire, &info); err != nil {
		return nil, err
	}
	return c.newSandbox(info, false), nil
}

// Sandboxes lists the server's sandboxes, oldest first.
func (c *Client) Sandboxes(ctx context.Context) ([]api.SandboxInfo, error) {
	return c.ListSandboxes(ctx, ListOptions{})
}

// ListOptions for Client.ListSandboxes.
type ListOptions struct {
	// Labels, if set, keep the sandboxes having every one of these
	// labels with its value.
	Labels map[string]string
}

// ListSandboxes lists the server's live sandboxes that match opts,
// oldest first.
func (c *Client) ListSandboxes(ctx context.Context, opts ListOptions) ([]api.SandboxInfo, error) {
	var q url.Values
	for k, v := range opts.Labels {
		if q == nil {
			q = url.Values{}
		}
		q.Add("label", k+"="+v)
	}
	var l api.SandboxList
	err := c.doJSON(ctx, http.MethodGet, "/v1/sandboxes", q, nil, &l)
	return l.Sandboxes, err
}

// SandboxInfo describes the server's sandbox id: a live one, or one that
// ended and that the server still remembers, whose State, EndReason and
// EndDetail say when and why.
func (c *Client) SandboxInfo(ctx context.Context, id string) (api.SandboxInfo, error) {
	var info api.SandboxInfo
	err := c.doJSON(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, nil, &info)
	return info, err
}

// Sandbox attaches to the server's sandbox id, made by this or another
// client. Closing it deletes the sandbox. A sandbox that ended is
// ErrClosed, saying why.
func (c *Client) Sandbox(ctx context.Context, id string) (*Sandbox, error) {
	info, err := c.SandboxInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.State == api.StateClosed || info.State == api.StateFailed {
		return nil, fmt.Errorf("sandbox %s %s at %s: %s: %w", info.ID, info.State, info.EndedAt.Format(time.RFC3339), info.EndDetail, execbox.ErrClosed)
	}
	return c.newSandbox(info, false), nil
}

// Agent attaches to the one sandbox an agent serves (its endpoints at
// /v1/). The sandbox belongs to whoever started the agent: closing the
// returned Sandbox only stops this client from using it.
func (c *Client) Agent(ctx context.Context) (*Sandbox, error) {
	var info api.SandboxInfo
	if err := c.doJSON(ctx, http.MethodGet, "/v1/info", nil, nil, &info); err != nil {
		return nil, err
	}
	return c.newSandbox(info, true), nil
}

// backoff sleeps before retry n (from 0): 50ms, 100ms, ... up to 1s. It
// returns false if ctx ends first.
func backoff(ctx context.Context, n int) bool {
	d := min(50*time.Millisecond<<n, time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
