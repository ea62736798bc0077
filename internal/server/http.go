package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// retryAfterSeconds is the Retry-After of a 429: the wait before a
// refused request (a maximum count reached, the memory budget held) may
// find room.
const retryAfterSeconds = 1

// Defaults of Options.
const (
	DefaultMaxJSONBody = 8 << 20
	DefaultMaxFileBody = execbox.DefaultReadLimit
	DefaultHeartbeat   = 15 * time.Second
)

// Options configure a Server or a sandbox handler. The zero value is
// ready: no authentication, default limits, logs discarded.
type Options struct {
	// Logger receives request and error logs; nil discards them.
	Logger *slog.Logger
	// Token, if set, is the bearer token every request but GET
	// /v1/health, GET /v1/version and GET /v1/openapi.yaml must carry
	// (Authorization: Bearer TOKEN). It is compared in constant time.
	// It is an admin key named AdminName (see Keys).
	Token string
	// TenantRegistries are the registries a tenant's (non-admin key's)
	// create may name an image of, which the server pulls from its own
	// network if it lacks it; nil means DefaultTenantRegistries, empty
	// none. Admins are not bound by it.
	TenantRegistries []string
	// Keys are the API keys of a Server's tenants, beside Token: each
	// owns the sandboxes it creates, which other keys do not see (see
	// tenant.go). With neither Token nor Keys, there is no
	// authentication and every request is an admin's. Agents
	// (NewSandboxHandler) take Token alone.
	Keys []Key
	// Observer, if set, is told about every request and exec.
	Observer *Observer
	// Metrics, if set, is served at GET /metrics (behind Token, like
	// every route): the Prometheus handler of internal/metrics.
	Metrics http.Handler
	// AllowHostPaths lets a create request name paths on the server's
	// host: spec.workspace and assets[].source. Off by default: a client
	// could otherwise read or run in any directory of the host.
	AllowHostPaths bool
	// MaxJSONBody bounds JSON request bodies; zero means
	// DefaultMaxJSONBody.
	MaxJSONBody int64
	// MaxFileBody bounds the body of a file write (it is held in memory,
	// as Files.WriteFile takes bytes); zero means DefaultMaxFileBody.
	// Tar uploads and stdin are streamed and not bounded here.
	MaxFileBody int64
	// Heartbeat is the interval of keep-alive lines on idle event
	// streams; zero means DefaultHeartbeat.
	Heartbeat time.Duration
	// MinReadRate is the slowest a caller may read a response holding
	// a result or a file's content, in bytes a second, after a grace of
	// 10 s: a slower reader's connection is ended, which frees what the
	// response held. Zero means DefaultMinReadRate; negative, no bound.
	// Agents ignore it.
	MinReadRate int64
	// Name identifies the server in GET /v1/version, e.g. "execbox v1.2".
	Name string
	// Hosts, if set, are the names a request's Host header may carry
	// (without the port; case does not matter; "*" allows any): a
	// request naming another host is refused (403), which stops DNS
	// rebinding, where a web page's own name resolves to this server's
	// address. Empty allows any host, for listeners no browser reaches
	// (a unix socket).
	Hosts []string
	// Max bounds what clients may ask for; the zero value bounds nothing.
	Max Maximums
	// Lifetimes are the defaults and maximums of sandboxes' lifetimes,
	// which a Server enforces; the zero value sets none.
	Lifetimes Lifetimes
	// Images, if set, is the image store a Server manages under
	// /v1/images (list, pull, remove, prune); nil answers those routes
	// with unsupported. Agents (NewSandboxHandler) ignore it.
	Images Images
	// Policy, if set, is asked before every create, exec, process
	// start, session open and run, and file change, which it may deny
	// (see Policy). Agents (NewSandboxHandler) ignore it.
	Policy Policy
	// Pools are the warm pools a Server starts with (more can be defined
	// over the API, POST /v1/pools). Agents ignore them.
	Pools []api.Pool
	// StateDir, if set, is where a Server records the sandboxes it
	// holds, so that after it dies a new Server on the same directory
	// answers their IDs "closed", saying they were lost (restart.go).
	// Agents ignore it.
	StateDir string
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxJSONBody <= 0 {
		o.MaxJSONBody = DefaultMaxJSONBody
	}
	if o.MaxFileBody <= 0 {
		o.MaxFileBody = DefaultMaxFileBody
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Name == "" {
		o.Name = "execbox"
	}
	if o.Observer == nil {
		o.Observer = &Observer{}
	}
	return o
}

// Observer receives measurements for metrics. Each function is optional
// and must be safe for concurrent use; it is called synchronously, so it
// must be quick.
type Observer struct {
	// Request is called after every HTTP request.
	Request func(RequestStats)
	// Exec is called after every exec (POST exec), whatever its outcome.
	Exec func(ExecStats)
	// Create is called after every sandbox create, whatever its outcome,
	// whether the sandbox came from a pool or was made.
	Create func(CreateStats)
	// Closed is called when a sandbox a Server held ends: deleted,
	// reaped (lifetime or idle timeout), failed, or closed at shutdown.
	Closed func(ClosedStats)
	// Acquire is called after every take from a warm pool.
	Acquire func(AcquireStats)
}

// CreateStats describes one sandbox create.
type CreateStats struct {
	Runtime string
	// Pool is the warm pool asked for, or "".
	Pool string
	// Outcome is "created", "pooled" (taken warm from Pool), or "error:"
	// and the error code.
	Outcome  string
	Duration time.Duration
}

// ClosedStats describes the end of a sandbox.
type ClosedStats struct {
	Runtime string
	// Reason is why it ended: "deleted", "timeout" (its lifetime ended),
	// "idle" (its idle timeout), "failed" (its boundary was lost), or
	// "shutdown".
	Reason string
}

// AcquireStats describes one take from a warm pool.
type AcquireStats struct {
	Pool string
	// Hit reports whether a warm sandbox was there; a miss made one (or
	// failed, see Outcome).
	Hit      bool
	Duration time.Duration
}

// RequestStats describes one HTTP request, with no IDs in it.
type RequestStats struct {
	// Route is the matched pattern, e.g. "POST /v1/sandboxes/{sandbox}/exec",
	// or "" for an unknown endpoint.
	Route    string
	Status   int
	Duration time.Duration
}

// ExecStats describes one exec.
type ExecStats struct {
	Runtime string
	// Outcome is the Result's reason ("exited", "timed_out", ...) or, when
	// the exec failed, "error:" and the error code ("error:not_found").
	Outcome  string
	Duration time.Duration
}

// core is the handler chain shared by servers and agents: protocol
// header, authentication, logging and observation around a mux.
type core struct {
	opts       Options
	log        *slog.Logger
	mux        *routeMux
	keys       *keyring
	serverRole bool       // GET /v1/version says "server", not "agent"
	mem        *memBudget // a Server's; nil for an agent
}

func newCore(opts Options) *core {
	c := &core{opts: opts, log: opts.Logger, mux: newRouteMux(), keys: newKeyring(opts)}
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, c.log, &execbox.FieldError{
			Field: "path", Kind: execbox.ErrUnsupported,
			Problem: "no endpoint " + r.Method + " " + r.URL.Path + " in protocol " + api.Protocol,
		})
	})
	c.mux.HandleFunc("GET /v1/version", c.version)
	c.mux.HandleFunc("GET /v1/openapi.yaml", c.openAPI)
	return c
}

