package git

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// call is one git command.
type call struct {
	op     string   // what the caller asked for: "clone", "push", ...
	dir    string   // working directory, relative to the workspace
	args   []string // after "git" and the -c options
	config []string // non-secret "key=value" settings, passed with -c
	stdin  io.Reader

	// urls are the remote URLs the command talks to; credentials are
	// attached when one of them is under Credentials.URL.
	urls []string
	// remote is the remote named in args (fetch, push, pull): a name, or
	// a URL.
	remote string

	author, committer *Signature

	okExit  []int         // non-zero exit codes that are not failures
	parsed  bool          // stdout is parsed: truncation is an error
	timeout time.Duration // zero: Options.Timeout
	locks   bool          // false sets GIT_OPTIONAL_LOCKS=0 (read-only commands)
	// checked: the repository's config was checked for the host, or
	// this is the command that checks it (checkHostConfig).
	checked bool
}

// git runs one git command and returns its result with every secret
// redacted. A command that does not exit 0 (or with a code in okExit) is
// an *Error; a failure to run it at all is the sandbox's error, wrapped.
func (c *Client) git(ctx context.Context, cl call) (execbox.Result, error) {
	if c.host && !cl.checked {
		if err := c.checkHostConfig(ctx, cl); err != nil {
			return execbox.Result{}, err
		}
	}
	withAuth := c.auth != nil && slices.ContainsFunc(cl.urls, c.auth.matches)
	argv := []string{c.opts.Git}
	cfg := cl.config
	if c.host {
		cfg = append(slices.Clip(cfg), hostHardening...)
	}
	if withAuth {
		cfg = append(slices.Clip(cfg), c.auth.hardening()...)
		cfg = append(cfg, noProxy(cl)...)
	}
	for _, kv := range cfg {
		argv = append(argv, "-c", kv)
	}
	argv = append(argv, cl.args...)

	timeout := c.opts.Timeout
	if cl.timeout != 0 {
		timeout = cl.timeout
	}
	req := execbox.ExecRequest{
		Command:     argv,
		Dir:         cl.dir,
		Env:         c.env(cl, withAuth),
		EnvPolicy:   c.opts.EnvPolicy,
		EnvAllow:    c.opts.EnvAllow,
		Stdin:       cl.stdin,
		Timeout:     timeout,
		OutputLimit: c.opts.OutputLimit,
	}
	start := time.Now()
	res, err := c.sb.Exec(ctx, req)
	c.redac.result(&res)
	shown := c.redac.strings(argv[1:])
	c.log.Debug("git", "op", cl.op, "dir", cl.dir, "args", shown, "auth", withAuth,
		"outcome", res.String(), "duration", time.Since(start))
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("git %s: %w", cl.op, err)
		}
		var fe *execbox.FieldError
		if errors.As(err, &fe) && fe.Field == "dir" && errors.Is(err, execbox.ErrNotFound) {
			return res, &Error{Op: cl.op, Dir: cl.dir, Args: shown, Result: res, Kind: ErrNotRepository,
				Message: fmt.Sprintf("%s does not exist", cl.dir)}
		}
		if errors.As(err, &fe) && fe.Field == "command[0]" && errors.Is(err, execbox.ErrNotFound) {
			return res, fmt.Errorf("git %s: git is not installed where the sandbox runs commands (%s): %w", cl.op, fe.Problem, execbox.ErrUnavailable)
		}
		return res, fmt.Errorf("git %s: %w", cl.op, c.redac.err(err))
	}
	if !res.Success() && !(res.Reason == execbox.ReasonExited && slices.Contains(cl.okExit, res.ExitCode)) {
		return res, newError(cl.op, cl.dir, shown, res)
	}
	if cl.parsed && res.Stdout.Truncated() {
		return res, fmt.Errorf("git %s: output of %d bytes exceeds the output limit: %w", cl.op, res.Stdout.Total, execbox.ErrResourceExhausted)
	}
	return res, nil
}

