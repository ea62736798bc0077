package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/fds"
	"golang.org/x/sys/unix"
)

// waitDelay is how long a finished command's pipes may stay open (held by
// a background child) before the Result is made without waiting for EOF:
// it then holds all the pipes held (nothing the command wrote is lost,
// however far behind the readers were) and says which stream was still
// held open (Output.HeldOpen). The pipes are still drained afterwards, so
// the background child never blocks or gets SIGPIPE.
const waitDelay = 200 * time.Millisecond

// readBufSize is the read size from output pipes; pipes are enlarged to
// match so a fast writer needs few wake-ups.
const readBufSize = 1 << 20

// Options describe a process to start. Path must be absolute (resolved by
// the caller) and Env complete: proc adds nothing but the marker.
type Options struct {
	Path string
	Args []string // Args[0] is the program's name as it sees it
	Dir  string   // absolute host path
	Env  []string
	// Shell, if set, names the shell running a shell-form command, for
	// the Result.
	Shell string

	// Stdin is copied to the process and then closed. If nil and
	// Interactive is set, WriteStdin/CloseStdin feed it; otherwise stdin
	// is /dev/null.
	Stdin       io.Reader
	Interactive bool

	// Terminal, if set, runs the process on a new pseudo-terminal; see
	// Terminal.
	Terminal *Terminal

	// Marker identifies the process for tree kills; see MarkerVar.
	Marker string

	Credential *syscall.Credential
	Limits     execbox.Limits // only the rlimit fields are used

	// DropCapabilities makes every command start through the shim, which
	// empties every capability set, the bounding and ambient sets
	// included, on its own thread, and only then switches to Credential
	// and execs the program: a command of any uid then has no privilege
	// at all, and cannot gain one by exec (an empty bounding set). Used
	// where the caller holds capabilities that a setuid alone would not
	// clear (the sandbox's agent keeps its own across setuid, with
	// securebits, and holds them as ambient capabilities).
	DropCapabilities bool

	// Scope, if set, holds every process of the command (a cgroup): it
	// starts the process, is signalled with the tree, and amends the
	// Result. See Scope.
	Scope Scope

	Timeout           time.Duration // > 0
	GracePeriod       time.Duration // > 0
	OutputLimit       int64         // > 0, per stream
	KillOnOutputLimit bool
	EventWindow       int64 // > 0 enables Events
	// FlowControl makes EventWindow a bound on the events no reader has
	// been given, rather than on the events kept: the output readers
	// wait for room, so a slow events reader slows the command as a full
	// pipe does. See eventLog.
	FlowControl bool

	Logger *slog.Logger
}

// Process is a running command with its output capture, event log and
// supervisor. All methods are safe for concurrent use.
type Process struct {
	opts  Options
	cmd   *exec.Cmd
	start time.Time

	stdinW    *os.File  // nil unless Interactive or Stdin
	term      *terminal // nil unless Options.Terminal
	stdinOnce sync.Once

	// mu guards the output buffers and event appends so that sequence
	// numbers follow the order bytes were read. Every read of an output
	// pipe happens under it (see outPipe), so that the supervisor can
	// take exactly what a pipe holds when it makes the Result.
	mu       sync.Mutex
	stdout   *headTail
	stderr   *headTail
	detached bool // result made; readers drain and discard
	log      *eventLog
	// finishing is closed when the supervisor starts making the Result:
	// readers waiting for room in a flow-controlled event log stop
	// waiting (what is left in the pipes is bounded by their size).
	finishing chan struct{}

	outs    []*outPipe // stdout's and stderr's pipes, and the terminal
	readers sync.WaitGroup
	kill    chan execbox.Reason // buffered 1: first kill request wins
	done    chan struct{}
	result  execbox.Result

	// treeMu guards tree, which is cleared once the main process is reaped
	// so a reused PID is never signalled.
	treeMu sync.Mutex
	tree   treeQuery
}