func (c *core) version(w http.ResponseWriter, r *http.Request) {
	role := api.RoleAgent
	if c.serverRole {
		role = api.RoleServer
	}
	writeJSON(w, http.StatusOK, api.Version{Protocol: api.Protocol, Revision: api.Revision, Server: c.opts.Name, Role: role})
}

// public reports whether r may go without a token: probes, version
// discovery and the OpenAPI document.
func public(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/v1/health" || r.URL.Path == "/v1/version" || r.URL.Path == "/v1/openapi.yaml")
}

// hostAllowed reports whether r's Host is one of Options.Hosts.
func (c *core) hostAllowed(r *http.Request) bool {
	if len(c.opts.Hosts) == 0 {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	for _, h := range c.opts.Hosts {
		if h == "*" || strings.EqualFold(strings.Trim(h, "[]"), host) {
			return true
		}
	}
	return false
}

// bodyTypes are the media types a POST or PUT may carry (api/doc.go).
// None of them is one a cross-site HTML form or a "simple" cross-site
// fetch can send (application/x-www-form-urlencoded, multipart/form-data,
// text/plain), so a web page cannot make a browser call the API without
// a CORS preflight, which the server never grants.
var bodyTypes = []string{api.ContentJSON, api.ContentBytes, api.ContentTar, "multipart/mixed"}

// contentTypeAllowed reports whether r's media type is one of bodyTypes:
// always for POST and PUT, even without a body, and for DELETE when it
// has one (a browser cannot send a cross-site DELETE without a
// preflight). It returns the media type found.
func contentTypeAllowed(r *http.Request) (string, bool) {
	ct := mediaType(r.Header.Get("Content-Type"))
	switch r.Method {
	case http.MethodPost, http.MethodPut:
	case http.MethodDelete:
		if ct == "" && r.ContentLength == 0 {
			return ct, true
		}
	default:
		return ct, true
	}
	return ct, slices.Contains(bodyTypes, ct)
}

func (c *core) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w.Header().Set(api.ProtocolHeader, api.Protocol)
	r = withRequestID(w, r)
	rec := &recorder{ResponseWriter: w}
	r, done, authErr := c.authenticate(r) // r carries the principal (tenant.go)
	defer done()
	r = withBudget(r, c.mem)
	if !c.hostAllowed(r) {
		writeAPIError(rec, &api.Error{Code: api.CodePermissionDenied, Message: "Host " + strconv.Quote(r.Host) + " is not a name of this server"}, http.StatusForbidden)
	} else if authErr != nil {
		refuse(rec, authErr)
	} else if ct, ok := contentTypeAllowed(r); !ok {
		err := execbox.Invalid("Content-Type", "%q is not accepted for %s (want one of %s)", ct, r.Method, strings.Join(bodyTypes, ", "))
		writeAPIError(rec, api.NewError(err), http.StatusUnsupportedMediaType)
	} else {
		c.mux.ServeHTTP(rec, r)
	}
	d := time.Since(start)
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	route := r.Pattern
	if route == "" {
		_, route = c.mux.Handler(r) // refused before routing
	}
	if f := c.opts.Observer.Request; f != nil {
		f(RequestStats{Route: route, Status: status, Duration: d})
	}
	c.accessLog(r, route, status, rec.bytes, d)
}

