package api

import (
	"fmt"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
)

// CodeRequest is code.Request on the wire: the body of POST code, or the
// part named "request" of a multipart body whose part "stdin" streams
// the program's standard input (as for POST exec).
type CodeRequest struct {
	// Language is a language or an alias ("python", "py", "c++", ...).
	Language string `json:"language"`
	// Source is the program, written to main.EXT of the run directory.
	Source string `json:"source"`
	// Files are written to the run directory first.
	Files []CodeFile `json:"files,omitempty"`
	// Stdin is the whole standard input of the run phase, for small
	// inputs; larger ones go in a "stdin" part.
	Stdin *Payload          `json:"stdin,omitempty"`
	Args  []string          `json:"args,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// Limits are over the language's defaults; a negative field removes
	// that default.
	Limits           *Limits  `json:"limits,omitempty"`
	TimeoutMS        float64  `json:"timeout_ms,omitempty"`
	CompileTimeoutMS float64  `json:"compile_timeout_ms,omitempty"`
	CompileFlags     []string `json:"compile_flags,omitempty"`
	OutputLimit      int64    `json:"output_limit,omitempty"`
	Cleanup          bool     `json:"cleanup,omitempty"`
}

// CodeFile is code.File on the wire: its content as a Payload, its mode
// in octal ("0644"; empty means 0644).
type CodeFile struct {
	Path string `json:"path"`
	Payload
	Mode string `json:"mode,omitempty"`
}

// NewCodeRequest returns r for the wire. r.Stdin is not carried: send it
// as a stream, or set Stdin.
func NewCodeRequest(r code.Request) CodeRequest {
	out := CodeRequest{
		Language: string(r.Language), Source: r.Source, Args: r.Args, Env: r.Env,
		Limits: NewLimits(r.Limits), TimeoutMS: millis(r.Timeout), CompileTimeoutMS: millis(r.CompileTimeout),
		CompileFlags: r.CompileFlags, OutputLimit: r.OutputLimit, Cleanup: r.Cleanup,
	}
	for _, f := range r.Files {
		cf := CodeFile{Path: f.Path, Payload: NewPayload(f.Content)}
		if f.Mode != 0 {
			cf.Mode = FormatMode(f.Mode)
		}
		out.Files = append(out.Files, cf)
	}
	return out
}

// CodeRequest returns r as a code.Request, with Stdin reading r.Stdin
// when set. It checks what the wire adds (durations, modes, payloads);
// code.Request.Validate checks the rest.
func (r *CodeRequest) CodeRequest() (code.Request, error) {
	timeout, err1 := duration("timeout", r.TimeoutMS)
	ctimeout, err2 := duration("compile_timeout", r.CompileTimeoutMS)
	limits, err3 := r.Limits.Limits("limits.")
	errs := []error{err1, err2, err3}
	req := code.Request{
		Language: code.Language(r.Language), Source: r.Source, Args: r.Args, Env: r.Env,
		Limits: limits, Timeout: timeout, CompileTimeout: ctimeout,
		CompileFlags: r.CompileFlags, OutputLimit: r.OutputLimit, Cleanup: r.Cleanup,
	}
	for i, f := range r.Files {
		cf := code.File{Path: f.Path, Content: f.Bytes()}
		if f.Text != "" && f.Data != nil {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("files[%d]", i), "has both text and data"))
		}
		if f.Mode != "" {
			m, err := ParseMode(fmt.Sprintf("files[%d].mode", i), f.Mode)
			errs = append(errs, err)
			cf.Mode = m
		}
		req.Files = append(req.Files, cf)
	}
	if r.Stdin != nil {
		if r.Stdin.Text != "" && r.Stdin.Data != nil {
			errs = append(errs, execbox.Invalid("stdin", "has both text and data"))
		}
		req.Stdin = strings.NewReader(string(r.Stdin.Bytes()))
	}
	return req, joinErrs(errs...)
}

// CodeResult is code.Result on the wire: the Result of the phase that
// ended the run (its fields at the top level, as in an exec result), and
// what the run adds.
type CodeResult struct {
	Result
	// Phase is "compile" when compiling did not succeed, else "run".
	Phase string `json:"phase"`
	// Compile is the compile step's result; absent for an interpreted
	// language. When Phase is "compile" it equals the top-level result.
	Compile *Result `json:"compile,omitempty"`
	// Language is the canonical language.
	Language  string `json:"language"`
	Toolchain string `json:"toolchain"`
	Version   string `json:"version,omitempty"`
	// Command is the argv of the phase, as commands see paths.
	Command []string `json:"command"`
	// Limits are the limits sent with the phase's command.
	Limits *Limits `json:"limits,omitempty"`
	// Dir is the run directory relative to the workspace; empty after
	// cleanup.
	Dir string `json:"dir,omitempty"`
}

// NewCodeResult returns r for the wire.
func NewCodeResult(r code.Result) CodeResult {
	out := CodeResult{
		Result: NewResult(r.Result), Phase: string(r.Phase), Language: string(r.Language),
		Toolchain: r.Toolchain, Version: r.Version, Command: r.Command, Limits: NewLimits(r.Limits), Dir: r.Dir,
	}
	if r.Compile != nil {
		c := NewResult(*r.Compile)
		out.Compile = &c
	}
	return out
}

// CodeResult returns r as a code.Result.
func (r CodeResult) CodeResult() code.Result {
	limits, _ := r.Limits.Limits("") // the server's own values: in range
	out := code.Result{
		Result: r.Result.Result(), Phase: code.Phase(r.Phase), Language: code.Language(r.Language),
		Toolchain: r.Toolchain, Version: r.Version, Command: r.Command, Limits: limits, Dir: r.Dir,
	}
	if r.Compile != nil {
		c := r.Compile.Result()
		out.Compile = &c
	}
	return out
}

// CodeResponse is the body of a successful POST code. Error is set, with
// the partial Result, when the run was cancelled (the client went away,
// a deadline): codes canceled and deadline_exceeded.
type CodeResponse struct {
	Result CodeResult `json:"result"`
	Error  *Error     `json:"error,omitempty"`
}
