package proc

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/execbox/execbox"
	"golang.org/x/sys/unix"
)

// Capture keeps what a FIFO (or pipe) carries within a limit, the way a
// process's stdout and stderr are kept (head and tail, never more than the
// limit in memory), for streams that are not a process's own: the output
// of the commands of a session, one command (a round) after another.
//
// A command's end is not its stream's EOF: a background job it started may
// hold the stream open for hours. Finish therefore takes exactly what is
// in the pipe when it is called (all that was written before: FIONREAD
// counts it), and then tells whether a writer still holds the stream. If
// none does, the FIFO can serve the next command (Restart): no new FIFO
// per command. If one does, the caller unlinks the FIFO and Releases the
// capture, which drains and discards until that writer closes it, so that
// the job never blocks on a full pipe. No wait for an EOF that may never
// come.
type Capture struct {
	f    *os.File
	rc   syscall.RawConn
	done chan struct{}

	// mu guards the buffer and serialises reads, so that every byte read
	// is kept (or discarded) in order and Finish sees a consistent pipe.
	mu       sync.Mutex
	buf      *headTail
	scratch  *[]byte // nil once the reader has stopped
	keeping  bool    // a round is on: keep what is read
	released bool    // no new writer can come: the next EOF is final
}

// NewCapture starts capturing f, the read end of a FIFO opened with
// O_NONBLOCK (so that it is pollable), keeping at most limit bytes (> 0)
// of the first round. The capture owns f. A FIFO without a writer is not
// at its end until Release: its next writer may not have opened it yet.
func NewCapture(f *os.File, limit int64) (*Capture, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &Capture{
		f:       f,
		rc:      rc,
		done:    make(chan struct{}),
		buf:     newHeadTail(limit),
		scratch: smallBufs.Get().(*[]byte),
		keeping: true,
	}
	go c.loop()
	return c, nil
}

// loop reads as data comes, until the final EOF or until f is closed.
func (c *Capture) loop() {
	defer close(c.done)
	_ = c.rc.Read(func(fd uintptr) bool {
		for {
			c.mu.Lock()
			n, err := c.readLocked(int(fd), len(*c.scratch))
			released := c.released
			c.mu.Unlock()
			switch {
			case n > 0, err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false // wait for data or a hang-up
			case err == nil && !released:
				return false // no writer now; the next one will come
			}
			return true // final EOF, or an error
		}
	})
	c.f.Close()
	c.mu.Lock()
	smallBufs.Put(c.scratch)
	c.scratch = nil
	c.mu.Unlock()
}

// readLocked reads at most max bytes once, keeping them if a round is on.
func (c *Capture) readLocked(fd, max int) (int, error) {
	if c.scratch == nil {
		return 0, os.ErrClosed
	}
	b := (*c.scratch)[:min(max, len(*c.scratch))]
	n, err := unix.Read(fd, b)
	if n <= 0 {
		return 0, err
	}
	if c.keeping {
		c.buf.Write(b[:n])
	}
	return n, err
}

// Finish ends the round: it returns what the stream carried up to now,
// everything already in the pipe included, and stops keeping. idle reports
// that no writer holds the stream any more: the FIFO may serve another
// round (Restart). Otherwise what is written later is not this round's,
// and the caller should unlink the FIFO and Release the capture.
func (c *Capture) Finish() (out execbox.Output, idle bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.rc.Control(func(fd uintptr) {
		if c.scratch == nil {
			return
		}
		left, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
		for err == nil && left > 0 {
			var n int
			n, err = c.readLocked(int(fd), left)
			left -= n
			if err == unix.EINTR {
				err = nil
			} else if n == 0 {
				break
			}
		}
		// Does a writer (a background job) still hold the stream? What
		// it wrote meanwhile is not the command's: discard it.
		c.keeping = false
		n, err := c.readLocked(int(fd), 1)
		idle = n == 0 && err == nil
	})
	c.keeping = false
	out = c.buf.Output()
	c.buf = nil
	return out, idle
}

// Restart starts a new round keeping at most limit bytes. Call it only
// after Finish reported the stream idle.
func (c *Capture) Restart(limit int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = newHeadTail(limit)
	c.keeping = true
}

// Release says no new writer can open the stream (the FIFO is unlinked):
// the capture drains and discards until the writers it has close it, then
// closes it. Call it after Finish.
func (c *Capture) Release() {
	c.mu.Lock()
	c.released = true
	c.keeping = false
	idle := false
	_ = c.rc.Control(func(fd uintptr) {
		// Drain what is there: EOF means no writer is left; EAGAIN means
		// one is, and the reader will hear when it writes or closes.
		for c.scratch != nil {
			n, err := c.readLocked(int(fd), len(*c.scratch))
			if n > 0 || err == unix.EINTR {
				continue
			}
			idle = err == nil
			return
		}
	})
	c.mu.Unlock()
	if idle {
		// Nothing holds it: stop the reader now rather than waiting for
		// a hang-up it may already have consumed. (Not under mu: Close
		// waits for the reader to let go of the descriptor.)
		c.Close()
	}
}

// Done is closed when the reader has stopped: the final EOF was read, or
// the capture was closed.
func (c *Capture) Done() <-chan struct{} { return c.done }

// Close stops the reader at once and discards the rest of the stream.
func (c *Capture) Close() error {
	err := c.f.Close()
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}