// env returns the variables of a git command: the caller's Options.Env,
// then the ones that isolate git from the host and the workspace, then
// identity and credentials.
func (c *Client) env(cl call, withAuth bool) map[string]string {
	env := make(map[string]string, len(c.opts.Env)+24)
	for k, v := range c.opts.Env {
		env[k] = v
	}
	home := c.opts.Home
	for k, v := range map[string]string{
		// No config, ignore or attributes file but the repository's.
		"HOME":                home,
		"XDG_CONFIG_HOME":     path.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_CONFIG_GLOBAL":   "/dev/null",
		// Never wait for a person.
		"GIT_TERMINAL_PROMPT": "0",
		"GIT_ASKPASS":         "",
		"SSH_ASKPASS":         "",
		"GIT_EDITOR":          ":",
		"GIT_SEQUENCE_EDITOR": ":",
		"GIT_MERGE_AUTOEDIT":  "no",
		"GIT_PAGER":           "cat",
		"PAGER":               "cat",
		// Messages are classified by their English text.
		"LC_ALL": "C",
	} {
		env[k] = v
	}
	if !cl.locks {
		env["GIT_OPTIONAL_LOCKS"] = "0"
	}
	if a := cl.author; a != nil {
		env["GIT_AUTHOR_NAME"], env["GIT_AUTHOR_EMAIL"] = a.Name, a.Email
	}
	if cm := cl.committer; cm != nil {
		env["GIT_COMMITTER_NAME"], env["GIT_COMMITTER_EMAIL"] = cm.Name, cm.Email
	}
	if withAuth {
		// Tracing could print headers: make sure none is on. Not
		// GIT_CURL_VERBOSE: git turns curl's trace on when it is set at
		// all, "0" included (and GIT_TRACE_CURL=0 does not turn it off);
		// the environment of a command is clean unless Options say
		// otherwise, so it is left unset.
		for _, k := range []string{"GIT_TRACE", "GIT_TRACE_CURL", "GIT_TRACE_PACKET", "GIT_TRACE_SETUP",
			"GIT_TRACE_PERFORMANCE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF"} {
			env[k] = "0"
		}
		env["GIT_TRACE_REDACT"] = "1"
		env["GIT_CONFIG_COUNT"] = "1"
		env["GIT_CONFIG_KEY_0"] = "http." + c.auth.scope.String() + ".extraHeader"
		env["GIT_CONFIG_VALUE_0"] = c.auth.header
	}
	return env
}

// auth is the credentials, ready to use.
type auth struct {
	scope   *url.URL // Credentials.URL, parsed
	header  string   // "Authorization: Basic ..."
	secrets []string // every form the token could be printed in
}

func newAuth(cr *Credentials) (*auth, error) {
	var errs []error
	u, err := url.Parse(cr.URL)
	switch {
	case cr.URL == "":
		errs = append(errs, execbox.Invalid("credentials.url", "is required: the token is only sent to remotes under it"))
	case err != nil:
		// url.Parse errors quote the URL; it carries no secret by the
		// check below, but be safe and do not echo it.
		errs = append(errs, execbox.Invalid("credentials.url", "is not a URL"))
	case u.Scheme != "https" && u.Scheme != "http":
		errs = append(errs, execbox.Invalid("credentials.url", "scheme must be https or http, not %q", u.Scheme))
	case u.Host == "":
		errs = append(errs, execbox.Invalid("credentials.url", "has no host"))
	case u.User != nil:
		errs = append(errs, execbox.Invalid("credentials.url", "must not carry a user or password: use username and token"))
	case u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, execbox.Invalid("credentials.url", "must not have a query or fragment"))
	case strings.ContainsAny(cr.URL, " \t\n\r\x00"):
		errs = append(errs, execbox.Invalid("credentials.url", "must not contain whitespace"))
	}
	if cr.Token == "" {
		errs = append(errs, execbox.Invalid("credentials.token", "is required"))
	} else if strings.ContainsAny(cr.Token, "\r\n\x00") {
		errs = append(errs, execbox.Invalid("credentials.token", "contains a line break or NUL byte"))
	}
	user := cr.Username
	if user == "" {
		user = "x-access-token"
	}
	if strings.ContainsAny(user, ":\r\n\x00") {
		errs = append(errs, execbox.Invalid("credentials.username", "contains ':', a line break or a NUL byte"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a := &auth{scope: u}
	if cr.Bearer {
		a.header = "Authorization: Bearer " + cr.Token
	} else {
		basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + cr.Token))
		a.header = "Authorization: Basic " + basic
		a.secrets = append(a.secrets, basic, base64.RawStdEncoding.EncodeToString([]byte(user+":"+cr.Token)))
	}
	a.secrets = append(a.secrets, cr.Token, url.QueryEscape(cr.Token), url.PathEscape(cr.Token), a.header)
	// Longest first, so a form containing another is replaced whole.
	slices.SortFunc(a.secrets, func(x, y string) int { return len(y) - len(x) })
	a.secrets = slices.Compact(a.secrets)
	return a, nil
}

// hardening is the configuration of a command that carries the token.
// The token travels in the environment of git and of every process git
// starts; these settings keep git from starting processes that the
// repository's own config (which code in the sandbox may have written)
// chooses, and from sending the token anywhere but HTTP(S).
func (a *auth) hardening() []string {
	return []string{
		"core.hooksPath=/dev/null", // no hooks (pre-push, reference-transaction, ...)
		"core.fsmonitor=false",
		"core.askPass=",
		"credential.helper=",   // forget configured helpers
		"protocol.allow=never", // only the credentials' scheme: no ssh, file or ext transport programs
		"protocol." + a.scope.Scheme + ".allow=always",
		"http." + a.scope.String() + ".sslVerify=true",
	}
}

