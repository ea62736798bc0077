package server

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/code"
)

// The policy's view of each action (api.PolicyAction), built only when
// a policy is set: each call site checks Options.Policy first, so a
// server without one pays a nil check.

// Bounds of single names in an action (env names, label keys and
// values), besides api.PolicyMaxText and api.PolicyMaxItems.
const (
	policyMaxName  = 256
	policyMaxValue = 1024
)

// action returns an action on s of kind.
func (s *sandbox) action(kind api.ActionKind) *api.PolicyAction {
	a := &api.PolicyAction{Kind: kind, Sandbox: api.ActionSandbox{ID: s.info.ID, Runtime: s.runtime}}
	a.Sandbox.Labels = clipLabels(a, s.info.Labels)
	return a
}

func (s *sandbox) checkPolicy(r *http.Request, a *api.PolicyAction) error {
	return checkPolicy(r, s.opts, s.log, a)
}

// allowExec asks the policy about an exec or a started process (kind).
func (s *sandbox) allowExec(r *http.Request, kind api.ActionKind, req *execbox.ExecRequest) error {
	a := s.action(kind)
	a.Command = actionCommand(a, req)
	if kind == api.ActionStart && req.Stdin == nil {
		// Its stdin stays open, to be fed by POST processes/{p}/stdin,
		// which is not asked about: a stdin streamed later, as a
		// multipart exec's is streamed now.
		a.Command.StdinSize = -1
	}
	return s.checkPolicy(r, a)
}

// allowSessionOpen asks the policy about opening a session.
func (s *sandbox) allowSessionOpen(r *http.Request, o *execbox.SessionOptions) error {
	a := s.action(api.ActionSessionOpen)
	a.Session = &api.SessionAction{Kind: o.Kind}
	a.Command = &api.ActionCommand{
		Command: clipArgv(a, o.Command), Dir: o.Dir,
		EnvNames: envNames(a, o.Env), EnvPolicy: o.EnvPolicy, EnvAllow: clipNames(a, o.EnvAllow),
		User: actionUser(o.User), Limits: api.NewLimits(o.Limits),
	}
	if o.Kind == execbox.SessionPTY {
		a.Command.StdinSize = -1 // typed into, POST sessions/{s}/write
	}
	return s.checkPolicy(r, a)
}

// allowRun asks the policy about a run in sess.
func (s *sandbox) allowRun(r *http.Request, sess execbox.Session, req *execbox.SessionRequest) error {
	a := s.action(api.ActionSessionRun)
	sa := &api.SessionAction{ID: sess.ID(), Kind: sess.Kind(), TimeoutMS: ms(req.Timeout)}
	sa.Code = clipText(a, req.Code)
	sa.StdinSize, sa.Stdin = stdinPreview(a, req.Stdin)
	a.Session = sa
	return s.checkPolicy(r, a)
}

// allowFile asks the policy about a change of files (kind); content is
// what a write writes.
func (s *sandbox) allowFile(r *http.Request, kind api.ActionKind, f api.FileAction, content []byte) error {
	a := s.action(kind)
	f.Path = clipText(a, f.Path)
	if content != nil {
		f.Size = int64(len(content))
		// Past PolicyMaxText+UTFMax bytes, clipText cuts (and says so).
		f.Content = clipText(a, string(content[:min(len(content), api.PolicyMaxText+utf8.UTFMax)]))
	}
	a.File = &f
	return s.checkPolicy(r, a)
}

// fileMode is m for a FileAction: octal, "" for the default.
func fileMode(m fs.FileMode) string {
	if m == 0 {
		return ""
	}
	return api.FormatMode(m)
}

// allowCreate asks the policy about a create of spec by runtime.
func (s *Server) allowCreate(r *http.Request, runtime string, spec *execbox.Spec) error {
	a := &api.PolicyAction{Kind: api.ActionCreate, Sandbox: api.ActionSandbox{Runtime: runtime}}
	a.Sandbox.Labels = clipLabels(a, spec.Labels)
	c := &api.CreateAction{
		Pool: spec.Pool, Image: clipText(a, spec.Image), Workspace: clipText(a, spec.Workspace),
		EnvNames: envNames(a, spec.Env), EnvPolicy: spec.EnvPolicy, EnvAllow: clipNames(a, spec.EnvAllow),
		Limits: api.NewLimits(spec.Limits), User: actionUser(spec.User),
	}
	for i, as := range spec.Assets {
		if i == api.PolicyMaxItems {
			a.Truncated = true
			break
		}
		aa := api.ActionAsset{Path: clipText(a, as.Path), Source: clipText(a, as.Source), Size: int64(len(as.Content))}
		if as.Content == nil {
			aa.Size = -1
		}
		if as.Mode != 0 {
			aa.Mode = fmt.Sprintf("%04o", as.Mode) // as on the wire
		}
		c.Assets = append(c.Assets, aa)
	}
	for i := range spec.Setup {
		if i == api.PolicyMaxItems {
			a.Truncated = true
			break
		}
		c.Setup = append(c.Setup, *actionCommand(a, &spec.Setup[i]))
	}
	a.Create = c
	return checkPolicy(r, &s.opts, s.log, a)
}

