package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/execbox/execbox"
)

// Payload carries raw bytes in exactly one of two fields: Text when they
// are valid UTF-8 (a JSON string, exact), Data (base64) otherwise. Both
// empty means no bytes. Readers take Data when it is set, else Text.
type Payload struct {
	Text string `json:"text,omitempty"`
	Data []byte `json:"data,omitempty"`
}

// NewPayload carries b as Text if it is valid UTF-8 and its JSON string
// is no longer than base64 would be, else as Data: NUL bytes and other
// control characters, valid UTF-8, become six bytes each in a JSON
// string, which would make the agent hold six times a command's output.
func NewPayload(b []byte) Payload {
	if IsText(b) {
		return Payload{Text: string(b)}
	}
	return Payload{Data: b}
}

// IsText reports whether b travels as a Payload's Text: it is valid UTF-8
// and its JSON string is no longer than its base64.
func IsText(b []byte) bool {
	_, ok := TextLen(b)
	return ok
}

// TextLen returns the length of b as a JSON string, quotes aside, and
// whether b travels as Text (IsText), in one pass over b for the length.
func TextLen(b []byte) (n int, ok bool) {
	if !utf8.Valid(b) {
		return 0, false
	}
	n = JSONStringLen(b)
	return n, n <= base64.StdEncoding.EncodedLen(len(b))
}

