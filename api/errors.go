package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/execbox/execbox"
)

// Code is a stable, append-only error code. Each execbox error kind has
// one; clients decide by the code, never by the HTTP status or message.
type Code string

// Error codes, with the HTTP status a response carrying them has.
const (
	// CodeInvalidArgument (400): the request is malformed; Fields names
	// the offending fields. execbox.ErrInvalidArgument.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeUnauthenticated (401): the bearer token is missing or wrong.
	// Go clients see execbox.ErrPermission.
	CodeUnauthenticated Code = "unauthenticated"
	// CodePermissionDenied (403): not allowed, e.g. a path leaving the
	// workspace. execbox.ErrPermission.
	CodePermissionDenied Code = "permission_denied"
	// CodeNotFound (404): the sandbox, process, file or program does not
	// exist. execbox.ErrNotFound.
	CodeNotFound Code = "not_found"
	// CodeClosed (410): the sandbox, process or stdin was closed.
	// execbox.ErrClosed.
	CodeClosed Code = "closed"
	// CodeResourceExhausted (429; 413 for a request body over the
	// server's limit): something ran out, or a size limit was passed.
	// execbox.ErrResourceExhausted.
	CodeResourceExhausted Code = "resource_exhausted"
	// CodeCanceled (499): the operation was cancelled. context.Canceled.
	CodeCanceled Code = "canceled"
	// CodeInternal (500): a failure the server does not classify.
	CodeInternal Code = "internal"
	// CodeUnsupported (501): the runtime cannot honour a field, or the
	// server does not have the endpoint. execbox.ErrUnsupported.
	CodeUnsupported Code = "unsupported"
	// CodeUnavailable (503): the runtime cannot work right now; for Go
	// clients also an unreachable server. execbox.ErrUnavailable.
	CodeUnavailable Code = "unavailable"
	// CodeDeadlineExceeded (504): a deadline passed.
	// context.DeadlineExceeded.
	CodeDeadlineExceeded Code = "deadline_exceeded"
)

// kinds maps codes to the Go errors they stand for, in the order a Go
// error is classified: the first kind it matches gives its code.
var kinds = []struct {
	code Code
	err  error
}{
	{CodeCanceled, context.Canceled},
	{CodeDeadlineExceeded, context.DeadlineExceeded},
	{CodeClosed, execbox.ErrClosed},
	{CodeNotFound, execbox.ErrNotFound},
	{CodePermissionDenied, execbox.ErrPermission},
	{CodeUnsupported, execbox.ErrUnsupported},
	{CodeResourceExhausted, execbox.ErrResourceExhausted},
	{CodeUnavailable, execbox.ErrUnavailable},
	{CodeInvalidArgument, execbox.ErrInvalidArgument},
}

// Kind returns the Go error a code stands for (an execbox kind or a
// context error), or nil for CodeInternal and unknown codes.
func (c Code) Kind() error {
	if c == CodeUnauthenticated {
		return execbox.ErrPermission
	}
	for _, k := range kinds {
		if k.code == c {
			return k.err
		}
	}
	return nil
}

// Status is the HTTP status of a response carrying code.
func (c Code) Status() int {
	switch c {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeClosed:
		return http.StatusGone
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeCanceled:
		return 499 // client closed request, as nginx and gRPC gateways use
	case CodeUnsupported:
		return http.StatusNotImplemented
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// CodeOf classifies a Go error.
func CodeOf(err error) Code {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.code
		}
	}
	return CodeInternal
}

// CodeForStatus guesses the code of a response that carries no error
// body (a proxy's error page): the code whose status it is.
func CodeForStatus(status int) Code {
	switch {
	case status == http.StatusRequestEntityTooLarge:
		return CodeResourceExhausted
	case status == http.StatusForbidden:
		return CodePermissionDenied
	case status == http.StatusMethodNotAllowed:
		return CodeUnsupported
	case status == http.StatusRequestTimeout:
		return CodeDeadlineExceeded
	case status == http.StatusBadGateway:
		return CodeUnavailable
	}
	for _, c := range []Code{CodeInvalidArgument, CodeUnauthenticated, CodeNotFound, CodeClosed,
		CodeResourceExhausted, CodeCanceled, CodeUnsupported, CodeUnavailable, CodeDeadlineExceeded} {
		if c.Status() == status {
			return c
		}
	}
	return CodeInternal
}

// ErrorResponse is the body of every error response:
// {"error": {"code": ..., "message": ...}}.
type ErrorResponse struct {
	Error *Error `json:"error"`
}

// Error is an error on the wire.
type Error struct {
	// Code classifies the error; see the Code constants.
	Code Code `json:"code"`
	// Message is the whole error in words, for people.
	Message string `json:"message"`
	// Fields lists the request fields at fault, with what is wrong with
	// each (every problem at once). Field names are the wire names:
	// "timeout_ms", "setup[1].command", "limits.memory".
	Fields []FieldError `json:"fields,omitempty"`
	// Setup describes the setup command that failed sandbox creation.
	Setup *SetupFailure `json:"setup,omitempty"`
}