// Start starts a process. The error is an *exec.Error-free classification:
// ErrNotFound for a missing program, ErrPermission for one that cannot be
// executed, ErrResourceExhausted for EAGAIN/EMFILE/ENOMEM.
func Start(opts Options) (*Process, error) {
	p := newProcess(opts)
	l := newLaunch(opts)
	err := p.openStdio(l)
	if err == nil {
		err = p.launch(l)
	}
	if err != nil {
		p.undo(l)
		return nil, err
	}
	p.run(l)
	return p, nil
}

// newProcess returns the Process before anything is opened: its capture
// buffers, kill channel and, if asked for, event log.
func newProcess(opts Options) *Process {
	p := &Process{
		opts:   opts,
		stdout: newHeadTail(opts.OutputLimit),
		stderr: newHeadTail(opts.OutputLimit),
		kill:   make(chan execbox.Reason, 1),
		done:   make(chan struct{}),

		finishing: make(chan struct{}),
	}
	if opts.EventWindow > 0 {
		p.log = newEventLog(opts.EventWindow, opts.FlowControl)
	}
	return p
}

// launchState is what Start has set up for a process not yet running: the
// command and every descriptor opened for it, so that one undo path
// (Process.undo) can close them all if the process never starts.
type launchState struct {
	cmd     *exec.Cmd
	shimmed bool // cmd execs the shim, which execs the program

	outR, errR *os.File   // the reading ends of stdout and stderr
	statusR    *os.File   // the reading end of the shim's status pipe, or nil
	childEnds  []*os.File // the child's ends of the pipes: closed once it started
}

// newLaunch builds the command: the program with the marker in its
// environment, in its own process group, killed with its parent. A
// command that needs rlimits, a capability drop or a descriptor marked
// close-on-exec runs through the shim, since Go cannot do those between
// fork and exec.
func newLaunch(opts Options) *launchState {
	path, args := opts.Path, opts.Args
	env := append(opts.Env[:len(opts.Env):len(opts.Env)], MarkerVar+"="+opts.Marker)
	cred := opts.Credential
	rl := rlimitsOf(opts.Limits)
	drop := opts.DropCapabilities
	// A descriptor this process holds without close-on-exec (the
	// caller's) would cross Go's exec; the shim marks it first.
	leaky, _ := fds.Leaky(3)
	shimmed := len(rl) > 0 || drop || len(leaky) > 0
	if shimmed {
		// Rlimits and capabilities cannot be set between fork and exec
		// from Go; a re-exec of this binary sets them on itself and then
		// execs the program.
		env = append(env, shimEnv+"="+encodeRlimits(rl))
		if drop {
			// The shim switches to the credential itself, after
			// dropping the capabilities that doing so requires.
			env = append(env, shimDropEnv+"="+encodeCredential(cred))
			cred = nil
		}
		args = append([]string{shimArg0, path}, args...)
		path = "/proc/self/exe"
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: args,
		Dir:  opts.Dir,
		Env:  env,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL,
			Credential: cred,
		},
	}
	return &launchState{cmd: cmd, shimmed: shimmed}
}

