package api

import (
	"encoding/json"
	"time"

	"github.com/execbox/execbox"
)

// PolicyVersion is the version of the PolicyAction schema: a policy
// hook receives it in every action. Within a version the schema only
// grows (fields and kinds are added); a hook ignores fields it does not
// know, and should deny kinds it does not know.
const PolicyVersion = 1

// ActionKind names what a PolicyAction asks to do.
type ActionKind string

// Action kinds: every call of a server that makes a sandbox, runs
// something in one or changes its files.
const (
	ActionCreate      ActionKind = "create"       // POST /v1/sandboxes
	ActionExec        ActionKind = "exec"         // POST B exec
	ActionStart       ActionKind = "start"        // POST B processes
	ActionSessionOpen ActionKind = "session.open" // POST B sessions
	ActionSessionRun  ActionKind = "session.run"  // POST B sessions/{id}/run
	ActionFileWrite   ActionKind = "file.write"   // PUT B files
	ActionFileUpload  ActionKind = "file.upload"  // PUT B files/tar
	ActionFileMkdir   ActionKind = "file.mkdir"   // POST B files/mkdir
	ActionFileRemove  ActionKind = "file.remove"  // DELETE B files
	ActionCodeRun     ActionKind = "code.run"     // POST B code
	// ActionGit is "git." and the operation: git.clone, git.commit,
	// git.push, git.status, ... (POST B git/{op}); every operation is
	// asked about, the reading ones too, since git status and diff run
	// programs the repository's config names (core.fsmonitor, filters).
	ActionGit ActionKind = "git."
)

// Bounds of what a PolicyAction carries: a text field (argv as a whole,
// a shell line, code, a stdin or content preview) is cut at
// PolicyMaxText bytes (at a UTF-8 boundary) and a list or map (env
// names, labels, assets, setup commands) at PolicyMaxItems entries; the
// action then says Truncated.
const (
	PolicyMaxText  = 16 << 10
	PolicyMaxItems = 256
)

// PolicyAction is what a server asks its policy about, before doing it:
// the body a policy webhook receives. Exactly one of Create, Command
// (with Session for session.open), Session and File describes the
// action, by Kind.
type PolicyAction struct {
	// Version is PolicyVersion.
	Version int        `json:"version"`
	Kind    ActionKind `json:"kind"`
	// Time is when the server asked.
	Time time.Time `json:"time"`
	// RequestID is the request's ID: its X-Request-ID header when valid,
	// else the one the server gave it (echoed in the response).
	RequestID string `json:"request_id,omitempty"`
	// Tenant is the name of the API key the request came with, on a
	// server with tenants.
	Tenant string `json:"tenant,omitempty"`
	// Sandbox is the sandbox acted on; for create, its runtime and
	// labels (it has no ID yet).
	Sandbox ActionSandbox `json:"sandbox"`
	// Truncated: some text or list in the action was cut at
	// PolicyMaxText or PolicyMaxItems. A strict policy denies it.
	Truncated bool `json:"truncated,omitempty"`

	Create  *CreateAction  `json:"create,omitempty"`
	Command *ActionCommand `json:"command,omitempty"`
	Session *SessionAction `json:"session,omitempty"`
	File    *FileAction    `json:"file,omitempty"`
	Code    *CodeAction    `json:"code,omitempty"`
	Git     *GitAction     `json:"git,omitempty"`
}

// CodeAction is a program about to be run by package code (POST code):
// probed for, compiled if its language is, and run.
type CodeAction struct {
	Language string `json:"language"`
	// Source is the program's beginning.
	Source string `json:"source"`
	// Files are the other files written beside it: path and size.
	Files     []ActionAsset `json:"files,omitempty"`
	Args      []string      `json:"args,omitempty"`
	EnvNames  []string      `json:"env_names,omitempty"` // sorted
	Limits    *Limits       `json:"limits,omitempty"`
	TimeoutMS float64       `json:"timeout_ms,omitempty"`
	// StdinSize and Stdin are as in ActionCommand.
	StdinSize int64  `json:"stdin_size,omitempty"`
	Stdin     string `json:"stdin,omitempty"`
}

// GitAction is a git operation about to run (POST git/{op}).
type GitAction struct {
	Op string `json:"op"`
	// Request is the operation's body (the Git*Request of Op) as the
	// client sent it, without the credentials' token: a policy sees
	// where a push goes (credentials.url), never the secret.
	Request json.RawMessage `json:"request"`
}

