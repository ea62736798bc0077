package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
	"github.com/execbox/execbox/internal/dirfd"
	"golang.org/x/sys/unix"
)

// noiseLimit caps what is kept of the interpreter's own stdout and stderr
// (prompts, job notices, the driver's crash): diagnostics only.
const noiseLimit = 64 << 10

// ptyOutputLimit caps the terminal output a PTY session's Wait returns;
// the event log is the real channel.
const ptyOutputLimit = 1 << 20

// readyTimeout bounds the interpreter's start-up when the caller's
// context has no deadline.
const readyTimeout = 30 * time.Second

// Config describes a session to open.
type Config struct {
	// ID identifies the session in its sandbox ("s1").
	ID   string
	Kind execbox.SessionKind
	// Start starts the interpreter as one of the sandbox's processes: it
	// builds the options every command gets (program path, environment,
	// limits, user, marker, scope), lets adjust set what is the session's
	// own, and starts it.
	Start func(adjust func(*proc.Options) error) (*proc.Process, error)
	// Rows, Cols and EventWindow are the terminal of a PTY session.
	Rows, Cols  uint16
	EventWindow int64
	FlowControl bool // see execbox.SessionOptions.FlowControl
	// GracePeriod: between SIGINT and SIGKILL of a timed-out command, and
	// between SIGTERM and SIGKILL on Close. Zero means the default.
	GracePeriod time.Duration
	// TempDir is where private directories are made; empty means
	// /dev/shm when it is a writable tmpfs, else os.TempDir().
	TempDir string
	Logger  *slog.Logger
}

// Session is one session. It implements execbox.Session.
type Session struct {
	cfg     Config
	log     *slog.Logger
	p       *proc.Process
	argv    []string
	created time.Time
	grace   time.Duration

	dir    string     // private directory's path; "" for PTY sessions
	pdir   *dirfd.Dir // the private directory, open; nil for PTY sessions
	uid    int        // owner of the private directory's files, or -1
	gid    int        //
	status *os.File   // the status FIFO (read and write end)
	msgs   chan msg   // what the interpreter reported, in order, but S

	// started is the number of the last command the interpreter reported
	// started (S); startedCh gets a token when it changes. S matters only
	// to an interrupt, so it does not wake the waiting Run otherwise.
	started   atomic.Uint64
	startedCh chan struct{}

	// slotMu guards the FIFOs of the commands' stdout and stderr; see
	// streams.go.
	slotMu      sync.Mutex
	slots       [2]*slot
	slotsClosed bool

	// turn is held by the Run in progress: a buffered channel of one, so
	// that waiting Runs go in the order they came (channel senders queue
	// first in, first out) and each can give up when its ctx ends.
	turn    chan struct{}
	pending atomic.Int32 // Runs in progress or waiting
	seq     uint64       // number of the last command; guarded by turn
	prevRC  int          // bash's $? after the last command; guarded by turn

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
	dead      chan struct{} // closed once the interpreter ended and was cleaned up

	// why says, once the interpreter ended, why (set before dead closes
	// by whoever killed it, else derived from its exit).
	whyMu sync.Mutex
	why   string
}

var _ execbox.Session = (*Session)(nil)

// msg is one report of the interpreter.
type msg struct {
	kind  byte   // 'R' ready, 'S' started, 'E' ended, 'I' ended after interrupt, 'X' interrupt raised
	id    uint64 // command number
	nonce string // E and I: the command's nonce
	code  int    // E and I of bash: $?
	py    *pyResult
}

// Open starts a session and waits for its interpreter to be ready: bash
// and Python report it; a PTY session is ready once started. ctx bounds
// the wait.
func Open(ctx context.Context, cfg Config) (_ *Session, err error) {
	s := newSession(cfg)
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	adjust, err := s.kindOptions()
	if err != nil {
		return nil, err
	}
	if cfg.Kind != execbox.SessionPTY {
		if err := s.makePrivate(&undo); err != nil {
			return nil, err
		}
	}
	if err := s.startInterpreter(adjust); err != nil {
		return nil, err
	}
	undo = append(undo, func() { s.kill("start-up failed") })
	go s.watch()
	if s.status != nil {
		go s.readStatus()
	}

	if cfg.Kind == execbox.SessionPTY {
		return s, nil
	}
	if err := s.awaitReady(ctx); err != nil {
		return nil, err
	}
	s.log.Debug("opened", "kind", cfg.Kind, "argv", s.argv)
	return s, nil
}

