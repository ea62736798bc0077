package execbox

import (
	"errors"
	"fmt"
)

// Error kinds. Every error returned by execbox matches at most one of these
// with errors.Is, on every runtime and across the wire, so callers can decide
// what to do without reading text. Context errors (context.Canceled,
// context.DeadlineExceeded) pass through unchanged.
var (
	// ErrInvalidArgument: the request is malformed. Retrying it unchanged
	// fails again. A *FieldError names the offending field.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: a named thing (runtime, file, process, session) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrClosed: the sandbox, process or session was closed.
	ErrClosed = errors.New("closed")
	// ErrUnavailable: the runtime cannot work on this machine right now
	// (missing dependency, engine down). Health says why.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnsupported: the runtime cannot honour a field of the request
	// (a limit it cannot enforce). Never silently ignored.
	ErrUnsupported = errors.New("unsupported")
	// ErrResourceExhausted: something ran out: the host's processes, file
	// descriptors or disk, or a size limit of the request (a file larger
	// than ReadOptions.Limit). Retrying unchanged succeeds only in the
	// first case, once resources are freed.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrPermission: the operation is not allowed to the caller, for example a
	// path that resolves outside the workspace.
	ErrPermission = errors.New("permission denied")
)

// FieldError reports a problem with one field of a request. It matches
// ErrInvalidArgument, or Kind when set (ErrUnsupported for a limit a runtime
// cannot enforce, ErrPermission for a path escaping the workspace).
type FieldError struct {
	Field   string // dotted path of the field, e.g. "limits.cpu_time"
	Problem string // what is wrong, e.g. "must not be negative"
	Kind    error  // nil means ErrInvalidArgument
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s", e.Field, e.Problem)
}

// Unwrap returns the kind, so errors.Is sees through wrapping kinds too.
func (e *FieldError) Unwrap() error {
	if e.Kind == nil {
		return ErrInvalidArgument
	}
	return e.Kind
}

// Invalid returns a *FieldError of kind ErrInvalidArgument.
func Invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Unsupported returns a *FieldError of kind ErrUnsupported: runtime cannot
// enforce field.
func Unsupported(runtime, field string) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf("not supported by the %s runtime", runtime), Kind: ErrUnsupported}
}

// PrefixFields returns err with prefix prepended to the Field of every
// *FieldError joined in it, for validating a request nested in another
// (PrefixFields("setup[1].", req.Validate()) names "setup[1].timeout").
// Other errors are kept as they are; nil stays nil.
func PrefixFields(prefix string, err error) error {
	return MapFieldErrors(err, func(fe FieldError) FieldError {
		fe.Field = prefix + fe.Field
		return fe
	})
}

// MapFieldErrors returns err with every *FieldError joined in it replaced
// by a copy that f rewrote (a field renamed, a problem reworded); other
// errors are kept as they are, and nil stays nil.
func MapFieldErrors(err error, f func(FieldError) FieldError) error {
	if err == nil {
		return nil
	}
	var out []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *FieldError
		if errors.As(e, &fe) {
			c := f(*fe)
			out = append(out, &c)
			return
		}
		out = append(out, e)
	}
	walk(err)
	return joinProblems(out)
}

// MaxProblems bounds the problems one validation reports: a request of
// a million invalid elements gets the first MaxProblems, not a
// message the size of the request times the size of a problem.
const MaxProblems = 50

// joinProblems is errors.Join of at most MaxProblems of errs, followed by
// one saying how many more were found (at least: validation stops
// collecting soon after MaxProblems).
func joinProblems(errs []error) error {
	if len(errs) <= MaxProblems {
		return errors.Join(errs...)
	}
	n := len(errs) - MaxProblems
	return errors.Join(append(errs[:MaxProblems:MaxProblems], fmt.Errorf("and at least %d more problems, not shown: %w", n, ErrInvalidArgument))...)
}