// PolicyGitRequest returns r as GitAction.Request: its JSON without the
// credentials' token.
func PolicyGitRequest(r GitRequest) json.RawMessage {
	s := r.settings()
	if cr := s.Credentials; cr != nil {
		c := *cr
		c.Token = ""
		s.Credentials = &c
		defer func() { s.Credentials = cr }()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return json.RawMessage("null") // the wire types always encode
	}
	return b
}

// ActionSandbox identifies the sandbox of an action.
type ActionSandbox struct {
	ID      string            `json:"id,omitempty"`
	Runtime string            `json:"runtime"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// ActionCommand is a process about to start: an exec, a started
// process, a setup command of a create, or a session's interpreter.
// Environment variables are given by name only: their values often hold
// secrets (API keys) that a policy service has no need to see.
type ActionCommand struct {
	// Command is the argv, or empty for a shell line (and for a session
	// of the kind's default interpreter).
	Command []string `json:"command,omitempty"`
	// Shell is the shell line run by /bin/sh -c.
	Shell     string            `json:"shell,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	EnvNames  []string          `json:"env_names,omitempty"` // sorted
	EnvPolicy execbox.EnvPolicy `json:"env_policy,omitempty"`
	EnvAllow  []string          `json:"env_allow,omitempty"`
	User      *User             `json:"user,omitempty"`
	Limits    *Limits           `json:"limits,omitempty"`
	TimeoutMS float64           `json:"timeout_ms,omitempty"`
	// StdinSize is the size of the stdin given in the request, 0 for
	// none, and -1 when input can reach the process that the policy is
	// not shown: a streamed stdin (its size is not known), a started
	// process without a stdin in its request (its stdin stays open for
	// stdin writes), a PTY session's interpreter (typed into). Stdin is
	// its beginning, as text (bytes that are not UTF-8 become U+FFFD).
	StdinSize int64  `json:"stdin_size,omitempty"`
	Stdin     string `json:"stdin,omitempty"`
}

// CreateAction is a sandbox about to be made, from its spec.
type CreateAction struct {
	// Pool is the warm pool a create takes its sandbox from; the other
	// fields are then the request's, which the pool's template fills.
	Pool  string `json:"pool,omitempty"`
	Image string `json:"image,omitempty"`
	// Workspace is a host directory, on a server that allows host paths.
	Workspace string            `json:"workspace,omitempty"`
	EnvNames  []string          `json:"env_names,omitempty"` // sorted
	EnvPolicy execbox.EnvPolicy `json:"env_policy,omitempty"`
	EnvAllow  []string          `json:"env_allow,omitempty"`
	Limits    *Limits           `json:"limits,omitempty"`
	User      *User             `json:"user,omitempty"`
	Assets    []ActionAsset     `json:"assets,omitempty"`
	// Setup are the setup commands, run in the new sandbox before the
	// create answers; they are not asked about again one by one.
	Setup []ActionCommand `json:"setup,omitempty"`
}

// ActionAsset is a file a create places in the workspace.
type ActionAsset struct {
	Path string `json:"path"`
	// Source is a host path, on a server that allows host paths.
	Source string `json:"source,omitempty"`
	// Size is the content's size, -1 for a source (not read yet).
	Size int64  `json:"size"`
	Mode string `json:"mode,omitempty"`
}

// SessionAction is a session about to open (with the interpreter in
// PolicyAction.Command) or a run in one.
type SessionAction struct {
	// ID is the session's, for a run.
	ID   string              `json:"id,omitempty"`
	Kind execbox.SessionKind `json:"kind"`
	// Code is the command or cell a run sends to the interpreter.
	Code      string  `json:"code,omitempty"`
	TimeoutMS float64 `json:"timeout_ms,omitempty"`
	// StdinSize and Stdin are as in ActionCommand.
	StdinSize int64  `json:"stdin_size,omitempty"`
	Stdin     string `json:"stdin,omitempty"`
}

// FileAction is a change to the workspace's files.
type FileAction struct {
	// Path is the file (write, mkdir, remove) or the directory a tar
	// stream is unpacked in (upload), as the request gave it.
	Path string `json:"path"`
	// Size is the content's size (write) or the request body's (upload;
	// -1 when not known in advance).
	Size int64 `json:"size,omitempty"`
	// Mode is the mode asked for (write, mkdir), octal.
	Mode      string `json:"mode,omitempty"`
	Parents   bool   `json:"parents,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	// Content is the beginning of what a write writes, as text (bytes
	// that are not UTF-8 become U+FFFD).
	Content string `json:"content,omitempty"`
}

// PolicyDecision is a policy's answer: the body a policy webhook
// returns. A denial's Reason reaches the caller in the
// permission_denied error.
type PolicyDecision struct {
	Allow  bool   `json:"allow"`
	Reason string `json:"reason,omitempty"`
}