// openStdio wires the standard streams: a pipe each for stdout and
// stderr, one for stdin when something will feed it, and the terminal if
// asked for. Everything opened is recorded in l at once, for undo. The
// errors are classified already.
func (p *Process) openStdio(l *launchState) error {
	cmd := l.cmd
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	l.outR, l.childEnds = outR, append(l.childEnds, outW)
	errR, errW, err := pipe()
	if err != nil {
		return err
	}
	l.errR, l.childEnds = errR, append(l.childEnds, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	if p.opts.Stdin != nil || p.opts.Interactive {
		inR, inW, err := os.Pipe()
		if err != nil {
			return classify(err)
		}
		cmd.Stdin = inR
		l.childEnds = append(l.childEnds, inR)
		p.stdinW = inW
	}
	if p.opts.Terminal != nil {
		if p.term, err = p.attachTerminal(cmd); err != nil {
			return err
		}
		if p.term.slave != nil {
			l.childEnds = append(l.childEnds, p.term.slave)
		}
	}
	return nil
}

// launch starts the command (in the scope, if any) and closes the
// child's ends. Through the shim it then waits for the shim's exec of
// the program, so that a program the shim could not run fails Start as
// one that could not be started would; that process is reaped already.
func (p *Process) launch(l *launchState) error {
	cmd := l.cmd
	if l.shimmed {
		r, w, err := os.Pipe()
		if err != nil {
			return classify(err)
		}
		l.statusR = r
		cmd.ExtraFiles = append(cmd.ExtraFiles, w)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", shimStatusEnv, 2+len(cmd.ExtraFiles)))
		l.childEnds = append(l.childEnds, w)
	}

	p.start = time.Now()
	startCmd := cmd.Start
	if p.opts.Scope != nil {
		startCmd = func() error { return p.opts.Scope.Start(cmd) }
	}
	beginStart()
	err := startCmd()
	if err != nil {
		endStart(0)
		return classify(err)
	}
	endStart(cmd.Process.Pid)
	closeAll(l.childEnds)
	l.childEnds = nil
	if l.statusR != nil {
		// Empty at the shim's exec of the program (the pipe is
		// close-on-exec); the shim's error otherwise.
		msg, _ := io.ReadAll(l.statusR)
		if len(msg) > 0 {
			_ = cmd.Wait()
			waited(cmd.Process.Pid)
			return classify(shimError(msg))
		}
		l.statusR.Close()
		l.statusR = nil
	}
	return nil
}

// undo releases what Start set up for a process that did not start (or
// whose shim could not exec the program, already reaped): every
// descriptor opened for it, and its scope, which Scope promises a
// Finish exactly once.
func (p *Process) undo(l *launchState) {
	closeAll(l.childEnds)
	for _, f := range []*os.File{l.outR, l.errR, l.statusR, p.stdinW} {
		if f != nil {
			f.Close()
		}
	}
	if p.term != nil {
		p.term.close()
	}
	if p.opts.Scope != nil {
		p.opts.Scope.Finish(nil)
	}
}

// run sets the started process going: the readers of its output, the
// copy of Stdin, and the supervisor that ends it and publishes the
// Result.
func (p *Process) run(l *launchState) {
	p.cmd = l.cmd
	pid := l.cmd.Process.Pid
	p.tree = treeQuery{root: pid, pgrp: pid, marker: p.opts.Marker, scope: p.opts.Scope}

	p.startReader(l.outR, p.stdout, execbox.EventStdout)
	p.startReader(l.errR, p.stderr, execbox.EventStderr)
	if p.term != nil {
		p.readTerminal()
	}
	if p.opts.Stdin != nil {
		go func() {
			_, _ = io.Copy(p.stdinW, p.opts.Stdin)
			p.closeStdin()
		}()
	}
	go p.supervise()
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func pipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, classify(err)
	}
	// Best effort: a bigger pipe means fewer context switches for chatty
	// programs. Unprivileged callers are capped by pipe-max-size.
	// (Not through r.Fd(), which would make r blocking: its reader reads
	// non-blocking, under a mutex.)
	if rc, err := r.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, readBufSize) })
	}
	return r, w, nil
}

// outPipe is the reading end of stdout or stderr and what has been read
// from it. Reads are non-blocking and happen only under Process.mu,
// whether the stream's reader or the supervisor makes them: every byte
// read is kept and counted (or, after the Result, discarded) in order.
type outPipe struct {
	f    *os.File
	rc   syscall.RawConn
	buf  *headTail
	kind execbox.EventKind

	// Under Process.mu:
	scratch *[]byte // pooled buffer for small reads and discarded bytes
	direct  bool    // the stream looks big: read straight into buf
	eof     bool    // every writer has closed the pipe
}

