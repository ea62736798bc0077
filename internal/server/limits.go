package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/execbox/execbox"
)

// Maximums bound what clients may ask of a server: what one request may
// set and how many things may be alive at once. A zero field is no bound
// (the library's default); execbox serve sets safe ones from its
// configuration (internal/config's server.* keys).
//
// A request over a size or duration is invalid_argument naming the field
// (retrying it unchanged fails again); a request over a count is
// resource_exhausted (it may succeed once something ends).
type Maximums struct {
	// Sandboxes bounds the live sandboxes of a Server.
	Sandboxes int64
	// Processes bounds the running processes of one sandbox: started
	// processes and execs in progress.
	Processes int64
	// Sessions bounds the open sessions of one sandbox.
	Sessions int64
	// Limits bound each field of a sandbox's or a command's limits; a
	// request may ask for less, and must ask for at most this where it
	// is set. Memory and PIDs then also become the default of a request
	// that sets none, so no command runs unbounded.
	Limits execbox.Limits
	// Timeout bounds a command's timeout; a request with none gets the
	// runtime's default, which must itself be within it. It bounds the
	// grace period (SIGTERM to SIGKILL) as well, so that a command that
	// ignores SIGTERM lives at most twice Timeout.
	Timeout time.Duration
	// OutputLimit bounds a command's output limit (bytes per stream).
	OutputLimit int64
	// EventWindow bounds the retained events of a started process.
	EventWindow int64
	// ReadSize bounds the limit of a file read.
	ReadSize int64
	// UploadSize bounds the body of a tar upload.
	UploadSize int64
	// ResultMemory bounds the bytes a Server holds for its callers at
	// once (memory.go): results of execs, runs and code runs from their
	// start until their response is written, file contents read or
	// written, JSON bodies. Zero means DefaultResultMemory. In a Key's
	// Max it bounds the key's share (default half the server's, all of
	// it for an admin key).
	ResultMemory int64
}

// over names a field over its maximum.
func over(field string, got, max any) error {
	return execbox.Invalid(field, "%v is over this server's maximum of %v", got, max)
}

// checkLimits checks l against the maximum limits; prefix names the
// object holding it ("limits", "spec.limits"). A zero field of l asks
// for no limit, which is over any maximum set: the maximum is applied
// instead (see applyLimits).
func (m *Maximums) checkLimits(prefix string, l execbox.Limits) error {
	x := m.Limits
	var errs []error
	check := func(field string, got, max int64) {
		if max > 0 && got > max {
			errs = append(errs, over(prefix+field, got, max))
		}
	}
	check("cpu_time_ms", l.CPUTime.Milliseconds(), x.CPUTime.Milliseconds())
	check("file_size", l.FileSize, x.FileSize)
	check("open_files", l.OpenFiles, x.OpenFiles)
	check("address_space", l.AddressSpace, x.AddressSpace)
	check("memory", l.Memory, x.Memory)
	check("pids", l.PIDs, x.PIDs)
	if x.CPUs > 0 && l.CPUs > x.CPUs {
		errs = append(errs, over(prefix+"cpus", l.CPUs, x.CPUs))
	}
	return errors.Join(errs...)
}

// applyLimits returns l with every unset field that has a maximum set to
// that maximum: a client that asks for nothing gets the bound, not an
// unbounded sandbox.
func (m *Maximums) applyLimits(l execbox.Limits) execbox.Limits {
	return l.Merge(m.Limits)
}

// checkSpec bounds a create request and fills in the maximum limits.
func (m *Maximums) checkSpec(spec *execbox.Spec) error {
	if err := m.checkLimits("limits.", spec.Limits); err != nil {
		return err
	}
	spec.Limits = m.applyLimits(spec.Limits)
	return nil
}

// checkExec bounds an exec or start request. Its limits only narrow the
// sandbox's (already bounded), so only their values are checked.
func (m *Maximums) checkExec(req *execbox.ExecRequest) error {
	errs := []error{m.checkLimits("limits.", req.Limits)}
	bound(&errs, "timeout_ms", &req.Timeout, execbox.DefaultTimeout, m.Timeout)
	bound(&errs, "grace_period_ms", &req.GracePeriod, execbox.DefaultGracePeriod, m.Timeout)
	bound(&errs, "output_limit", &req.OutputLimit, execbox.DefaultOutputLimit, m.OutputLimit)
	bound(&errs, "event_window", &req.EventWindow, execbox.DefaultEventWindow, m.EventWindow)
	return errors.Join(errs...)
}

