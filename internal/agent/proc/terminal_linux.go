package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/execbox/execbox"
	"golang.org/x/sys/unix"
)

// Terminal asks Start to run the process on a new pseudo-terminal, as the
// leader of a new session whose controlling terminal it is: job control
// works, and the terminal knows its foreground process group, which is
// what Interrupt signals. The process group used for tree kills is the
// session's (the leader's PID), as without a terminal.
type Terminal struct {
	// Rows and Cols are the initial window size; zero means 24x80.
	Rows, Cols uint16
	// Stdio makes the terminal the process's standard input, output and
	// error: what the terminal prints is the stdout stream (and its
	// events), and WriteStdin types into it. Without Stdio the terminal is
	// only the controlling terminal and the standard streams are set up as
	// without one; whatever is written to the terminal then is kept with
	// the stderr stream. The process receives the terminal's slave as
	// file descriptor 3 and should close it (it reopens it as /dev/tty).
	Stdio bool
}

// terminal is the master side of a process's pseudo-terminal.
type terminal struct {
	master *os.File // pollable; read by a reader, closed at EOF
	slave  *os.File // the child's; closed after start
	hold   *os.File // the slave, held until the process exits (no Stdio)
}

// openPTY opens a new pseudo-terminal pair of the given size. The slave is
// obtained with TIOCGPTPEER where the kernel has it (4.13), which needs no
// path lookup in /dev/pts (safe in a mount namespace with its own devpts),
// else through its path.
func openPTY(rows, cols uint16) (*terminal, error) {
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, classify(err)
	}
	var sfd int
	rc, err := m.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err != nil {
				err = fmt.Errorf("unlock pty: %w", err)
				return
			}
			if err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
				err = fmt.Errorf("set pty size: %w", err)
				return
			}
			r, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
			if errno == 0 {
				sfd = int(r)
				return
			}
			n, perr := unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
			if perr != nil {
				err = fmt.Errorf("pty number: %w", perr)
				return
			}
			sfd, err = unix.Open("/dev/pts/"+strconv.FormatUint(uint64(n), 10), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			if err != nil {
				err = fmt.Errorf("open pty slave: %w", err)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.Close()
		return nil, classify(err)
	}
	return &terminal{master: m, slave: os.NewFile(uintptr(sfd), "pty")}, nil
}

// attachTerminal opens the process's terminal and wires it into cmd, which
// is ready but not started: a new session with the terminal as controlling
// terminal, and with Terminal.Stdio the terminal as the standard streams,
// replacing the pipes (which then reach EOF at once) and making stdin
// writes go to the master.
func (p *Process) attachTerminal(cmd *exec.Cmd) (*terminal, error) {
	t := p.opts.Terminal
	term, err := openPTY(t.Rows, t.Cols)
	if err != nil {
		return nil, err
	}
	attr := cmd.SysProcAttr
	attr.Setpgid = false // a session leader leads its own process group
	attr.Setsid = true
	attr.Setctty = true
	if !t.Stdio {
		cmd.ExtraFiles = append([]*os.File{term.slave}, cmd.ExtraFiles...)
		attr.Ctty = 3
		// Hold the slave until the process exits (readTerminal): were
		// the process to close its fd 3 before opening /dev/tty, no one
		// would hold the slave, the master's reader would read EIO and
		// close the master, and the kernel would hang the session up.
		term.hold = term.slave
		term.slave = nil
		return term, nil
	}
	attr.Ctty = 0
	if p.stdinW != nil {
		p.stdinW.Close()
		p.stdinW = nil
	}
	if p.opts.Stdin != nil || p.opts.Interactive {
		// Writes go through a duplicate of the master, so that closing
		// stdin (at exit) never closes the master under its reader.
		// (Not through master.Fd(), which would make the master
		// blocking: its reader reads non-blocking, under a mutex.)
		fd, err := -1, error(nil)
		if rc, cerr := term.master.SyscallConn(); cerr != nil {
			err = cerr
		} else if cerr := rc.Control(func(m uintptr) { fd, err = unix.FcntlInt(m, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
			err = cerr
		}
		if err != nil {
			term.master.Close()
			term.slave.Close()
			return nil, classify(err)
		}
		p.stdinW = os.NewFile(uintptr(fd), "pty")
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = term.slave, term.slave, term.slave
	return term, nil
}

// readTerminal starts the reader of the master. Reading the master ends
// with EIO once no process holds the slave; that is its EOF.
func (p *Process) readTerminal() {
	buf, kind := p.stderr, execbox.EventStderr
	if p.opts.Terminal.Stdio {
		buf, kind = p.stdout, execbox.EventStdout
	}
	p.startReader(p.term.master, buf, kind)
	if hold := p.term.hold; hold != nil {
		exited := waitExited(p.cmd.Process.Pid)
		go func() {
			<-exited
			hold.Close()
		}()
	}
}

// masterIoctl runs f on the master's descriptor, unless the master is
// already closed (the process and everything holding its terminal ended).
func (p *Process) masterIoctl(f func(fd int) error) error {
	if p.term == nil {
		return execbox.Invalid("terminal", "process was not started on a terminal")
	}
	rc, err := p.term.master.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("terminal: %w", execbox.ErrClosed)
		}
		return err
	}
	return ferr
}

// Resize sets the terminal's window size; the foreground process group
// gets SIGWINCH.
func (p *Process) Resize(rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return execbox.Invalid("size", "rows and cols must be positive")
	}
	return p.masterIoctl(func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// foreground returns the process group in the foreground of the
// terminal, or the main process's own group without a terminal. The
// caller holds treeMu and has checked that the main process is not reaped.
func (p *Process) foreground() int {
	if p.term == nil {
		return p.tree.pgrp
	}
	var pgrp int
	err := p.masterIoctl(func(fd int) error {
		var err error
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil || pgrp <= 0 {
		return p.tree.pgrp
	}
	return pgrp
}

// Interrupt does what Ctrl-C does at a terminal, and a little more: it
// sends SIGINT to the foreground process group (of the process's terminal,
// or the process's own group without one) and to the main process itself.
// A shell (the main process) waiting for a foreground job then abandons the
// rest of its command line once the job ends, even when the job ignores
// SIGINT and is killed otherwise (KillForeground).
func (p *Process) Interrupt() error {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	if p.tree.root == 0 {
		return fmt.Errorf("process has exited: %w", execbox.ErrClosed)
	}
	fg := p.foreground()
	err := syscall.Kill(-fg, syscall.SIGINT)
	if fg != p.tree.pgrp {
		if kerr := syscall.Kill(p.tree.root, syscall.SIGINT); err == nil {
			err = kerr
		}
	}
	if errors.Is(err, syscall.ESRCH) {
		err = nil // the group ended meanwhile
	}
	return err
}

// KillForeground sends SIGKILL to the terminal's foreground process group,
// unless that group is the main process's own, which it leaves alone; it
// reports whether it signalled a group.
func (p *Process) KillForeground() (bool, error) {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	if p.tree.root == 0 {
		return false, fmt.Errorf("process has exited: %w", execbox.ErrClosed)
	}
	fg := p.foreground()
	if fg == p.tree.pgrp {
		return false, nil
	}
	if err := syscall.Kill(-fg, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, err
	}
	return true, nil
}

// PID returns the main process's ID, or 0 once it has been reaped.
func (p *Process) PID() int {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	return p.tree.root
}

// close closes what a process that did not start leaves open.
func (t *terminal) close() {
	t.master.Close()
	if t.hold != nil {
		t.hold.Close()
	}
}
