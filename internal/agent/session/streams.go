package session

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
	"github.com/execbox/execbox/internal/dirfd"
)

// A slot is the FIFO behind one of the commands' streams (stdout or
// stderr), with its capture. It serves command after command while no
// background job holds it; when one does after its command ended, the
// FIFO is unlinked and left to that job (drained and discarded), and the
// next command gets a new one. So the common command costs no mkfifo.
type slot struct {
	path string
	cap  *proc.Capture
}

// streams are the FIFOs of one command.
type streams struct {
	s       *Session
	slots   [2]*slot // stdout, stderr
	outPath string
	errPath string
	inPath  string // "" means /dev/null
	in      *stdinFeed
	done    bool
}

// stdinFeed copies a request's Stdin into the command's stdin FIFO. The
// FIFO's two ends meet when both are open: the copy opens the write end
// (blocking) while the interpreter opens the read end for the command.
// Opening ours first and closing it after the last byte could lose the
// data, and hang the command's open, if it came before the command's.
type stdinFeed struct {
	dir    *dirfd.Dir
	name   string        // the FIFO in dir
	opened chan struct{} // closed once the open of the write end returned

	mu   sync.Mutex
	f    *os.File // the write end, once open
	done bool     // the command ended: stop
}

func (in *stdinFeed) run(r io.Reader) {
	f, err := in.dir.OpenFIFO(in.name, os.O_WRONLY)
	close(in.opened)
	if err != nil {
		return
	}
	in.mu.Lock()
	if in.done {
		in.mu.Unlock()
		f.Close()
		return
	}
	in.f = f
	in.mu.Unlock()
	_, _ = io.Copy(f, r)
	f.Close() // the command reads EOF
}

// stop ends the copy once the command has ended: an open still waiting
// for a reader is given one, a write blocked on a full pipe gives up.
func (in *stdinFeed) stop() {
	in.mu.Lock()
	in.done = true
	f := in.f
	in.mu.Unlock()
	if f != nil {
		_ = f.SetWriteDeadline(time.Unix(1, 0))
		return
	}
	// Be the reader the open waits for, until it has returned.
	if r, err := in.dir.OpenFIFO(in.name, os.O_RDONLY|syscall.O_NONBLOCK); err == nil {
		<-in.opened
		r.Close()
	}
}

// errSlotsClosed: the session ended while a command was being set up.
var errSlotsClosed = errors.New("session ended")

// openStreams readies the FIFOs of command n: stdout and stderr from the
// slots (made anew if needed), stdin from r if not nil.
func (s *Session) openStreams(n uint64, r io.Reader, limit int64) (st *streams, err error) {
	st = &streams{s: s}
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	if s.slotsClosed {
		return nil, errSlotsClosed
	}
	for i, name := range []string{"o", "e"} {
		sl := s.slots[i]
		if sl == nil {
			path, f, err := s.mkfifo(name, n, os.O_RDONLY)
			if err != nil {
				return nil, err
			}
			c, err := proc.NewCapture(f, limit)
			if err != nil {
				s.pdir.Remove(filepath.Base(path))
				return nil, err
			}
			sl = &slot{path: path, cap: c}
			s.slots[i] = sl
		} else {
			sl.cap.Restart(limit)
		}
		st.slots[i] = sl
	}
	st.outPath, st.errPath = st.slots[0].path, st.slots[1].path
	if r != nil {
		path, _, err := s.mkfifo("i", n, -1)
		if err != nil {
			st.finish(nil)
			return nil, err
		}
		st.inPath = path
		st.in = &stdinFeed{dir: s.pdir, name: filepath.Base(path), opened: make(chan struct{})}
		go st.in.run(r)
	}
	return st, nil
}

// mkfifo makes the FIFO NAME.N of the private directory, owned by the
// session's user, and opens it with flag (unless flag is -1),
// non-blocking: opening a read end then does not wait for a writer, and
// the descriptor is pollable. It returns the FIFO's path, for the
// interpreter.
func (s *Session) mkfifo(name string, n uint64, flag int) (string, *os.File, error) {
	name += "." + itoa(n)
	if err := s.pdir.Mkfifo(name, s.uid, s.gid); err != nil {
		s.pdir.Remove(name)
		return "", nil, err
	}
	path := filepath.Join(s.dir, name)
	if flag == -1 {
		return path, nil, nil
	}
	f, err := s.pdir.OpenFIFO(name, flag|syscall.O_NONBLOCK)
	if err != nil {
		s.pdir.Remove(name)
		return "", nil, err
	}
	return path, f, nil
}

// finish sets res's Stdout and Stderr (res may be nil) to what the
// command wrote, and retires a slot a background job still holds.
func (st *streams) finish(res *execbox.SessionResult) {
	if st.done {
		return
	}
	st.done = true
	s := st.s
	s.slotMu.Lock()
	for i, sl := range st.slots {
		if sl == nil {
			continue
		}
		out, idle := sl.cap.Finish()
		if res != nil {
			if i == 0 {
				res.Stdout = out
			} else {
				res.Stderr = out
			}
		}
		if !idle || s.slotsClosed {
			s.pdir.Remove(filepath.Base(sl.path))
			sl.cap.Release()
			if s.slots[i] == sl {
				s.slots[i] = nil
			}
		}
	}
	s.slotMu.Unlock()
	if st.in != nil {
		st.in.stop()
		s.pdir.Remove(st.in.name)
	}
}

// closeSlots releases the slots for good (the session ended). The caller
// holds the turn: no command is using them.
func (s *Session) closeSlots() {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	s.slotsClosed = true
	for i, sl := range s.slots {
		if sl != nil {
			s.pdir.Remove(filepath.Base(sl.path))
			sl.cap.Release()
			s.slots[i] = nil
		}
	}
}