// checkSession bounds the options of a new session as checkExec bounds
// an exec: its limits (which apply to the interpreter and everything it
// starts) and its event window.
func (m *Maximums) checkSession(o *execbox.SessionOptions) error {
	errs := []error{m.checkLimits("limits.", o.Limits)}
	bound(&errs, "event_window", &o.EventWindow, execbox.DefaultEventWindow, m.EventWindow)
	bound(&errs, "grace_period_ms", &o.GracePeriod, execbox.DefaultGracePeriod, m.Timeout)
	return errors.Join(errs...)
}

// checkRun bounds one run of a session: its timeout and output limit.
func (m *Maximums) checkRun(req *execbox.SessionRequest) error {
	var errs []error
	bound(&errs, "timeout_ms", &req.Timeout, execbox.DefaultTimeout, m.Timeout)
	bound(&errs, "output_limit", &req.OutputLimit, execbox.DefaultOutputLimit, m.OutputLimit)
	return errors.Join(errs...)
}

// bound checks *v, whose zero means def, against max (if set): a zero
// *v becomes max where def is over it, and a *v over max is an error
// naming field.
func bound[T int64 | time.Duration](errs *[]error, field string, v *T, def, max T) {
	if max <= 0 {
		return
	}
	if *v == 0 && def > max {
		*v = max
	}
	if *v > max {
		*errs = append(*errs, over(field, *v, max))
	}
}

// exhausted is a count at its maximum.
func exhausted(what string, max int64) error {
	return fmt.Errorf("%s: this server's maximum of %d is reached: %w", what, max, execbox.ErrResourceExhausted)
}

// acquire counts one more running process of s, or fails when the
// maximum is reached; release undoes it.
func (s *sandbox) acquire() error {
	max := s.opts.Max.Processes
	s.mu.Lock()
	defer s.mu.Unlock()
	if max > 0 && s.running >= max {
		return exhausted("processes of sandbox "+s.info.ID, max)
	}
	s.running++
	return nil
}

func (s *sandbox) release() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
}

// releaseWhenDone releases p's count once it ends (or its sandbox closes).
func (s *sandbox) releaseWhenDone(p execbox.Process) {
	go func() {
		_, _ = p.Wait(context.Background())
		s.release()
	}()
}

// checkSessions fails when s has its maximum of open sessions.
func (s *sandbox) checkSessions(r *http.Request, so execbox.SessionOpener) error {
	max := s.opts.Max.Sessions
	if max <= 0 {
		return nil
	}
	list, err := so.Sessions(r.Context())
	if err != nil {
		return err
	}
	if int64(len(list)) >= max {
		return exhausted("sessions of sandbox "+s.info.ID, max)
	}
	return nil
}

// readLimit bounds the limit of a file read: none asked gets the
// default, within the maximum; more than the maximum is invalid.
func (m *Maximums) readLimit(limit int64) (int64, error) {
	if m.ReadSize <= 0 {
		return limit, nil
	}
	if limit == 0 {
		return min(int64(execbox.DefaultReadLimit), m.ReadSize), nil
	}
	if limit > m.ReadSize {
		return 0, over("limit", limit, m.ReadSize)
	}
	return limit, nil
}

// uploadBody bounds the body of a tar upload: a declared length over the
// maximum fails at once, a streamed one when it passes it.
func (m *Maximums) uploadBody(r *http.Request) (io.Reader, error) {
	if m.UploadSize <= 0 {
		return r.Body, nil
	}
	if r.ContentLength > m.UploadSize {
		return nil, tooLarge(m.UploadSize)
	}
	return &boundedReader{r: r.Body, left: m.UploadSize, limit: m.UploadSize}, nil
}

// boundedReader fails with errBodyTooLarge once more than limit bytes
// are read.
type boundedReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, tooLarge(b.limit)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, tooLarge(b.limit)
	}
	return n, err
}