// startReader starts reading f (a pipe, or a terminal's master) into buf
// and the events of kind.
func (p *Process) startReader(f *os.File, buf *headTail, kind execbox.EventKind) {
	o := &outPipe{f: f, buf: buf, kind: kind, scratch: smallBufs.Get().(*[]byte)}
	o.rc, _ = f.SyscallConn() // an *os.File from os.Pipe or OpenFile always has one
	p.outs = append(p.outs, o)
	p.readers.Add(1)
	go p.read(o)
}

// readLocked reads once from o's descriptor fd, at most max bytes,
// keeping what it read (before the Result) or discarding it (after).
// n == 0 with a nil error is the end of the stream. p.mu held.
func (p *Process) readLocked(o *outPipe, fd uintptr, max int) (int, error) {
	var b []byte
	if o.direct && !p.detached {
		b = o.buf.next(min(max, readBufSize))
	}
	direct := len(b) > 0
	if !direct {
		b = (*o.scratch)[:min(max, len(*o.scratch))]
	}
	n, err := unix.Read(int(fd), b)
	if n <= 0 {
		if err == nil {
			o.eof = true
		}
		return 0, err
	}
	if p.detached {
		return n, nil
	}
	if direct {
		o.buf.commit(n)
	} else {
		o.buf.Write(b[:n])
	}
	if p.log != nil {
		p.log.append(o.kind, b[:n], nil)
	}
	if p.opts.KillOnOutputLimit && o.buf.total > p.opts.OutputLimit {
		p.requestKill(execbox.ReasonOutputLimit)
	}
	// Most commands print little: reads start in the small pooled
	// buffer and go straight into the capture buffer (no copy) once a
	// read has filled it and the stream looks big.
	if !o.direct && n == len(b) {
		o.direct = true
	}
	return n, nil
}

// read drains one stream into its buffer and the event log until EOF.
// With a flow-controlled event log it reads only while the log has room,
// so a slow events reader slows the command as a full pipe would. After
// the Result is made it keeps draining, discarding, so that a background
// child holding the pipe never blocks.
func (p *Process) read(o *outPipe) {
	defer p.readers.Done()
	defer func() {
		p.mu.Lock()
		smallBufs.Put(o.scratch)
		o.scratch = nil
		p.mu.Unlock()
		o.f.Close()
	}()
	for {
		if p.log != nil {
			p.log.waitRoom(p.finishing)
		}
		var rerr error
		eof := false
		err := o.rc.Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer func() { eof = o.eof; p.mu.Unlock() }()
			if o.eof || o.scratch == nil {
				return true
			}
			for {
				_, rerr = p.readLocked(o, fd, readBufSize)
				if rerr != unix.EINTR {
					return rerr != unix.EAGAIN
				}
			}
		})
		if err != nil || eof || rerr != nil {
			return
		}
	}
}

// drainLocked reads everything o's pipe holds now (FIONREAD counts it),
// so that what the command wrote before it exited is all in the Result,
// however far the reader had fallen behind. It then reports whether a
// writer still holds the pipe open (a process the command left
// running): a byte it already wrote is read and kept too. p.mu held.
func (p *Process) drainLocked(o *outPipe) (heldOpen bool) {
	if o.eof || o.scratch == nil {
		return false
	}
	_ = o.rc.Control(func(fd uintptr) {
		left, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
		for err == nil && left > 0 {
			var n int
			n, err = p.readLocked(o, fd, left)
			left -= n
			if err == unix.EINTR {
				err = nil
			} else if n == 0 {
				break
			}
		}
		// One more read: EOF, or a writer is left. (Not a loop: a
		// background "yes" would keep it going.)
		for !o.eof {
			n, err := p.readLocked(o, fd, len(*o.scratch))
			if err == unix.EINTR {
				continue
			}
			heldOpen = n > 0 || err == unix.EAGAIN
			return
		}
	})
	return heldOpen
}

