package boundary

import (
	"errors"
	"syscall"

	"github.com/execbox/execbox"
)

// exhaustion are the errnos that say a resource of the host ran out
// (disk, inodes, memory, processes, descriptors) rather than that the
// request or the runtime is wrong.
var exhaustion = []error{syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM, syscall.EAGAIN,
	syscall.EMFILE, syscall.ENFILE, syscall.EMLINK}

// CreateError gives err, returned by a runtime's Create, the kind its
// cause says when it has none: a full state disk or TMPDIR (ENOSPC), no
// inodes, descriptors or processes left are ErrResourceExhausted, which
// a caller retries once something is freed. Other errors, nil and
// errors that have a kind already are returned as they are.
func CreateError(err error) error {
	if err == nil || hasKind(err) {
		return err
	}
	for _, e := range exhaustion {
		if errors.Is(err, e) {
			return &kindError{kind: execbox.ErrResourceExhausted, err: err}
		}
	}
	return err
}

// hasKind reports whether err already matches an execbox kind.
func hasKind(err error) bool {
	for _, k := range []error{execbox.ErrInvalidArgument, execbox.ErrNotFound, execbox.ErrClosed, execbox.ErrPermission,
		execbox.ErrUnavailable, execbox.ErrUnsupported, execbox.ErrResourceExhausted} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// kindError is err classified as kind: errors.Is matches both, and the
// text is err's own.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }
