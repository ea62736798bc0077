package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/execbox/execbox/api"
)

// The OpenAPI check: every request and response that goes through a
// server of these tests (newEnv) is validated against api/openapi.yaml,
// so the document cannot drift from the handlers.

// checkCapture bounds the bytes of a body the check keeps; a larger body
// is checked without its content.
const checkCapture = 4 << 20

var (
	openAPIOnce   sync.Once
	openAPIDoc    *openapi3.T
	openAPIRouter routers.Router
	openAPIErr    error
)

// loadOpenAPI loads and validates api.OpenAPI once, and registers the
// body decoders of the media types the protocol adds.
func loadOpenAPI(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	openAPIOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder(api.ContentMultipart, multipartDecoder)
		openapi3filter.RegisterBodyDecoder(api.ContentTar, openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder(api.ContentNDJSON, ndjsonDecoder)
		openapi3filter.RegisterBodyDecoder(api.ContentSSE, sseDecoder)
		doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
		if err != nil {
			openAPIErr = fmt.Errorf("loading api/openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			openAPIErr = fmt.Errorf("api/openapi.yaml is not a valid OpenAPI document: %w", err)
			return
		}
		doc.Servers = nil // any host: the tests' servers listen on random ports
		openAPIDoc = doc
		openAPIRouter, openAPIErr = gorillamux.NewRouter(doc)
	})
	if openAPIErr != nil {
		t.Fatal(openAPIErr)
	}
	return openAPIDoc, openAPIRouter
}

// multipartDecoder is openapi3filter.MultipartBodyDecoder for
// multipart/mixed, where a part without a Content-Type has its encoding's
// (the document says the request part's may be left out).
func multipartDecoder(body io.Reader, h http.Header, schema *openapi3.SchemaRef, encFn openapi3filter.EncodingFn) (any, error) {
	_, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mr := multipart.NewReader(body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		ph := part.Header
		if ph.Get("Content-Type") == "" && encFn != nil {
			if enc := encFn(part.FormName()); enc != nil && enc.ContentType != "" {
				ph.Set("Content-Type", enc.ContentType)
			}
		}
		w, err := mw.CreatePart(ph)
		if err == nil {
			_, err = io.Copy(w, part)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	h = h.Clone()
	h.Set("Content-Type", mw.FormDataContentType())
	return openapi3filter.MultipartBodyDecoder(&buf, h, schema, encFn)
}

// ndjsonDecoder decodes an NDJSON event stream into its lines, skipping
// heartbeats (blank lines) and a last line cut off by a closed stream.
func ndjsonDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var out []any
	lines := bytes.Split(b, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 || i == len(lines)-1 { // the last is "" or cut off
			continue
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// sseDecoder decodes server-sent events into their data, checking that
// each event's name is its kind and its id its seq.
func sseDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var out []any
	events := strings.Split(string(b), "\n\n")
	for i, ev := range events {
		if i == len(events)-1 { // "" or cut off
			continue
		}
		fields := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(ev))
		for sc.Scan() {
			if line := sc.Text(); line != "" && !strings.HasPrefix(line, ":") {
				k, v, _ := strings.Cut(line, ": ")
				fields[k] = v
			}
		}
		if len(fields) == 0 {
			continue // a heartbeat
		}
		var v struct {
			Seq  json.Number `json:"seq"`
			Kind string      `json:"kind"`
		}
		var raw any
		if err := json.Unmarshal([]byte(fields["data"]), &raw); err != nil {
			return nil, fmt.Errorf("event %d: data: %w", i+1, err)
		}
		_ = json.Unmarshal([]byte(fields["data"]), &v)
		if fields["event"] != v.Kind || fields["id"] != string(v.Seq) {
			return nil, fmt.Errorf("event %d: id %q and event %q do not match the data's seq %q and kind %q", i+1, fields["id"], fields["event"], v.Seq, v.Kind)
		}
		out = append(out, raw)
	}
	return out, nil
}

// apiCheck validates the requests and responses of a handler against the
// OpenAPI document, and notes the operations and statuses seen.
type apiCheck struct {
	t      testing.TB
	router routers.Router
	// agent: the handler is an agent's, its per-sandbox routes at /v1/.
	agent bool

	mu   sync.Mutex
	seen map[string]bool // "GET /v1/sandboxes/{sandbox}/exec 200"
	off  atomic.Bool
}

// disable turns the check off, for a test measuring the server's own
// allocations.
func (c *apiCheck) disable() { c.off.Store(true) }

func newAPICheck(t testing.TB, agent bool) *apiCheck {
	_, router := loadOpenAPI(t)
	return &apiCheck{t: t, router: router, agent: agent, seen: make(map[string]bool)}
}

// wrap returns h checked.
func (c *apiCheck) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.off.Load() {
			h.ServeHTTP(w, r)
			return
		}
		in := &capture{r: r.Body}
		r.Body = in
		out := &captureWriter{ResponseWriter: w}
		h.ServeHTTP(out, r)
		// The client gets the response now, not after the check: the
		// check's time would otherwise count in what tests measure.
		_ = http.NewResponseController(w).Flush()
		in.rest() // what the handler left unread
		c.check(r, in, out)
	})
}