// newSession returns the session of cfg, with its defaults filled in,
// before anything is made or started.
func newSession(cfg Config) *Session {
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = execbox.DefaultGracePeriod
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Session{
		cfg:       cfg,
		log:       log.With("session", cfg.ID),
		created:   time.Now(),
		grace:     cfg.GracePeriod,
		uid:       -1,
		gid:       -1,
		msgs:      make(chan msg, 16),
		startedCh: make(chan struct{}, 1),
		turn:      make(chan struct{}, 1),
		closed:    make(chan struct{}),
		dead:      make(chan struct{}),
	}
}

// kindOptions returns what the session's kind sets in the interpreter's
// options; an unknown kind is an invalid argument, refused before
// anything is made.
func (s *Session) kindOptions() (func(*proc.Options) error, error) {
	switch s.cfg.Kind {
	case execbox.SessionBash:
		return s.bashOptions, nil
	case execbox.SessionPython:
		return s.pythonOptions, nil
	case execbox.SessionPTY:
		return s.ptyOptions, nil
	}
	return nil, execbox.Invalid("kind", "unknown kind %q", s.cfg.Kind)
}

// makePrivate makes the private directory of a bash or Python session
// and its status FIFO, through which the interpreter reports, adding to
// undo how to remove each.
func (s *Session) makePrivate(undo *[]func()) error {
	base := s.cfg.TempDir
	if base == "" {
		base = privateBase()
	}
	// The directory becomes the command user's: everything the session
	// does in it goes through pdir, never by path.
	var err error
	if s.pdir, err = dirfd.MkdirTemp(base, "execbox-session-"); err != nil {
		return fmt.Errorf("session %s: private directory: %w", s.cfg.ID, err)
	}
	s.dir = s.pdir.Path()
	*undo = append(*undo, func() { s.pdir.RemoveAll(); s.pdir.Close() })
	if err := s.pdir.Mkfifo("status", -1, -1); err != nil {
		return fmt.Errorf("session %s: %w", s.cfg.ID, err)
	}
	// Read and write: the interpreter opens and closes its end at will,
	// and this end never sees EOF in between. Non-blocking, so that the
	// file is the runtime poller's and watch's Close ends readStatus's
	// Read (a blocking read(2) of it would outlive the session).
	if s.status, err = s.pdir.OpenFIFO("status", os.O_RDWR|unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("session %s: status FIFO: %w", s.cfg.ID, err)
	}
	*undo = append(*undo, func() { s.status.Close() })
	return nil
}

// startInterpreter starts the interpreter through Config.Start with the
// options of a session: no timeout or event log of its own, its output
// only kept as noise, stdin fed by Run, the private directory handed to
// its user, then what the kind sets (adjust).
func (s *Session) startInterpreter(adjust func(*proc.Options) error) error {
	p, err := s.cfg.Start(func(o *proc.Options) error {
		o.Timeout = 0 // a session lives until closed
		o.GracePeriod = s.cfg.GracePeriod
		o.OutputLimit = noiseLimit
		o.KillOnOutputLimit = false
		o.Stdin = nil
		o.Interactive = true
		o.EventWindow = 0
		if o.Credential != nil && s.dir != "" {
			s.uid, s.gid = int(o.Credential.Uid), int(o.Credential.Gid)
			if err := s.pdir.Chown(s.uid, s.gid); err != nil {
				return fmt.Errorf("session %s: private directory: %w", s.cfg.ID, err)
			}
			if err := s.pdir.ChownFIFO("status", s.uid, s.gid); err != nil {
				return fmt.Errorf("session %s: status FIFO: %w", s.cfg.ID, err)
			}
		}
		if err := adjust(o); err != nil {
			return err
		}
		s.argv = append([]string{o.Path}, o.Args[1:]...)
		return nil
	})
	if err != nil {
		return err
	}
	s.p = p
	return nil
}

// awaitReady waits, within ctx or else readyTimeout, for a bash or
// Python interpreter to report that it is ready (bash once it has
// sourced its init script), or to die trying.
func (s *Session) awaitReady(ctx context.Context) error {
	if s.cfg.Kind == execbox.SessionBash {
		if err := s.bashInit(); err != nil {
			return err
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readyTimeout)
		defer cancel()
	}
	select {
	case m := <-s.msgs:
		if m.kind != 'R' {
			return fmt.Errorf("session %s: %s sent %q before it was ready", s.cfg.ID, s.argv[0], m.kind)
		}
	case <-s.dead:
		return fmt.Errorf("session %s: %s did not start: %s", s.cfg.ID, s.argv[0], s.deathDetail())
	case <-ctx.Done():
		return fmt.Errorf("session %s: waiting for %s to start: %w", s.cfg.ID, s.argv[0], ctx.Err())
	}
	return nil
}