// recorder notes the status of a response. It keeps Flush and, through
// Unwrap, what http.ResponseController reaches (full duplex, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64 // of the body written
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// writeJSON answers with v as JSON, with its Content-Length: a response
// delimited by its length is complete for the client as soon as it is
// sent, even while the handler goes on (reading the rest of a streamed
// body, see streamReader.drain).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// The wire types always encode: a bug.
		http.Error(w, "execbox: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", api.ContentJSON)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away; nothing to do
}

// writeError answers with err as an api.Error. Errors the server does not
// classify are logged (once, here); the others are the client's business
// and logged at debug level.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := api.NewError(err)
	status := e.Code.Status()
	var tooLarge *errBodyTooLarge
	if errors.As(err, &tooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	level := slog.LevelDebug
	if e.Code == api.CodeInternal {
		level = slog.LevelError
	}
	if r.Context().Err() == nil || e.Code != api.CodeCanceled {
		log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "error", err)
	}
	if status == http.StatusTooManyRequests {
		// Refused before anything was done, for a count or memory that
		// frees as other calls end: any request may be sent again.
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	writeAPIError(w, e, status)
}

func writeAPIError(w http.ResponseWriter, e *api.Error, status int) {
	writeJSON(w, status, api.ErrorResponse{Error: e})
}

// isContextErr reports whether err is a context's error.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