// actionCommand is req as the policy sees it.
func actionCommand(a *api.PolicyAction, req *execbox.ExecRequest) *api.ActionCommand {
	c := &api.ActionCommand{
		Command: clipArgv(a, req.Command), Shell: clipText(a, req.Shell), Dir: clipText(a, req.Dir),
		EnvNames: envNames(a, req.Env), EnvPolicy: req.EnvPolicy, EnvAllow: clipNames(a, req.EnvAllow),
		User: actionUser(req.User), Limits: api.NewLimits(req.Limits), TimeoutMS: ms(req.Timeout),
	}
	c.StdinSize, c.Stdin = stdinPreview(a, req.Stdin)
	return c
}

func actionUser(u *execbox.User) *api.User {
	if u == nil {
		return nil
	}
	return &api.User{UID: u.UID, GID: u.GID, Groups: u.Groups}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// stdinPreview returns the size and beginning of a stdin given whole in
// the request (a *strings.Reader, read without moving it), or -1 and ""
// for a streamed one.
func stdinPreview(a *api.PolicyAction, in io.Reader) (int64, string) {
	switch sr := in.(type) {
	case nil:
		return 0, ""
	case *strings.Reader:
		buf := make([]byte, min(sr.Size(), api.PolicyMaxText+utf8.UTFMax))
		n, _ := sr.ReadAt(buf, 0)
		text, cut := clip(string(buf[:n]), api.PolicyMaxText)
		a.Truncated = a.Truncated || cut
		return sr.Size(), text
	default:
		return -1, ""
	}
}

// clip cuts s to at most n bytes, at a UTF-8 boundary, and reports
// whether it did.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// clipText clips s to api.PolicyMaxText, noting a cut in a.
func clipText(a *api.PolicyAction, s string) string {
	s, cut := clip(s, api.PolicyMaxText)
	a.Truncated = a.Truncated || cut
	return s
}

// clipArgv bounds argv to api.PolicyMaxText bytes in all and
// api.PolicyMaxItems arguments, noting a cut in a.
func clipArgv(a *api.PolicyAction, argv []string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, 0, min(len(argv), api.PolicyMaxItems))
	left := api.PolicyMaxText
	for i, arg := range argv {
		if i == api.PolicyMaxItems || left == 0 {
			a.Truncated = true
			break
		}
		arg, cut := clip(arg, left)
		a.Truncated = a.Truncated || cut
		left -= len(arg)
		out = append(out, arg)
	}
	return out
}

// clipNames bounds a list of names to api.PolicyMaxItems of
// policyMaxName bytes each, noting a cut in a.
func clipNames(a *api.PolicyAction, names []string) []string {
	if len(names) > api.PolicyMaxItems {
		names = names[:api.PolicyMaxItems]
		a.Truncated = true
	}
	var out []string
	for _, n := range names {
		n, cut := clip(n, policyMaxName)
		a.Truncated = a.Truncated || cut
		out = append(out, n)
	}
	return out
}

// envNames returns the sorted names of env, bounded as clipNames does.
func envNames(a *api.PolicyAction, env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	return clipNames(a, slices.Sorted(maps.Keys(env)))
}

// clipLabels bounds labels to the api.PolicyMaxItems first keys in
// order, each key and value clipped, noting a cut in a.
func clipLabels(a *api.PolicyAction, labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(labels))
	if len(keys) > api.PolicyMaxItems {
		keys = keys[:api.PolicyMaxItems]
		a.Truncated = true
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		v, cut1 := clip(labels[k], policyMaxValue)
		ck, cut2 := clip(k, policyMaxName)
		a.Truncated = a.Truncated || cut1 || cut2
		out[ck] = v
	}
	return out
}

// allowCode asks the policy about a program run by package code.
func (s *sandbox) allowCode(r *http.Request, req *code.Request) error {
	a := s.action(api.ActionCodeRun)
	c := &api.CodeAction{
		Language: clipText(a, string(req.Language)), Source: clipText(a, req.Source),
		Args: clipArgv(a, req.Args), EnvNames: envNames(a, req.Env),
		Limits: api.NewLimits(req.Limits), TimeoutMS: ms(req.Timeout),
	}
	for i, f := range req.Files {
		if i == api.PolicyMaxItems {
			a.Truncated = true
			break
		}
		c.Files = append(c.Files, api.ActionAsset{Path: clipText(a, f.Path), Size: int64(len(f.Content)), Mode: fileMode(f.Mode)})
	}
	c.StdinSize, c.Stdin = stdinPreview(a, req.Stdin)
	a.Code = c
	return s.checkPolicy(r, a)
}

// allowGit asks the policy about a git operation op with body (its
// credentials' token left out). Every operation is asked about, the
// ones that only read too: git status, diff and log run programs the
// repository's own config names (core.fsmonitor, clean filters,
// textconv drivers), which code in the sandbox may have written, so
// they are not read-only as far as a policy is concerned.
func (s *sandbox) allowGit(r *http.Request, op string, body api.GitRequest) error {
	a := s.action(api.ActionGit + api.ActionKind(op))
	a.Git = &api.GitAction{Op: op, Request: api.PolicyGitRequest(body)}
	return s.checkPolicy(r, a)
}