// ID implements execbox.Session.
func (s *Session) ID() string { return s.cfg.ID }

// Kind implements execbox.Session.
func (s *Session) Kind() execbox.SessionKind { return s.cfg.Kind }

// Info describes the session.
func (s *Session) Info() execbox.SessionInfo {
	info := execbox.SessionInfo{
		ID:      s.cfg.ID,
		Kind:    s.cfg.Kind,
		Command: append([]string(nil), s.argv...),
		Created: s.created,
		Busy:    s.pending.Load() > 0,
	}
	select {
	case <-s.p.Done():
		info.Exited = true
	default:
	}
	return info
}

// watch waits for the interpreter to end, then kills whatever it left
// running, stops the status reader and removes the private directory.
func (s *Session) watch() {
	<-s.p.Done()
	_, _ = s.p.Stop(context.Background(), execbox.ReasonKilled)
	if s.status != nil {
		s.status.Close()
	}
	if s.pdir != nil {
		s.pdir.RemoveAll()
	}
	s.whyMu.Lock()
	if s.why == "" {
		res, _ := s.p.Result()
		s.why = describeExit(s.argv[0], res)
	}
	s.whyMu.Unlock()
	close(s.dead)
	if s.dir != "" {
		// Once the command in progress (if any) has collected its output.
		s.turn <- struct{}{}
		s.closeSlots()
		<-s.turn
		s.pdir.Close()
	}
}

func describeExit(prog string, res execbox.Result) string {
	name := filepath.Base(prog)
	switch {
	case res.Reason == execbox.ReasonExited:
		return fmt.Sprintf("%s exited with status %d", name, res.ExitCode)
	case res.Signal != 0:
		return fmt.Sprintf("%s was killed by %s", name, res.Signal)
	}
	return fmt.Sprintf("%s ended: %s", name, res.String())
}

// deathDetail is why the interpreter ended, with the tail of what it
// printed itself, for start-up failures. Call after dead is closed.
func (s *Session) deathDetail() string {
	res, _ := s.p.Result()
	out := string(res.Stderr.Data)
	if len(out) > 2000 {
		out = "..." + out[len(out)-2000:]
	}
	if out == "" {
		return s.why
	}
	return s.why + ": " + out
}

// kill kills the interpreter at once (and then, through watch, what it
// left), recording why.
func (s *Session) kill(why string) {
	s.whyMu.Lock()
	if s.why == "" {
		s.why = why
	}
	s.whyMu.Unlock()
	_ = s.p.Signal(syscall.SIGKILL)
	<-s.dead
}

// ended returns the ErrClosed error of a session that was closed or whose
// interpreter ended, or nil.
func (s *Session) ended() error {
	select {
	case <-s.closed:
		return fmt.Errorf("session %s is closed: %w", s.cfg.ID, execbox.ErrClosed)
	default:
	}
	select {
	case <-s.dead:
		return s.deadErr()
	default:
	}
	return nil
}

func (s *Session) deadErr() error {
	s.whyMu.Lock()
	defer s.whyMu.Unlock()
	return fmt.Errorf("session %s has ended (%s): %w", s.cfg.ID, s.why, execbox.ErrClosed)
}

// Close implements execbox.Session: SIGHUP to the interpreter (a shell
// passes it on to its jobs and exits), then SIGTERM to everything left,
// SIGKILL after the grace period.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		_ = s.p.Signal(syscall.SIGHUP)
		_ = s.p.CloseStdin()
		_, s.closeErr = s.p.Stop(context.Background(), execbox.ReasonKilled)
		<-s.dead
		s.log.Debug("closed")
	})
	return s.closeErr
}

// Wait implements execbox.Session.
func (s *Session) Wait(ctx context.Context) (execbox.Result, error) {
	select {
	case <-s.dead:
		res, _ := s.p.Result()
		return res, nil
	case <-ctx.Done():
		return execbox.Result{}, ctx.Err()
	}
}

// unsupported is the error of a method the session's kind has not.
func (s *Session) unsupported(method, instead string) error {
	return &execbox.FieldError{
		Field:   "kind",
		Problem: fmt.Sprintf("a %s session has no %s (%s)", s.cfg.Kind, method, instead),
		Kind:    execbox.ErrUnsupported,
	}
}

// Write implements execbox.Session.
func (s *Session) Write(ctx context.Context, b []byte) (int, error) {
	if s.cfg.Kind != execbox.SessionPTY {
		return 0, s.unsupported("Write", "use Run")
	}
	if err := s.ended(); err != nil {
		return 0, err
	}
	n, err := s.p.WriteStdin(ctx, b)
	if err != nil && errors.Is(err, execbox.ErrClosed) {
		return n, fmt.Errorf("session %s: %w", s.cfg.ID, err)
	}
	return n, err
}