// noProxy is the configuration that sends a command carrying the token
// straight to its remote. The repository's config (which code in the
// sandbox, or a mere file write, may change) could name a proxy or
// resolve the remote's host elsewhere, and the token would go there:
// http.proxy, http.<url>.proxy (the most specific URL wins, so each
// remote URL exactly: a tie goes to the command line, read last),
// remote.<name>.proxy (over both) and http.curloptResolve (an empty
// value resets the list). An empty proxy turns proxying off.
func noProxy(cl call) []string {
	cfg := []string{"http.proxy=", "http.curloptResolve="}
	for _, u := range cl.urls {
		cfg = append(cfg, "http."+u+".proxy=", "http."+u+".curloptResolve=")
	}
	if cl.remote != "" && !strings.Contains(cl.remote, ":") && !strings.Contains(cl.remote, "/") {
		cfg = append(cfg, "remote."+cl.remote+".proxy=")
	}
	return cfg
}

// matches reports whether the remote URL raw is under the credentials'
// URL, as git's http.<url>.* matching decides: same scheme and host
// (case-insensitive), same port (defaults filled in), and a path prefix
// ending at a '/'. A URL with a user name still matches; scp-like and
// local remotes never do.
func (a *auth) matches(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, a.scope.Scheme) {
		return false
	}
	if !strings.EqualFold(u.Hostname(), a.scope.Hostname()) || port(u) != port(a.scope) {
		return false
	}
	prefix := a.scope.EscapedPath()
	p := u.EscapedPath()
	if prefix == "" || prefix == "/" {
		return true
	}
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// redacted replaces each secret in output.
const redacted = "[REDACTED]"

// redactor removes the token from everything returned. A nil redactor
// (no credentials) changes nothing.
type redactor struct {
	secrets [][]byte
}

func newRedactor(a *auth) *redactor {
	if a == nil {
		return nil
	}
	r := &redactor{}
	for _, s := range a.secrets {
		if s != "" {
			r.secrets = append(r.secrets, []byte(s))
		}
	}
	return r
}

// bytes returns b with every secret replaced.
func (r *redactor) bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, s := range r.secrets {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, []byte(redacted))
		}
	}
	return b
}

func (r *redactor) string(s string) string {
	if r == nil {
		return s
	}
	return string(r.bytes([]byte(s)))
}

func (r *redactor) strings(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = r.string(s)
	}
	return out
}

// err returns err, or an error with err's text redacted when it held a
// secret. The replacement keeps the kind of err for errors.Is.
func (r *redactor) err(err error) error {
	if r == nil || err == nil {
		return err
	}
	msg := err.Error()
	if red := r.string(msg); red != msg {
		return &redactedError{msg: red, kind: kindOf(err)}
	}
	return err
}

// result redacts both streams of res in place. Where the middle of a
// stream was dropped, a secret cut by the gap is masked on both sides.
func (r *redactor) result(res *execbox.Result) {
	if r == nil {
		return
	}
	r.output(&res.Stdout)
	r.output(&res.Stderr)
	res.Detail = r.string(res.Detail)
}

func (r *redactor) output(o *execbox.Output) {
	if o.Omitted == 0 {
		o.Data = r.bytes(o.Data)
		return
	}
	at := min(max(o.OmittedAt, 0), len(o.Data))
	head := r.bytes(r.cutTail(o.Data[:at]))
	tail := r.bytes(r.cutHead(o.Data[at:]))
	o.Data = append(append(make([]byte, 0, len(head)+len(tail)), head...), tail...)
	o.OmittedAt = len(head)
}

// cutTail masks a beginning of a secret (4 bytes or more) that b ends with.
func (r *redactor) cutTail(b []byte) []byte {
	for _, s := range r.secrets {
		for n := len(s) - 1; n >= 4; n-- {
			if bytes.HasSuffix(b, s[:n]) {
				return append(b[:len(b)-n:len(b)-n], redacted...)
			}
		}
	}
	return b
}

// cutHead masks an end of a secret (4 bytes or more) that b starts with.
func (r *redactor) cutHead(b []byte) []byte {
	for _, s := range r.secrets {
		for n := len(s) - 1; n >= 4; n-- {
			if bytes.HasPrefix(b, s[len(s)-n:]) {
				return append([]byte(redacted), b[n:]...)
			}
		}
	}
	return b
}

// redactedError stands for an error whose text held a secret.
type redactedError struct {
	msg  string
	kind error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.kind }

// kindOf returns the execbox kind err matches, or nil.
func kindOf(err error) error {
	for _, k := range []error{execbox.ErrInvalidArgument, execbox.ErrNotFound, execbox.ErrClosed,
		execbox.ErrUnavailable, execbox.ErrUnsupported, execbox.ErrResourceExhausted, execbox.ErrPermission,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// atoi parses a decimal count git printed; garbage is 0.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