// smallBufs hold the reads of streams that print little.
var smallBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func (p *Process) requestKill(r execbox.Reason) {
	select {
	case p.kill <- r:
	default:
	}
}

// supervise waits for the process to end or to be killed, then reaps it and
// publishes the Result.
func (p *Process) supervise() {
	exited := waitExited(p.cmd.Process.Pid)

	var timer <-chan time.Time
	if p.opts.Timeout > 0 {
		t := time.NewTimer(p.opts.Timeout)
		defer t.Stop()
		timer = t.C
	}
	var reason execbox.Reason
	select {
	case <-exited:
	case <-timer:
		reason = execbox.ReasonTimedOut
	case reason = <-p.kill:
	}
	if reason != "" {
		p.terminate(exited)
	}

	// The main process is gone. Give the pipes a moment to reach EOF (a
	// background child may hold them); then take all they hold: a reader
	// far behind (a loaded machine) loses nothing.
	readersDone := make(chan struct{})
	go func() { p.readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(waitDelay):
	}
	close(p.finishing)
	p.closeStdin()

	p.treeMu.Lock()
	_ = p.cmd.Wait() // reaps; the status is in ProcessState
	waited(p.cmd.Process.Pid)
	p.tree.root, p.tree.pgrp = 0, 0
	p.treeMu.Unlock()

	p.mu.Lock()
	held := map[*headTail]bool{}
	for _, o := range p.outs {
		held[o.buf] = p.drainLocked(o) || held[o.buf]
	}
	p.detached = true
	res := p.buildResult(reason)
	res.Stdout.HeldOpen, res.Stderr.HeldOpen = held[p.stdout], held[p.stderr]
	if p.opts.Scope != nil {
		p.opts.Scope.Finish(&res)
	}
	p.result = res
	if p.log != nil {
		r := res
		p.log.append(execbox.EventExit, nil, &r)
	}
	p.mu.Unlock()
	close(p.done)
}

// terminate sends SIGTERM to the tree, waits up to the grace period for it
// to go, then SIGKILLs until nothing is left.
func (p *Process) terminate(exited <-chan struct{}) {
	p.treeMu.Lock()
	q := p.tree
	p.treeMu.Unlock()
	q.signal(syscall.SIGTERM)
	grace := time.NewTimer(p.opts.GracePeriod)
	defer grace.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-grace.C:
			break wait
		case <-tick.C:
			select {
			case <-exited:
				if !q.alive() {
					return
				}
			default:
			}
		}
	}
	if !q.kill(time.Now().Add(5 * time.Second)) {
		p.opts.Logger.Warn("process tree survived SIGKILL", "marker", p.opts.Marker)
	}
	<-exited
}

func (p *Process) buildResult(reason execbox.Reason) execbox.Result {
	st := p.cmd.ProcessState
	res := execbox.Result{
		ExitCode: -1,
		Stdout:   p.stdout.Output(),
		Stderr:   p.stderr.Output(),
		Duration: time.Since(p.start),
		Shell:    p.opts.Shell,
	}
	if st == nil {
		res.Reason = execbox.ReasonError
		res.Detail = "process state lost"
		return res
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		res.UserTime = time.Duration(ru.Utime.Nano())
		res.SystemTime = time.Duration(ru.Stime.Nano())
		res.PeakMemory = ru.Maxrss * 1024
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.Signal = execbox.Signal(ws.Signal())
	}
	switch {
	case reason != "":
		res.Reason = reason
	case res.Signal == execbox.SIGXCPU,
		res.Signal == execbox.SIGKILL && p.opts.Limits.CPUTime > 0 && res.CPUTime() >= p.opts.Limits.CPUTime:
		res.Reason = execbox.ReasonCPULimit
		res.Detail = fmt.Sprintf("CPU time limit of %s exceeded", p.opts.Limits.CPUTime)
	case res.Signal != 0:
		res.Reason = execbox.ReasonSignaled
		if res.Signal == execbox.SIGXFSZ {
			res.Detail = fmt.Sprintf("file size limit of %d bytes exceeded", p.opts.Limits.FileSize)
		}
	default:
		res.Reason = execbox.ReasonExited
	}
	return res
}