// Resize implements execbox.Session.
func (s *Session) Resize(ctx context.Context, rows, cols int) error {
	if s.cfg.Kind != execbox.SessionPTY {
		return s.unsupported("Resize", "only a pty session has a terminal")
	}
	if rows <= 0 || cols <= 0 || rows > 0xffff || cols > 0xffff {
		return execbox.Invalid("size", "rows and cols must be between 1 and 65535, not %dx%d", rows, cols)
	}
	if err := s.ended(); err != nil {
		return err
	}
	return s.p.Resize(uint16(rows), uint16(cols))
}

// Events implements execbox.Session.
func (s *Session) Events(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	if s.cfg.Kind != execbox.SessionPTY {
		err := s.unsupported("Events", "use Run")
		return func(yield func(execbox.Event, error) bool) { yield(execbox.Event{}, err) }
	}
	return s.p.Events(ctx, from)
}

// Run implements execbox.Session.
func (s *Session) Run(ctx context.Context, req execbox.SessionRequest) (execbox.SessionResult, error) {
	if s.cfg.Kind == execbox.SessionPTY {
		return execbox.SessionResult{}, s.unsupported("Run", "use Write and Events")
	}
	if err := req.Validate(); err != nil {
		return execbox.SessionResult{}, err
	}
	s.pending.Add(1)
	defer s.pending.Add(-1)
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return execbox.SessionResult{}, ctx.Err()
	case <-s.closed:
		return execbox.SessionResult{}, s.ended()
	}
	defer func() { <-s.turn }()
	if err := s.ended(); err != nil {
		return execbox.SessionResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return execbox.SessionResult{}, err
	}
	return s.run(ctx, req)
}

// run runs one command; the caller holds the turn.
func (s *Session) run(ctx context.Context, req execbox.SessionRequest) (execbox.SessionResult, error) {
	start := time.Now()
	s.seq++
	n := s.seq
	nonce := newNonce()
	limit := req.OutputLimit
	if limit == 0 {
		limit = execbox.DefaultOutputLimit
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = execbox.DefaultTimeout
	}
	st, err := s.openStreams(n, req.Stdin, limit)
	if errors.Is(err, errSlotsClosed) {
		return execbox.SessionResult{}, s.deadErr()
	}
	if err != nil {
		return execbox.SessionResult{}, fmt.Errorf("session %s: %w", s.cfg.ID, err)
	}
	defer st.finish(nil)

	select {
	case <-s.startedCh: // a token about an earlier command
	default:
	}
	if s.cfg.Kind == execbox.SessionBash {
		err = s.bashSend(n, nonce, req.Code, st)
	} else {
		err = s.pythonSend(n, nonce, req.Code, st, limit)
	}
	if err != nil {
		s.kill("its input failed: " + err.Error())
		return execbox.SessionResult{}, s.deadErr()
	}

	res := execbox.SessionResult{Reason: execbox.ReasonExited}
	var retErr error
	w := waiter{s: s, n: n, nonce: nonce}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	ctxDone := ctx.Done()
wait:
	for {
		select {
		case m := <-s.msgs:
			if m.id != n {
				continue // a late report about an earlier, interrupted command
			}
			switch m.kind {
			case 'X':
				w.acked = true
			case 'E', 'I':
				if m.nonce != nonce {
					s.log.Warn("status with a wrong nonce ignored", "command", n)
					continue
				}
				res.ExitCode = m.code
				if m.py != nil {
					m.py.fill(&res)
				}
				s.prevRC = m.code
				break wait
			}
		case <-timer.C:
			res.Reason = execbox.ReasonTimedOut
			w.want()
		case <-ctxDone:
			ctxDone = nil
			if res.Reason == execbox.ReasonExited {
				res.Reason = execbox.ReasonKilled
			}
			retErr = ctx.Err()
			w.want()
		case <-w.startedC:
			w.maybeInterrupt()
		case <-w.graceC:
			w.escalate()
		case <-w.repeatC:
			w.repeat()
		case <-s.closed:
			if res.Reason == execbox.ReasonExited {
				res.Reason = execbox.ReasonKilled
			}
			<-s.dead
			retErr = s.ended()
			break wait
		case <-s.dead:
			retErr = s.deadErr()
			if w.interrupting && s.cfg.Kind == execbox.SessionBash {
				res.ExitCode = -1
			}
			break wait
		}
	}
	w.stop()
	if retErr != nil && errors.Is(retErr, execbox.ErrClosed) && res.Reason == execbox.ReasonExited {
		// The interpreter exited during the command (bash's exit N):
		// its status is the command's.
		if pres, ok := s.p.Result(); ok && pres.Reason == execbox.ReasonExited {
			res.ExitCode = pres.ExitCode
		}
	}
	st.finish(&res)
	res.Duration = time.Since(start)
	return res, retErr
}

