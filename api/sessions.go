package api

import (
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// SessionOptions is execbox.SessionOptions on the wire, the body of
// POST sessions.
type SessionOptions struct {
	Kind    execbox.SessionKind `json:"kind"`
	Command []string            `json:"command,omitempty"`

	Dir       string            `json:"dir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	EnvPolicy execbox.EnvPolicy `json:"env_policy,omitempty"`
	EnvAllow  []string          `json:"env_allow,omitempty"`
	Limits    *Limits           `json:"limits,omitempty"`
	User      *User             `json:"user,omitempty"`

	Rows        int   `json:"rows,omitempty"`
	Cols        int   `json:"cols,omitempty"`
	EventWindow int64 `json:"event_window,omitempty"`
	// FlowControl: see execbox.SessionOptions (revision 7).
	FlowControl bool `json:"flow_control,omitempty"`

	GracePeriodMS float64 `json:"grace_period_ms,omitempty"`
}

// NewSessionOptions returns o for the wire.
func NewSessionOptions(o execbox.SessionOptions) SessionOptions {
	return SessionOptions{
		Kind: o.Kind, Command: o.Command, Dir: o.Dir,
		Env: o.Env, EnvPolicy: o.EnvPolicy, EnvAllow: o.EnvAllow,
		Limits: NewLimits(o.Limits), User: newUser(o.User),
		Rows: o.Rows, Cols: o.Cols, EventWindow: o.EventWindow, FlowControl: o.FlowControl,
		GracePeriodMS: millis(o.GracePeriod),
	}
}

// SessionOptions returns o as execbox.SessionOptions. It checks only what
// the wire adds (durations in range); execbox.SessionOptions.Validate
// checks the rest.
func (o *SessionOptions) SessionOptions() (execbox.SessionOptions, error) {
	grace, err1 := duration("grace_period", o.GracePeriodMS)
	limits, err2 := o.Limits.Limits("limits.")
	return execbox.SessionOptions{
		Kind: o.Kind, Command: o.Command, Dir: o.Dir,
		Env: o.Env, EnvPolicy: o.EnvPolicy, EnvAllow: o.EnvAllow,
		Limits: limits, User: o.User.user(),
		Rows: o.Rows, Cols: o.Cols, EventWindow: o.EventWindow, FlowControl: o.FlowControl,
		GracePeriod: grace,
	}, joinErrs(err1, err2)
}

// SessionInfo is execbox.SessionInfo on the wire: the body of POST
// sessions (201) and GET sessions/{id}.
type SessionInfo struct {
	ID   string              `json:"id"`
	Kind execbox.SessionKind `json:"kind"`
	// Command is the program as started, resolved.
	Command   []string  `json:"command"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Busy: a run is in progress or queued.
	Busy bool `json:"busy,omitempty"`
	// Exited: the interpreter has ended; only wait and DELETE still work.
	Exited bool `json:"exited,omitempty"`
}

// NewSessionInfo returns i for the wire.
func NewSessionInfo(i execbox.SessionInfo) SessionInfo {
	return SessionInfo{ID: i.ID, Kind: i.Kind, Command: i.Command, CreatedAt: i.Created, Busy: i.Busy, Exited: i.Exited}
}

// SessionInfo returns i as an execbox.SessionInfo.
func (i SessionInfo) SessionInfo() execbox.SessionInfo {
	return execbox.SessionInfo{ID: i.ID, Kind: i.Kind, Command: i.Command, Created: i.CreatedAt, Busy: i.Busy, Exited: i.Exited}
}

// SessionList is the body of GET sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionRequest is execbox.SessionRequest on the wire, the body of
// POST sessions/{id}/run.
type SessionRequest struct {
	Code string `json:"code"`
	// Stdin is the whole standard input, for small inputs. Larger or
	// streamed input goes in the "stdin" part of a multipart request.
	Stdin       *Payload `json:"stdin,omitempty"`
	TimeoutMS   float64  `json:"timeout_ms,omitempty"`
	OutputLimit int64    `json:"output_limit,omitempty"`
}

// NewSessionRequest returns r for the wire. r.Stdin is not carried: send
// it as a stream (see SessionRequest.Stdin).
func NewSessionRequest(r execbox.SessionRequest) SessionRequest {
	return SessionRequest{Code: r.Code, TimeoutMS: millis(r.Timeout), OutputLimit: r.OutputLimit}
}

// SessionRequest returns r as an execbox.SessionRequest, with Stdin
// reading r.Stdin when set. It checks only what the wire adds;
// execbox.SessionRequest.Validate checks the rest.
func (r *SessionRequest) SessionRequest() (execbox.SessionRequest, error) {
	timeout, err1 := duration("timeout", r.TimeoutMS)
	req := execbox.SessionRequest{Code: r.Code, Timeout: timeout, OutputLimit: r.OutputLimit}
	var err2 error
	if r.Stdin != nil {
		if r.Stdin.Text != "" && r.Stdin.Data != nil {
			err2 = execbox.Invalid("stdin", "has both text and data")
		}
		req.Stdin = strings.NewReader(string(r.Stdin.Bytes()))
	}
	return req, joinErrs(err1, err2)
}

// Exception is execbox.Exception on the wire: an exception a Python cell
// raised.
type Exception struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// SessionResult is execbox.SessionResult on the wire.
type SessionResult struct {
	Reason     execbox.Reason `json:"reason"`
	ExitCode   int            `json:"exit_code"`
	Stdout     Output         `json:"stdout"`
	Stderr     Output         `json:"stderr"`
	Value      string         `json:"value,omitempty"`
	Exception  *Exception     `json:"exception,omitempty"`
	DurationMS float64        `json:"duration_ms"`
}

// NewSessionResult returns r for the wire.
func NewSessionResult(r execbox.SessionResult) SessionResult {
	out := SessionResult{
		Reason: r.Reason, ExitCode: r.ExitCode,
		Stdout: NewOutput(r.Stdout), Stderr: NewOutput(r.Stderr),
		Value: r.Value, DurationMS: millis(r.Duration),
	}
	if e := r.Exception; e != nil {
		out.Exception = &Exception{Type: e.Type, Message: e.Message, Traceback: e.Traceback}
	}
	return out
}

// SessionResult returns r as an execbox.SessionResult. A duration out of
// range is clamped.
func (r SessionResult) SessionResult() execbox.SessionResult {
	out := execbox.SessionResult{
		Reason: r.Reason, ExitCode: r.ExitCode,
		Stdout: r.Stdout.Output(), Stderr: r.Stderr.Output(),
		Value: r.Value, Duration: clamp(r.DurationMS),
	}
	if e := r.Exception; e != nil {
		out.Exception = &execbox.Exception{Type: e.Type, Message: e.Message, Traceback: e.Traceback}
	}
	return out
}

// RunResponse is the body of a successful POST sessions/{id}/run. Error
// is set, with the Result of what the command did until then, when the
// run was cancelled (codes canceled and deadline_exceeded) or the
// interpreter ended during it (code closed: bash's exit, a session killed
// because a timed-out command would not stop, a session closed).
type RunResponse struct {
	Result SessionResult `json:"result"`
	Error  *Error        `json:"error,omitempty"`
}

// WriteResponse is the body of POST sessions/{id}/write.
type WriteResponse struct {
	// Written is the number of bytes typed into the terminal.
	Written int64 `json:"written"`
}

// ResizeRequest is the body of POST sessions/{id}/resize.
type ResizeRequest struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}