// JSONStringLen is the length of b (valid UTF-8) as encoding/json writes
// it in a string without HTML escaping (as the server does), quotes
// aside: control characters as \uXXXX (\n, \r and \t as two bytes), the
// quote and backslash as two.
func JSONStringLen(b []byte) int {
	n := len(b)
	for _, c := range b {
		switch {
		case c == '\n' || c == '\r' || c == '\t' || c == '"' || c == '\\':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// Bytes returns the bytes carried.
func (p Payload) Bytes() []byte {
	if p.Data != nil {
		return p.Data
	}
	if p.Text == "" {
		return nil
	}
	return []byte(p.Text)
}

// Limits is execbox.Limits on the wire.
type Limits struct {
	CPUTimeMS    float64 `json:"cpu_time_ms,omitempty"`
	FileSize     int64   `json:"file_size,omitempty"`
	OpenFiles    int64   `json:"open_files,omitempty"`
	AddressSpace int64   `json:"address_space,omitempty"`
	Memory       int64   `json:"memory,omitempty"`
	PIDs         int64   `json:"pids,omitempty"`
	CPUs         float64 `json:"cpus,omitempty"`
}

// NewLimits returns l for the wire, or nil when l is zero.
func NewLimits(l execbox.Limits) *Limits {
	if l == (execbox.Limits{}) {
		return nil
	}
	return &Limits{
		CPUTimeMS: millis(l.CPUTime), FileSize: l.FileSize, OpenFiles: l.OpenFiles,
		AddressSpace: l.AddressSpace, Memory: l.Memory, PIDs: l.PIDs, CPUs: l.CPUs,
	}
}

// Limits returns l as execbox.Limits (zero for nil). Field errors name
// Go fields under prefix.
func (l *Limits) Limits(prefix string) (execbox.Limits, error) {
	if l == nil {
		return execbox.Limits{}, nil
	}
	cpu, err := duration(prefix+"cpu_time", l.CPUTimeMS)
	return execbox.Limits{
		CPUTime: cpu, FileSize: l.FileSize, OpenFiles: l.OpenFiles,
		AddressSpace: l.AddressSpace, Memory: l.Memory, PIDs: l.PIDs, CPUs: l.CPUs,
	}, err
}

// User is execbox.User on the wire.
type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

func newUser(u *execbox.User) *User {
	if u == nil {
		return nil
	}
	return &User{UID: u.UID, GID: u.GID, Groups: u.Groups}
}

func (u *User) user() *execbox.User {
	if u == nil {
		return nil
	}
	return &execbox.User{UID: u.UID, GID: u.GID, Groups: u.Groups}
}

// ExecRequest is execbox.ExecRequest on the wire, the body of
// POST exec and POST processes.
type ExecRequest struct {
	Command []string `json:"command,omitempty"`
	Shell   string   `json:"shell,omitempty"`
	// Stdin is the whole standard input, for small inputs. Larger or
	// streamed input goes in the "stdin" part of a multipart exec
	// request, or through the stdin endpoint of a started process.
	Stdin *Payload `json:"stdin,omitempty"`

	Dir       string            `json:"dir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	EnvPolicy execbox.EnvPolicy `json:"env_policy,omitempty"`
	EnvAllow  []string          `json:"env_allow,omitempty"`

	TimeoutMS     float64 `json:"timeout_ms,omitempty"`
	GracePeriodMS float64 `json:"grace_period_ms,omitempty"`

	OutputLimit       int64 `json:"output_limit,omitempty"`
	KillOnOutputLimit bool  `json:"kill_on_output_limit,omitempty"`

	Limits *Limits `json:"limits,omitempty"`
	User   *User   `json:"user,omitempty"`

	EventWindow int64 `json:"event_window,omitempty"`
	// FlowControl: see execbox.ExecRequest (revision 7).
	FlowControl bool `json:"flow_control,omitempty"`
}

// NewExecRequest returns r for the wire. r.Stdin is not carried: send it
// as a stream (see ExecRequest.Stdin).
func NewExecRequest(r execbox.ExecRequest) ExecRequest {
	return ExecRequest{
		Command: r.Command, Shell: r.Shell, Dir: r.Dir,
		Env: r.Env, EnvPolicy: r.EnvPolicy, EnvAllow: r.EnvAllow,
		TimeoutMS: millis(r.Timeout), GracePeriodMS: millis(r.GracePeriod),
		OutputLimit: r.OutputLimit, KillOnOutputLimit: r.KillOnOutputLimit,
		Limits: NewLimits(r.Limits), User: newUser(r.User), EventWindow: r.EventWindow,
		FlowControl: r.FlowControl,
	}
}

// ExecRequest returns r as an execbox.ExecRequest, with Stdin reading
// r.Stdin when set. It checks only what the wire adds (durations in
// range); execbox.ExecRequest.Validate checks the rest.
func (r *ExecRequest) ExecRequest() (execbox.ExecRequest, error) {
	return r.execRequest("")
}

func (r *ExecRequest) execRequest(prefix string) (execbox.ExecRequest, error) {
	timeout, err1 := duration(prefix+"timeout", r.TimeoutMS)
	grace, err2 := duration(prefix+"grace_period", r.GracePeriodMS)
	limits, err3 := r.Limits.Limits(prefix + "limits.")
	req := execbox.ExecRequest{
		Command: r.Command, Shell: r.Shell, Dir: r.Dir,
		Env: r.Env, EnvPolicy: r.EnvPolicy, EnvAllow: r.EnvAllow,
		Timeout: timeout, GracePeriod: grace,
		OutputLimit: r.OutputLimit, KillOnOutputLimit: r.KillOnOutputLimit,
		Limits: limits, User: r.User.user(), EventWindow: r.EventWindow,
		FlowControl: r.FlowControl,
	}
	var err4 error
	if r.Stdin != nil {
		if r.Stdin.Text != "" && r.Stdin.Data != nil {
			err4 = execbox.Invalid(prefix+"stdin", "has both text and data")
		}
		req.Stdin = strings.NewReader(string(r.Stdin.Bytes()))
	}
	return req, joinErrs(err1, err2, err3, err4)
}

// Asset is execbox.Asset on the wire.
type Asset struct {
	// Source is a path on the server's host (refused unless the server
	// allows host paths).
	Source string `json:"source,omitempty"`
	// Content is the file's content; null or absent means unset, {} an
	// empty file.
	Content *Payload `json:"content,omitempty"`
	Path    string   `json:"path"`
	// Mode is octal, e.g. "0755"; empty means 0644.
	Mode string `json:"mode,omitempty"`
}

// Spec is execbox.Spec on the wire. Spec.Snapshot is not carried: upload
// it after creation (PUT files/tar?path=.).
type Spec struct {
	Workspace string `json:"workspace,omitempty"`
	// AllowSystemWorkspace is execbox.Spec.AllowSystemWorkspace.
	AllowSystemWorkspace bool `json:"allow_system_workspace,omitempty"`
	// Image is execbox.Spec.Image: a registry reference, or a path on
	// the server's machine (an OCI layout directory or image tarball).
	Image     string            `json:"image,omitempty"`
	Assets    []Asset           `json:"assets,omitempty"`
	Setup     []ExecRequest     `json:"setup,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	EnvPolicy execbox.EnvPolicy `json:"env_policy,omitempty"`
	EnvAllow  []string          `json:"env_allow,omitempty"`
	Limits    *Limits           `json:"limits,omitempty"`
	User      *User             `json:"user,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// TimeoutMS and IdleTimeoutMS are execbox.Spec.Timeout and
	// IdleTimeout, the sandbox's lifetimes, which the server enforces.
	TimeoutMS     float64 `json:"timeout_ms,omitempty"`
	IdleTimeoutMS float64 `json:"idle_timeout_ms,omitempty"`
	// Pool is execbox.Spec.Pool: take the sandbox from this warm pool
	// (GET /v1/pools).
	Pool string `json:"pool,omitempty"`
}

// NewSpec returns s for the wire. It fails for what cannot travel:
// Snapshot, and a setup command's Stdin.
func NewSpec(s execbox.Spec) (Spec, error) {
	out := Spec{
		Workspace: s.Workspace, Env: s.Env, EnvPolicy: s.EnvPolicy, EnvAllow: s.EnvAllow,
		Limits: NewLimits(s.Limits), User: newUser(s.User), Labels: s.Labels,
		AllowSystemWorkspace: s.AllowSystemWorkspace, Image: s.Image, Pool: s.Pool,
		TimeoutMS: millis(s.Timeout), IdleTimeoutMS: millis(s.IdleTimeout),
	}
	var errs []error
	if s.Snapshot != nil {
		errs = append(errs, &execbox.FieldError{Field: "snapshot", Problem: "cannot be sent in a create request; upload it to the new sandbox", Kind: execbox.ErrUnsupported})
	}
	for _, a := range s.Assets {
		w := Asset{Source: a.Source, Path: a.Path}
		if a.Content != nil {
			p := NewPayload(a.Content)
			w.Content = &p
		}
		if a.Mode != 0 {
			w.Mode = fmt.Sprintf("%04o", a.Mode)
		}
		out.Assets = append(out.Assets, w)
	}
	for i, r := range s.Setup {
		if r.Stdin != nil {
			errs = append(errs, &execbox.FieldError{Field: fmt.Sprintf("setup[%d].stdin", i), Problem: "a reader cannot be sent in a create request", Kind: execbox.ErrUnsupported})
		}
		out.Setup = append(out.Setup, NewExecRequest(r))
	}
	return out, joinErrs(errs...)
}

// Spec returns s as an execbox.Spec. It checks only what the wire adds;
// execbox.Spec.Validate checks the rest.
func (s *Spec) Spec() (execbox.Spec, error) {
	var errs []error
	limits, err := s.Limits.Limits("limits.")
	errs = append(errs, err)
	timeout, err := duration("timeout", s.TimeoutMS)
	errs = append(errs, err)
	idle, err := duration("idle_timeout", s.IdleTimeoutMS)
	errs = append(errs, err)
	out := execbox.Spec{
		Workspace: s.Workspace, Env: s.Env, EnvPolicy: s.EnvPolicy, EnvAllow: s.EnvAllow,
		Limits: limits, User: s.User.user(), Labels: s.Labels,
		AllowSystemWorkspace: s.AllowSystemWorkspace, Image: s.Image, Pool: s.Pool,
		Timeout: timeout, IdleTimeout: idle,
	}
	for i, a := range s.Assets {
		ea := execbox.Asset{Source: a.Source, Path: a.Path}
		if a.Content != nil {
			ea.Content = a.Content.Bytes()
			if ea.Content == nil {
				ea.Content = []byte{}
			}
		}
		if a.Mode != "" {
			// Validate refuses setuid, setgid and sticky bits, naming the field.
			ea.Mode, err = parseOctal(fmt.Sprintf("assets[%d].mode", i), a.Mode)
			errs = append(errs, err)
		}
		out.Assets = append(out.Assets, ea)
	}
	for i := range s.Setup {
		r, err := s.Setup[i].execRequest(fmt.Sprintf("setup[%d].", i))
		errs = append(errs, err)
		out.Setup = append(out.Setup, r)
	}
	return out, joinErrs(errs...)
}

// Output is execbox.Output on the wire: the kept bytes as a Payload
// (without the omission marker of Output.Text), and the counts.
type Output struct {
	Payload
	Total     int64 `json:"total"`
	Omitted   int64 `json:"omitted,omitempty"`
	OmittedAt int   `json:"omitted_at,omitempty"`
	HeldOpen  bool  `json:"held_open,omitempty"`
}

// NewOutput returns o for the wire.
func NewOutput(o execbox.Output) Output {
	return Output{Payload: NewPayload(o.Data), Total: o.Total, Omitted: o.Omitted, OmittedAt: o.OmittedAt, HeldOpen: o.HeldOpen}
}

// Output returns o as an execbox.Output.
func (o Output) Output() execbox.Output {
	return execbox.Output{Data: o.Bytes(), Total: o.Total, Omitted: o.Omitted, OmittedAt: o.OmittedAt, HeldOpen: o.HeldOpen}
}

// Result is execbox.Result on the wire.
type Result struct {
	Reason   execbox.Reason `json:"reason"`
	ExitCode int            `json:"exit_code"`
	// Signal is a Linux signal number, or 0.
	Signal int    `json:"signal,omitempty"`
	Detail string `json:"detail,omitempty"`

	Stdout Output `json:"stdout"`
	Stderr Output `json:"stderr"`

	DurationMS   float64 `json:"duration_ms"`
	UserTimeMS   float64 `json:"user_time_ms"`
	SystemTimeMS float64 `json:"system_time_ms"`
	// PeakMemory is in bytes.
	PeakMemory int64 `json:"peak_memory"`
	// Shell is the shell that ran a shell-form command: "bash" or "sh".
	Shell string `json:"shell,omitempty"`
}

// NewResult returns r for the wire.
func NewResult(r execbox.Result) Result {
	return Result{
		Reason: r.Reason, ExitCode: r.ExitCode, Signal: int(r.Signal), Detail: r.Detail,
		Stdout: NewOutput(r.Stdout), Stderr: NewOutput(r.Stderr),
		DurationMS: millis(r.Duration), UserTimeMS: millis(r.UserTime), SystemTimeMS: millis(r.SystemTime),
		PeakMemory: r.PeakMemory, Shell: r.Shell,
	}
}

// Result returns r as an execbox.Result. Durations out of range are
// clamped.
func (r Result) Result() execbox.Result {
	return execbox.Result{
		Reason: r.Reason, ExitCode: r.ExitCode, Signal: execbox.Signal(r.Signal), Detail: r.Detail,
		Stdout: r.Stdout.Output(), Stderr: r.Stderr.Output(),
		Duration: clamp(r.DurationMS), UserTime: clamp(r.UserTimeMS), SystemTime: clamp(r.SystemTimeMS),
		PeakMemory: r.PeakMemory, Shell: r.Shell,
	}
}

// EventError is the kind of the line that ends an event stream early: its
// Error says why. It has no sequence number.
const EventError execbox.EventKind = "error"

// Event is one line of an event stream: execbox.Event, or an error.
type Event struct {
	Seq  uint64            `json:"seq,omitempty"`
	Time time.Time         `json:"time,omitzero"`
	Kind execbox.EventKind `json:"kind"`
	Payload
	Result *Result `json:"result,omitempty"`
	Error  *Error  `json:"error,omitempty"`
	// Dropped and Offset: see execbox.Event (kinds dropped and exit).
	Dropped int64 `json:"dropped,omitempty"`
	Offset  int64 `json:"offset,omitempty"`
}

// NewEvent returns ev for the wire.
func NewEvent(ev execbox.Event) Event {
	out := Event{Seq: ev.Seq, Time: ev.Time, Kind: ev.Kind, Payload: NewPayload(ev.Data), Dropped: ev.Dropped, Offset: ev.Offset}
	if ev.Result != nil {
		r := NewResult(*ev.Result)
		out.Result = &r
	}
	return out
}

// Event returns e as an execbox.Event.
func (e Event) Event() execbox.Event {
	out := execbox.Event{Seq: e.Seq, Time: e.Time, Kind: e.Kind, Data: e.Bytes(), Dropped: e.Dropped, Offset: e.Offset}
	if e.Result != nil {
		r := e.Result.Result()
		out.Result = &r
	}
	return out
}

// ExecResponse is the body of a successful POST exec. Error is set, with
// the partial Result, when the command was cancelled (by the cancel
// endpoint or a deadline): codes canceled and deadline_exceeded.
type ExecResponse struct {
	Result Result `json:"result"`
	Error  *Error `json:"error,omitempty"`
}

// ProcessStatus describes a started process: the body of POST processes
// (201), GET processes/{id} (poll) and POST processes/{id}/kill.
type ProcessStatus struct {
	ID string `json:"id"`
	// Running is true until the process has ended; then Result is set.
	Running bool    `json:"running"`
	Result  *Result `json:"result,omitempty"`
}

// StdinResponse is the body of POST processes/{id}/stdin.
type StdinResponse struct {
	// Written is the number of bytes written to the process's stdin.
	Written int64 `json:"written"`
}

// SignalRequest is the body of POST processes/{id}/signal.
type SignalRequest struct {
	// Signal is a Linux signal number, or a name ("SIGTERM", "TERM").
	Signal SignalValue `json:"signal"`
}

// SignalValue is a signal number that also decodes from a name.
type SignalValue int

// UnmarshalJSON accepts a number or a name.
func (s *SignalValue) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		sig, err := execbox.ParseSignal(name)
		if err != nil {
			return err
		}
		*s = SignalValue(sig)
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return execbox.Invalid("signal", "must be a signal number or name, got %s", b)
	}
	*s = SignalValue(n)
	return nil
}

// FileType is the type of a file.
type FileType string

// File types.
const (
	TypeFile       FileType = "file"
	TypeDirectory  FileType = "directory"
	TypeSymlink    FileType = "symlink"
	TypeFIFO       FileType = "fifo"
	TypeSocket     FileType = "socket"
	TypeDevice     FileType = "device"
	TypeCharDevice FileType = "char_device"
	TypeOther      FileType = "other"
)

// FileInfo is execbox.FileInfo on the wire. Its name, type, size, mode
// and modified_at follow the FileEntry of KEP-539.2 (agent-sandbox).
type FileInfo struct {
	// Path is relative to the workspace, with forward slashes.
	Path string   `json:"path"`
	Name string   `json:"name"`
	Type FileType `json:"type"`
	Size int64    `json:"size"`
	// Mode is the permission in octal, with the setuid (4000), setgid
	// (2000) and sticky (1000) bits: "0644", "4755".
	Mode       string    `json:"mode"`
	ModifiedAt time.Time `json:"modified_at"`
	// Target is a symlink's destination.
	Target string `json:"target,omitempty"`
	// Raw holds the exact bytes of Path, Name and Target when any of them
	// is not UTF-8 (a file name is any bytes but NUL and "/"); the string
	// fields then hold a readable form with U+FFFD in place of the
	// invalid bytes. Readers take Raw when present.
	Raw *RawNames `json:"raw,omitempty"`
}

// RawNames are the bytes of a FileInfo's names, base64 in JSON.
type RawNames struct {
	Path   []byte `json:"path"`
	Name   []byte `json:"name"`
	Target []byte `json:"target,omitempty"`
}

// NewFileInfo returns fi for the wire.
func NewFileInfo(fi execbox.FileInfo) FileInfo {
	t := TypeOther
	m := fi.Mode
	switch {
	case m.IsRegular():
		t = TypeFile
	case m.IsDir():
		t = TypeDirectory
	case m&fs.ModeSymlink != 0:
		t = TypeSymlink
	case m&fs.ModeNamedPipe != 0:
		t = TypeFIFO
	case m&fs.ModeSocket != 0:
		t = TypeSocket
	case m&fs.ModeCharDevice != 0:
		t = TypeCharDevice
	case m&fs.ModeDevice != 0:
		t = TypeDevice
	}
	out := FileInfo{Path: fi.Path, Name: fi.Name, Type: t, Size: fi.Size, Mode: FormatMode(m), ModifiedAt: fi.ModTime, Target: fi.Target}
	if !utf8.ValidString(fi.Path) || !utf8.ValidString(fi.Name) || !utf8.ValidString(fi.Target) {
		out.Raw = &RawNames{Path: []byte(fi.Path), Name: []byte(fi.Name), Target: []byte(fi.Target)}
		out.Path = strings.ToValidUTF8(fi.Path, "\uFFFD")
		out.Name = strings.ToValidUTF8(fi.Name, "\uFFFD")
		out.Target = strings.ToValidUTF8(fi.Target, "\uFFFD")
	}
	return out
}

// FileInfo returns fi as an execbox.FileInfo.
func (fi FileInfo) FileInfo() execbox.FileInfo {
	m, _ := ParseMode("mode", fi.Mode)
	switch fi.Type {
	case TypeDirectory:
		m |= fs.ModeDir
	case TypeSymlink:
		m |= fs.ModeSymlink
	case TypeFIFO:
		m |= fs.ModeNamedPipe
	case TypeSocket:
		m |= fs.ModeSocket
	case TypeCharDevice:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case TypeDevice:
		m |= fs.ModeDevice
	case TypeFile:
	default:
		m |= fs.ModeIrregular
	}
	out := execbox.FileInfo{Path: fi.Path, Name: fi.Name, Size: fi.Size, Mode: m, ModTime: fi.ModifiedAt, Target: fi.Target}
	if fi.Raw != nil {
		out.Path, out.Name, out.Target = string(fi.Raw.Path), string(fi.Raw.Name), string(fi.Raw.Target)
	}
	return out
}

// FileList is the body of GET files/list.
type FileList struct {
	Entries []FileInfo `json:"entries"`
}

// FormatMode returns the permission and setuid/setgid/sticky bits of m
// in octal, at least four digits: "0644", "4755".
func FormatMode(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}

// ParseMode parses an octal mode of 3 or 4 digits, with an optional
// leading 0 ("644", "0644", "4755", "04755"). Errors name field.
func ParseMode(field, s string) (fs.FileMode, error) {
	v, err := parseOctal(field, s)
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, err
}

// parseOctal parses a mode as Unix permission bits.
func parseOctal(field, s string) (uint32, error) {
	d := s
	if len(d) > 3 {
		d = strings.TrimPrefix(d, "0")
	}
	v, err := strconv.ParseUint(d, 8, 32)
	if err != nil || len(d) < 3 || len(d) > 4 || v > 0o7777 {
		return 0, execbox.Invalid(field, "%q is not an octal mode like 0644", s)
	}
	return uint32(v), nil
}

// SandboxInfo describes a sandbox.
type SandboxInfo struct {
	ID string `json:"id"`
	// Runtime is the server's runtime that made it ("local", "sandbox").
	Runtime string `json:"runtime,omitempty"`
	// Workspace is the workspace's absolute path as commands see it.
	Workspace string            `json:"workspace"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at,omitzero"`
	// Owner is the name of the API key that created it ("admin" for the
	// server's token); absent on a server without authentication and on
	// an agent.
	Owner string `json:"owner,omitempty"`
	// Capabilities is what the sandbox enforces, those of its runtime
	// (revision 2; absent from older servers and agents).
	Capabilities *Capabilities `json:"capabilities,omitempty"`
	// Pool is the warm pool the sandbox was taken from, if any.
	Pool string `json:"pool,omitempty"`

	// The sandbox's life, as a server tells it (absent from agents and
	// older servers). State is running until it ends; then EndedAt,
	// EndReason and, for people, EndDetail say when and why.
	State SandboxState `json:"state,omitempty"`
	// ExpiresAt is when its lifetime (spec timeout_ms, or the server's
	// default) ends; absent when it has none.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// IdleTimeoutMS is its idle timeout: it ends once nothing has
	// touched it, run in it or been open in it that long after
	// LastActiveAt. Absent when it has none.
	IdleTimeoutMS float64 `json:"idle_timeout_ms,omitempty"`
	// LastActiveAt is when a call last touched it, or last saw a process
	// running or a session open in it.
	LastActiveAt time.Time `json:"last_active_at,omitzero"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	EndReason    EndReason `json:"end_reason,omitempty"`
	EndDetail    string    `json:"end_detail,omitempty"`
}

// SandboxState is the state of a server's sandbox.
type SandboxState string

// Sandbox states.
const (
	// StateRunning: the sandbox serves calls.
	StateRunning SandboxState = "running"
	// StateClosed: it ended (deleted, its lifetime or idle timeout ran
	// out, the server shut down) and what it made is removed.
	StateClosed SandboxState = "closed"
	// StateFailed: its boundary was lost (its agent died); it was
	// closed, and EndDetail says what happened.
	StateFailed SandboxState = "failed"
)

// EndReason says why a sandbox ended.
type EndReason string

// End reasons.
const (
	EndDeleted  EndReason = "deleted"  // DELETE /v1/sandboxes/{id}
	EndTimeout  EndReason = "timeout"  // its lifetime ran out
	EndIdle     EndReason = "idle"     // its idle timeout ran out
	EndFailed   EndReason = "failed"   // its boundary was lost
	EndShutdown EndReason = "shutdown" // the server shut down
)

// SandboxTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout:
// the sandbox's lifetime now ends TimeoutMS milliseconds from now.
type SandboxTimeoutRequest struct {
	TimeoutMS float64 `json:"timeout_ms"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []SandboxInfo `json:"sandboxes"`
}

// Capabilities is execbox.Capabilities on the wire.
type Capabilities struct {
	Isolation bool `json:"isolation"`
	Rlimits   bool `json:"rlimits"`
	Memory    bool `json:"memory"`
	PIDs      bool `json:"pids"`
	CPUs      bool `json:"cpus"`
	User      bool `json:"user"`
	Images    bool `json:"images,omitempty"`
}

// NewCapabilities returns c for the wire.
func NewCapabilities(c execbox.Capabilities) Capabilities { return Capabilities(c) }

// Capabilities returns c as execbox.Capabilities.
func (c Capabilities) Capabilities() execbox.Capabilities { return execbox.Capabilities(c) }

// RuntimeInfo describes one of the server's runtimes.
type RuntimeInfo struct {
	Name         string       `json:"name"`
	Default      bool         `json:"default,omitempty"`
	Available    bool         `json:"available"`
	Detail       string       `json:"detail,omitempty"`
	Capabilities Capabilities `json:"capabilities"`
}

// RuntimeList is the body of GET /v1/runtimes.
type RuntimeList struct {
	Runtimes []RuntimeInfo `json:"runtimes"`
}

// Health statuses.
const (
	StatusOK          = "ok"
	StatusUnavailable = "unavailable"
)

// Health is the body of GET /v1/health (status 200 when Status is "ok",
// 503 otherwise), as KEP-539.2 has it for probes.
type Health struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Sandbox is set by an agent and by the per-sandbox health endpoint.
	Sandbox *SandboxInfo `json:"sandbox,omitempty"`
}

// millis returns d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / 1e6 }

// duration converts milliseconds, naming field (a Go field name) when out
// of range.
func duration(field string, ms float64) (time.Duration, error) {
	ns := math.Round(ms * 1e6)
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
		return 0, execbox.Invalid(field, "%v ms is out of range", ms)
	}
	return time.Duration(ns), nil
}

func clamp(ms float64) time.Duration {
	d, err := duration("", ms)
	if err != nil {
		if ms < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return d
}

// joinErrs is errors.Join flattening joined errors, so every *FieldError
// sits at the top level.
func joinErrs(errs ...error) error {
	var out []error
	for _, e := range errs {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, j.Unwrap()...)
		} else if e != nil {
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}