// waiter runs the interrupt of one command: SIGINT once the interpreter
// has reported the command started, then escalation at each grace period.
type waiter struct {
	s            *Session
	n            uint64
	nonce        string
	wanted       bool // a timeout or cancel asked for an interrupt
	interrupting bool // SIGINT sent
	acked        bool // Python raised KeyboardInterrupt
	fgKilled     bool // bash's foreground group was killed

	startedC <-chan struct{} // set while an interrupt waits for S
	grace    *time.Timer
	graceC   <-chan time.Time
	repeater *time.Ticker
	repeatC  <-chan time.Time
}

func (w *waiter) want() {
	if w.wanted {
		return
	}
	w.wanted = true
	// The grace period runs from now, even if the interpreter has not
	// reported the command started: it cannot be stuck before that for
	// long unless it is broken.
	w.grace = time.NewTimer(w.s.grace)
	w.graceC = w.grace.C
	w.maybeInterrupt()
}

// started reports whether the interpreter reported the command started.
func (w *waiter) started() bool { return w.s.started.Load() == w.n }

func (w *waiter) maybeInterrupt() {
	if !w.wanted || w.interrupting {
		return
	}
	if !w.started() {
		w.startedC = w.s.startedCh
		return
	}
	w.startedC = nil
	w.interrupting = true
	w.s.interrupt(w.n, w.nonce)
	if w.s.cfg.Kind == execbox.SessionPython {
		// os.system and friends ignore SIGINT while they wait, so a first
		// SIGINT may kill only the child: press Ctrl-C again until Python
		// raises KeyboardInterrupt.
		w.repeater = time.NewTicker(100 * time.Millisecond)
		w.repeatC = w.repeater.C
	}
}

func (w *waiter) repeat() {
	if w.acked {
		w.repeater.Stop()
		w.repeatC = nil
		return
	}
	_ = w.s.p.Interrupt()
}

func (w *waiter) escalate() {
	s := w.s
	switch {
	case !w.started():
		go s.kill(fmt.Sprintf("it did not start command %d", w.n))
	case s.cfg.Kind == execbox.SessionPython:
		go s.kill("the cell did not stop within the grace period after SIGINT")
	case !w.fgKilled:
		killed, err := s.p.KillForeground()
		if err == nil && killed {
			w.fgKilled = true
			w.grace.Reset(s.grace)
			return
		}
		go s.kill("the command did not stop after SIGINT, in bash itself")
	default:
		go s.kill("the command did not stop after SIGKILL of its process group")
	}
	w.graceC = nil
}

func (w *waiter) stop() {
	if w.grace != nil {
		w.grace.Stop()
	}
	if w.repeater != nil {
		w.repeater.Stop()
	}
}

// deliver passes a report of the interpreter on to the Run waiting for
// it; S only sets started. It gives up when the interpreter has ended.
func (s *Session) deliver(m msg) bool {
	if m.kind == 'S' {
		s.started.Store(m.id)
		select {
		case s.startedCh <- struct{}{}:
		default:
		}
		return true
	}
	select {
	case s.msgs <- m:
		return true
	case <-s.dead:
		return false
	}
}

// interrupt sends the interpreter what Ctrl-C would.
func (s *Session) interrupt(n uint64, nonce string) {
	if err := s.p.Interrupt(); err != nil {
		s.log.Debug("interrupt", "err", err)
	}
	if s.cfg.Kind == execbox.SessionBash {
		s.bashRecover(n, nonce)
	}
}

var (
	privateBaseOnce sync.Once
	privateBaseDir  string
)

// privateBase is where private directories go by default: /dev/shm when
// it is a writable tmpfs, since every command writes a file and sometimes
// makes FIFOs there, which costs a few microseconds on tmpfs and up to a
// millisecond on a journaling disk file system; else os.TempDir().
func privateBase() string {
	privateBaseOnce.Do(func() {
		privateBaseDir = os.TempDir()
		var st unix.Statfs_t
		if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK|unix.X_OK) == nil {
			privateBaseDir = "/dev/shm"
		}
	})
	return privateBaseDir
}

func newNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
