package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Defaults and bounds of a Webhook.
const (
	DefaultPolicyTimeout = 5 * time.Second
	// maxDecisionBody bounds a hook's answer: a decision is a few bytes.
	maxDecisionBody = 64 << 10
)

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// URL is where actions are POSTed: http or https.
	URL string
	// Timeout bounds one decision, from connecting to the end of the
	// answer; zero means DefaultPolicyTimeout.
	Timeout time.Duration
	// Token, if set, is sent as "Authorization: Bearer TOKEN", so the
	// hook knows the server is asking.
	Token string
	// Transport carries the requests; nil means a clone of
	// http.DefaultTransport (keeping connections open between actions).
	Transport http.RoundTripper
}

// Webhook is the Policy of a web service: it POSTs each action as JSON
// (api.PolicyAction) and takes a 2xx answer {"allow": bool, "reason":
// "..."} (api.PolicyDecision). Anything else (no answer within the
// timeout, a refused connection, another status, a body that is not such
// an object) is an error, so the action is refused. Redirects are not
// followed.
type Webhook struct {
	url     string
	timeout time.Duration
	token   string
	client  *http.Client
}

var _ Policy = (*Webhook)(nil)

// NewWebhook returns the webhook policy of opts. An invalid URL is an
// *execbox.FieldError naming "url".
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	if err := checkHookURL(opts.URL); err != nil {
		return nil, err
	}
	if opts.Timeout < 0 {
		return nil, execbox.Invalid("timeout", "must not be negative")
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultPolicyTimeout
	}
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64 // concurrent actions reuse connections
		tr = t
	}
	return &Webhook{
		url: opts.URL, timeout: opts.Timeout, token: opts.Token,
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// checkHookURL reports whether u is an absolute http or https URL.
func checkHookURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case u == "":
		return execbox.Invalid("url", "is required")
	case err != nil:
		return execbox.Invalid("url", "%v", err)
	case p.Scheme != "http" && p.Scheme != "https":
		return execbox.Invalid("url", "%q is not an http or https URL", u)
	case p.Host == "":
		return execbox.Invalid("url", "%q has no host", u)
	}
	return nil
}

// HookError is a webhook's failure to decide. Problem is what the
// caller of the refused action is told ("timed out after 5s"); Err, with
// the hook's address, goes to the server's log only.
type HookError struct {
	Problem string
	Err     error
}

func (e *HookError) Error() string {
	if e.Err == nil {
		return "policy hook " + e.Problem
	}
	return "policy hook " + e.Problem + ": " + e.Err.Error()
}

// Unwrap returns the cause, for the log.
func (e *HookError) Unwrap() error { return e.Err }

// Check POSTs a to the hook and returns its decision.
func (w *Webhook) Check(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return api.PolicyDecision{}, &HookError{Problem: "could not be asked", Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return api.PolicyDecision{}, &HookError{Problem: "could not be asked", Err: err}
	}
	req.Header.Set("Content-Type", api.ContentJSON)
	req.Header.Set("Accept", api.ContentJSON)
	req.Header.Set("User-Agent", "execbox-policy/"+strconv.Itoa(api.PolicyVersion))
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	if a.RequestID != "" {
		req.Header.Set("X-Request-ID", a.RequestID)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return api.PolicyDecision{}, w.failed(ctx, "is unreachable", err) // err names the URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDecisionBody+1))
	switch {
	case err != nil:
		return api.PolicyDecision{}, w.failed(ctx, "broke off its answer", fmt.Errorf("POST %s: %w", w.url, err))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return api.PolicyDecision{}, &HookError{Problem: "answered " + resp.Status, Err: fmt.Errorf("POST %s: %s", w.url, snippet(b))}
	case len(b) > maxDecisionBody:
		return api.PolicyDecision{}, &HookError{Problem: "answered more than 64 KiB", Err: fmt.Errorf("POST %s", w.url)}
	}
	d, err := decodeDecision(b)
	if err != nil {
		return api.PolicyDecision{}, &HookError{Problem: `answered no {"allow": true|false}`, Err: fmt.Errorf("POST %s: %w: %s", w.url, err, snippet(b))}
	}
	return d, nil
}

// failed describes a request that did not complete: timed out if ctx's
// deadline (the hook's timeout) passed.
func (w *Webhook) failed(ctx context.Context, problem string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		problem = "timed out after " + w.timeout.String()
	}
	return &HookError{Problem: problem, Err: err}
}

// CloseIdleConnections closes the connections kept to the hook.
func (w *Webhook) CloseIdleConnections() { w.client.CloseIdleConnections() }

// snippet is the start of a hook's answer, for the log.
func snippet(b []byte) string {
	s, cut := clip(string(b), 200)
	if cut {
		s += "..."
	}
	return strconv.Quote(s)
}

// decodeDecision decodes a hook's answer: a JSON object whose "allow"
// (exactly so named) is true or false, with an optional string
// "reason"; other members are ignored, for decisions that grow.
func decodeDecision(b []byte) (api.PolicyDecision, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return api.PolicyDecision{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return api.PolicyDecision{}, errors.New("not a JSON object: data after it")
	}
	if m == nil {
		return api.PolicyDecision{}, errors.New("not a JSON object: null")
	}
	var d api.PolicyDecision
	switch string(bytes.TrimSpace(m["allow"])) {
	case "true":
		d.Allow = true
	case "false":
	case "":
		return d, errors.New(`"allow" is missing`)
	default:
		return d, errors.New(`"allow" is not true or false`)
	}
	if raw, ok := m["reason"]; ok {
		var reason *string
		if err := json.Unmarshal(raw, &reason); err != nil {
			return api.PolicyDecision{}, errors.New(`"reason" is not a string`)
		}
		if reason != nil {
			d.Reason = *reason
		}
	}
	return d, nil
}