// FieldError is one field at fault.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
	// Code is the field's own kind: invalid_argument, unsupported (a
	// limit the runtime cannot enforce), permission_denied (a path
	// leaving the workspace), not_found (a missing program or directory).
	Code Code `json:"code"`
}

// SetupFailure is a setup command that did not succeed.
type SetupFailure struct {
	// Index is the command's position in the spec's setup list.
	Index int `json:"index"`
	// Command is its argv, or ["sh", "-c", LINE].
	Command []string `json:"command"`
	// Result is what it did.
	Result Result `json:"result"`
}

// NewError describes a Go error for the wire: its code, its message,
// every *execbox.FieldError in it (renamed to wire field names) and a
// *execbox.SetupError if it holds one.
//
// The message names fields as the wire does too ("timeout_ms: must not
// be negative", not the Go name "timeout"), and a problem found twice
// (by two checks of one request) is given once.
func NewError(err error) *Error {
	e := &Error{Code: CodeOf(err), Message: err.Error()}
	seen := map[FieldError]bool{}
	walkFields(err, func(fe *execbox.FieldError, wire string) {
		f := FieldError{Field: wire, Problem: fe.Problem, Code: CodeOf(fe)}
		if seen[f] {
			return
		}
		seen[f] = true
		e.Fields = append(e.Fields, f)
		if wire != fe.Field {
			e.Message = replaceProblem(e.Message, fe.Error(), wire+": "+fe.Problem)
		}
	})
	e.Message = uniqueLines(e.Message)
	var se *execbox.SetupError
	if errors.As(err, &se) {
		e.Setup = &SetupFailure{Index: se.Index, Command: se.Cmd, Result: NewResult(se.Result)}
	}
	return e
}

// replaceProblem replaces old, a "field: problem", with new in msg
// where it starts a line or follows a space (so that "timeout: …" does
// not match inside "idle_timeout: …").
func replaceProblem(msg, old, new string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, old)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i])
		if i == 0 || msg[i-1] == '\n' || msg[i-1] == ' ' {
			b.WriteString(new)
		} else {
			b.WriteString(old)
		}
		msg = msg[i+len(old):]
	}
}

// uniqueLines is msg without the repeats of a line (errors.Join puts
// one problem on each).
func uniqueLines(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	lines := strings.Split(msg, "\n")
	seen := make(map[string]bool, len(lines))
	out := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// WireFieldError is a field error whose Field is already a wire name,
// as decoding a request produces ("timeout" is then an unknown field, not
// the Go name of "timeout_ms"). NewError does not rename it.
type WireFieldError struct{ *execbox.FieldError }

// Unwrap returns the field error.
func (e WireFieldError) Unwrap() error { return e.FieldError }

// walkFields calls fn for every *execbox.FieldError in err's tree, with
// its wire name; it does not descend into a field error.
func walkFields(err error, fn func(fe *execbox.FieldError, wire string)) {
	if err == nil {
		return
	}
	switch fe := err.(type) {
	case WireFieldError:
		fn(fe.FieldError, fe.Field)
		return
	case *execbox.FieldError:
		fn(fe, WireField(fe.Field))
		return
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkFields(e, fn)
		}
	case interface{ Unwrap() error }:
		walkFields(u.Unwrap(), fn)
	}
}

// Err turns the wire error back into a Go error that answers errors.Is
// and errors.As as the server's error did: it matches the code's kind
// (execbox.ErrNotFound, context.Canceled, ...), holds one
// *execbox.FieldError per field (under its Go field name, with its own
// kind), and an *execbox.SetupError when Setup is set. Its text is
// Message.
func (e *Error) Err() error {
	if e == nil {
		return nil
	}
	re := &remoteError{msg: e.Message, code: e.Code}
	if re.msg == "" {
		re.msg = string(e.Code)
	}
	if k := e.Code.Kind(); k != nil {
		re.errs = append(re.errs, k)
	}
	for _, f := range e.Fields {
		fe := &execbox.FieldError{Field: GoField(f.Field), Problem: f.Problem}
		if k := f.Code.Kind(); k != nil && k != execbox.ErrInvalidArgument {
			fe.Kind = k
		}
		re.errs = append(re.errs, fe)
	}
	if s := e.Setup; s != nil {
		re.errs = append(re.errs, &execbox.SetupError{Index: s.Index, Result: s.Result.Result(), Cmd: s.Command})
	}
	return re
}

// remoteError is an error decoded from the wire.
type remoteError struct {
	msg  string
	code Code
	errs []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.errs }

// ErrorCode returns the wire code of an error decoded by Error.Err, or ""
// if err is not one.
func ErrorCode(err error) Code {
	var re *remoteError
	if errors.As(err, &re) {
		return re.code
	}
	return ""
}