// Done is closed when the Result is ready.
func (p *Process) Done() <-chan struct{} { return p.done }

// Result returns the Result once Done is closed.
func (p *Process) Result() (execbox.Result, bool) {
	select {
	case <-p.done:
		return p.result, true
	default:
		return execbox.Result{}, false
	}
}

// Wait waits for the Result or ctx.
func (p *Process) Wait(ctx context.Context) (execbox.Result, error) {
	select {
	case <-p.done:
		return p.result, nil
	case <-ctx.Done():
		return execbox.Result{}, ctx.Err()
	}
}

// Stop ends the whole tree with reason (ReasonKilled for Kill and Close)
// and waits for the Result. After the process ended by itself it still
// kills the descendants it left running, and the Result is unchanged.
func (p *Process) Stop(ctx context.Context, reason execbox.Reason) (execbox.Result, error) {
	p.requestKill(reason)
	select {
	case <-p.done:
	case <-ctx.Done():
		return execbox.Result{}, ctx.Err()
	}
	q := treeQuery{marker: p.opts.Marker, scope: p.opts.Scope}
	q.kill(time.Now().Add(5 * time.Second))
	return p.result, nil
}

// Signal sends sig to the main process.
func (p *Process) Signal(sig syscall.Signal) error {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	if p.tree.root == 0 {
		return fmt.Errorf("process has exited: %w", execbox.ErrClosed)
	}
	return syscall.Kill(p.tree.root, sig)
}

// WriteStdin writes to stdin, honouring ctx while the pipe is full.
func (p *Process) WriteStdin(ctx context.Context, b []byte) (int, error) {
	if p.stdinW == nil || p.opts.Stdin != nil {
		return 0, execbox.Invalid("stdin", "process was not started with interactive stdin")
	}
	stop := context.AfterFunc(ctx, func() { _ = p.stdinW.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	n, err := p.stdinW.Write(b)
	if err != nil {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			return n, fmt.Errorf("stdin: %w", execbox.ErrClosed)
		}
		return n, err
	}
	return n, nil
}

// CloseStdin closes stdin; the program reads EOF.
func (p *Process) CloseStdin() error {
	if p.stdinW == nil {
		return nil
	}
	p.closeStdin()
	return nil
}

func (p *Process) closeStdin() {
	if p.stdinW != nil {
		p.stdinOnce.Do(func() { p.stdinW.Close() })
	}
}

// Events yields the event log from seq from. It is empty when the process
// was started without an event window.
func (p *Process) Events(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	if p.log == nil {
		return func(func(execbox.Event, error) bool) {}
	}
	return p.log.read(ctx, from)
}

// KillMarked kills every process carrying a marker that starts with prefix
// (a whole sandbox), until none is left or the deadline passes.
func KillMarked(prefix string, deadline time.Time) bool {
	return treeQuery{marker: prefix, prefix: true}.kill(deadline)
}

func classify(err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &classified{err, execbox.ErrNotFound}
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return &classified{err, execbox.ErrPermission}
	case errors.As(err, &errno) && (errno == syscall.EAGAIN || errno == syscall.EMFILE ||
		errno == syscall.ENFILE || errno == syscall.ENOMEM || errno == syscall.ENOSPC):
		return &classified{err, execbox.ErrResourceExhausted}
	}
	return err
}

// classified wraps an OS error with an execbox kind, keeping both visible
// to errors.Is.
type classified struct {
	err  error
	kind error
}

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.err, c.kind} }
