package workspace

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/execbox/execbox"
)

// opError is a failed file operation on a path of the workspace. It
// matches its execbox kind (when the cause is understood) and the
// underlying error, so both errors.Is(err, execbox.ErrNotFound) and
// errors.Is(err, fs.ErrNotExist) hold.
type opError struct {
	op   string // "read", "write", "upload", ...
	path string // relative to the workspace, slash-separated
	kind error  // an execbox kind, or nil when the cause is not understood
	err  error
}

func (e *opError) Error() string {
	return e.op + " " + e.path + ": " + describe(e.err)
}

func (e *opError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// Causes that do not come from the operating system.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("file is larger than the limit")
	errChanged    = errors.New("changed during the operation")
	errHardLinked = errors.New("refused to write through a symlink to a file with several hard links")
	// errNotOwnersToWrite: a symlink leads to a file that the workspace
	// owner could not write itself.
	errNotOwnersToWrite = errors.New("refused to write through a symlink to a file the workspace owner may not write")
	// errLargerThanFS: a download would hold more bytes than the file
	// system it reads from (sparse files).
	errLargerThanFS = errors.New("too large to download")
)

// wrap classifies err as a failure of op on path. Errors already explained
// (field errors, op errors) and context errors are returned unchanged.
func wrap(op, path string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if _, ok := errors.AsType[*execbox.FieldError](err); ok {
		return err
	}
	if _, ok := errors.AsType[*opError](err); ok {
		return err
	}
	return &opError{op: op, path: filepath.ToSlash(path), kind: kindOf(err), err: err}
}

// fail returns an op error of a given kind.
func fail(op, path string, kind, err error) error {
	return &opError{op: op, path: filepath.ToSlash(path), kind: kind, err: err}
}

// kindOf maps an error from the os package to an execbox kind, or nil.
func kindOf(err error) error {
	switch {
	case errors.Is(err, errNotRegular), errors.Is(err, errChanged),
		errors.Is(err, io.ErrUnexpectedEOF): // a truncated tar stream
		return execbox.ErrInvalidArgument
	case errors.Is(err, errHardLinked), errors.Is(err, errNotOwnersToWrite):
		return execbox.ErrPermission
	case errors.Is(err, errTooLarge), errors.Is(err, errLargerThanFS):
		return execbox.ErrResourceExhausted
	case errors.Is(err, fs.ErrClosed):
		return execbox.ErrClosed
	case isEscape(err):
		return execbox.ErrPermission
	case errors.Is(err, fs.ErrNotExist):
		return execbox.ErrNotFound
	case errors.Is(err, fs.ErrPermission): // EACCES, EPERM
		return execbox.ErrPermission
	case errors.Is(err, fs.ErrExist): // EEXIST, ENOTEMPTY
		// There is no "already exists" kind: the caller has to change
		// the request (another name, Parents, Recursive), which is what
		// ErrInvalidArgument says. In process, fs.ErrExist still matches.
		return execbox.ErrInvalidArgument
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return nil
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE,
		syscall.EAGAIN, syscall.ENOMEM, syscall.ENOBUFS, syscall.EFBIG, syscall.EMLINK:
		return execbox.ErrResourceExhausted
	case syscall.ENOTDIR, syscall.EISDIR, syscall.ELOOP, syscall.ENAMETOOLONG,
		syscall.EINVAL, syscall.EXDEV, syscall.ENXIO:
		return execbox.ErrInvalidArgument
	case syscall.EROFS:
		return execbox.ErrPermission
	}
	return nil
}

// describe is the message of err without the *PathError decoration (the
// opError says which path already), and in words for escapes.
func describe(err error) string {
	if isEscape(err) {
		return "path escapes its root directory (through \"..\" or a symlink)"
	}
	for {
		switch e := err.(type) {
		case *fs.PathError:
			err = e.Err
		case *os.LinkError:
			err = e.Err
		case *os.SyscallError:
			err = e.Err
		default:
			return err.Error()
		}
	}
}

// os.Root reports an escape with an unexported error ("path escapes from
// parent"). learnEscape captures it from the first root opened, by asking
// for a path that escapes lexically, so isEscape can match it with
// errors.Is instead of comparing text. The tests check that planted
// symlinks are classified as ErrPermission, which catches a change of this
// behaviour in Go.
var errEscape atomic.Pointer[error]

func learnEscape(r *os.Root) {
	if errEscape.Load() != nil {
		return
	}
	_, err := r.Lstat("../escape-probe")
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		errEscape.CompareAndSwap(nil, &pe.Err)
	}
}

func isEscape(err error) bool {
	p := errEscape.Load()
	return p != nil && errors.Is(err, *p)
}