// docPath is the path of r in the document: an agent's per-sandbox
// routes are the server's under /v1/sandboxes/{sandbox}/.
func (c *apiCheck) docPath(path string) string {
	if !c.agent || path == "/v1/version" || path == "/v1/openapi.yaml" {
		return path
	}
	if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
		return "/v1/sandboxes/agent/" + rest
	}
	return path
}

func (c *apiCheck) check(r *http.Request, in *capture, out *captureWriter) {
	what := r.Method + " " + r.URL.Path
	status := out.status
	if status == 0 {
		status = http.StatusOK
	}
	req := r.Clone(context.Background())
	req.URL.Path = c.docPath(r.URL.Path)
	req.URL.RawPath = ""
	req.Body = io.NopCloser(bytes.NewReader(in.buf.Bytes()))
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		// The mux's catch-all answers a route it does not have, after the
		// checks of every request (Host, token, media type).
		var e api.ErrorResponse
		if json.Unmarshal(out.buf.Bytes(), &e) == nil && e.Error != nil &&
			(status == http.StatusNotImplemented && e.Error.Code == api.CodeUnsupported && strings.Contains(e.Error.Message, "no endpoint ") ||
				status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusUnsupportedMediaType) {
			return
		}
		c.t.Errorf("openapi: %s (status %d) is not in api/openapi.yaml: %v; document the route", what, status, err)
		return
	}
	op := r.Method + " " + route.Path
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %d", op, status)] = true
	c.mu.Unlock()

	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	opts.ExcludeRequestBody = in.over
	opts.WithCustomSchemaErrorFunc(schemaError)
	reqIn := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	err = errors.Join(openapi3filter.ValidateRequest(context.Background(), reqIn), undeclaredQuery(route, r))
	if err != nil && status < 400 {
		c.t.Errorf("openapi: %s: the server accepted (status %d) a request api/openapi.yaml refuses (%s):\n%v", what, status, op, err)
	}
	ropts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: out.over}
	ropts.WithCustomSchemaErrorFunc(schemaError)
	resIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn, Status: status, Header: out.Header(), Options: ropts,
	}
	resIn.SetBodyBytes(out.buf.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), resIn); err != nil {
		c.t.Errorf("openapi: %s: response %d does not match api/openapi.yaml (%s):\n%v\nbody: %.400s", what, status, op, err, out.buf.Bytes())
	}
}

// undeclaredQuery names the query parameters of r that its operation
// does not declare (openapi3filter lets them pass).
func undeclaredQuery(route *routers.Route, r *http.Request) error {
	declared := map[string]bool{}
	for _, params := range []openapi3.Parameters{route.PathItem.Parameters, route.Operation.Parameters} {
		for _, p := range params {
			if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
				declared[p.Value.Name] = true
			}
		}
	}
	var errs []error
	for name := range r.URL.Query() {
		if !declared[name] {
			errs = append(errs, fmt.Errorf("query parameter %q is not declared", name))
		}
	}
	return errors.Join(errs...)
}

// schemaError says where a value breaks the document, without the
// schema's dump.
func schemaError(err *openapi3.SchemaError) string {
	return "at /" + strings.Join(err.JSONPointer(), "/") + ": " + err.Reason
}

// uncovered reports the operations of the document never answered with a
// success by the handler checked.
func (c *apiCheck) uncovered() []string {
	doc, _ := loadOpenAPI(c.t)
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			op := method + " " + path
			if !slices.ContainsFunc([]int{200, 201, 204}, func(s int) bool { return c.seen[fmt.Sprintf("%s %d", op, s)] }) {
				missing = append(missing, op)
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// capture is a request body that keeps the first checkCapture bytes read.
type capture struct {
	mu   sync.Mutex
	r    io.ReadCloser
	buf  bytes.Buffer
	over bool
}

func (c *capture) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.r.Read(p)
	c.keep(p[:n])
	return n, err
}

func (c *capture) keep(p []byte) {
	if c.buf.Len()+len(p) > checkCapture {
		c.over = true
		return
	}
	c.buf.Write(p)
}

func (c *capture) Close() error { return c.r.Close() }

// rest reads what the handler left of the body; a body that cannot be
// read whole is not checked.
func (c *capture) rest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := io.ReadAll(io.LimitReader(c.r, checkCapture+1))
	c.keep(b)
	if err != nil && !errors.Is(err, http.ErrBodyReadAfterClose) {
		c.over = true
	}
}

// captureWriter keeps the status and the first checkCapture bytes of a
// response. It keeps Flush and, through Unwrap, full duplex.
type captureWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	status int
	buf    bytes.Buffer
	over   bool
}

func (w *captureWriter) WriteHeader(code int) {
	w.mu.Lock()
	if w.status == 0 {
		w.status = code
	}
	w.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.buf.Len()+len(p) > checkCapture {
		w.over = true
	} else {
		w.buf.Write(p)
	}
	w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
