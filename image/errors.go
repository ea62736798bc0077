//go:build linux

package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/execbox/execbox"
)

// ErrInUse: Remove was asked to delete an image whose root a sandbox is
// using (see Store.Use). It matches execbox.ErrUnavailable, as package
// execbox has no "busy" kind: the same call succeeds once the sandboxes
// are closed.
var ErrInUse error = &sentinel{"image in use", execbox.ErrUnavailable}

// sentinel is an error kind that refines an execbox kind.
type sentinel struct {
	msg    string
	parent error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.parent }

// kindError is err classified as kind: errors.Is matches both.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.kind.Error() + ": " + e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// refError explains err, met while getting the image ref, and gives it
// the execbox kind that fits when it has none: a registry's "unknown
// manifest" is ErrNotFound, "unauthorized" ErrPermission, a registry that
// cannot be reached (or drops the connection) ErrUnavailable.
//
// remote says whether the source is a registry: a stream ending early is
// a dropped connection there, a damaged file of a local source.
func refError(ref string, remote bool, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if k := kindOf(err, remote); k != nil && !hasKind(err) {
		err = &kindError{k, err}
	}
	return fmt.Errorf("image %s: %w", ref, err)
}

// hasKind reports whether err already carries an execbox kind.
func hasKind(err error) bool {
	for _, k := range []error{execbox.ErrInvalidArgument, execbox.ErrNotFound, execbox.ErrPermission,
		execbox.ErrUnavailable, execbox.ErrUnsupported, execbox.ErrResourceExhausted} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// kindOf classifies err, or returns nil.
func kindOf(err error, remote bool) error {
	var te *transport.Error
	if errors.As(err, &te) {
		return statusKind(te)
	}
	var oe *net.OpError
	var de *net.DNSError
	switch {
	case errors.Is(err, syscall.ENOENT):
		return execbox.ErrNotFound
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EMFILE):
		return execbox.ErrResourceExhausted
	case errors.Is(err, io.ErrUnexpectedEOF) && !remote:
		return execbox.ErrInvalidArgument
	case errors.As(err, &oe), errors.As(err, &de),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return execbox.ErrUnavailable
	}
	return nil
}

// statusKind classifies a registry's answer.
func statusKind(te *transport.Error) error {
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return execbox.ErrNotFound
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return execbox.ErrPermission
		case transport.TooManyRequestsErrorCode, transport.UnavailableErrorCode:
			return execbox.ErrUnavailable
		}
	}
	switch c := te.StatusCode; {
	case c == http.StatusNotFound:
		return execbox.ErrNotFound
	case c == http.StatusUnauthorized, c == http.StatusForbidden:
		return execbox.ErrPermission
	case c == http.StatusTooManyRequests, c >= 500:
		return execbox.ErrUnavailable
	}
	return nil
}

// notFound is the error for ref, missing from the cache or its source.
func notFound(ref, what string) error {
	return fmt.Errorf("image %s: %w: %s", ref, execbox.ErrNotFound, what)
}
