package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
	"github.com/execbox/execbox/internal/agent/workspace"
)

// maxFinished bounds how many ended, started processes a sandbox keeps for
// re-reading their events; the oldest are forgotten first.
const maxFinished = 64

// Config describes the sandbox an agent serves.
type Config struct {
	// ID must be unique on the host: it marks every process for tree kills.
	ID string
	// Runtime names the runtime in errors ("local", "sandbox").
	Runtime string
	// Workspace is the open workspace; Close closes it.
	Workspace *workspace.Workspace
	// Spec supplies the defaults of every command (env, limits, user).
	Spec execbox.Spec
	// Capabilities is what this agent may enforce; other limits are
	// rejected with ErrUnsupported.
	Capabilities execbox.Capabilities
	// Logger; nil discards.
	Logger *slog.Logger

	// Scope, if set, returns the scope each command runs in (a cgroup,
	// given the command's limits merged with the spec's); see proc.Scope.
	// A nil scope with a nil error means none for this command. Used by
	// runtimes that confine commands; local leaves it nil.
	Scope func(limits execbox.Limits) (proc.Scope, error)
	// DropCapabilities runs commands that would be root without any
	// capability; see proc.Options.DropCapabilities.
	DropCapabilities bool
	// ReservedIDs are uids and gids no command may run as: the agent's
	// own (a command sharing it could signal or trace the agent). A
	// request for one is a FieldError naming "user".
	ReservedIDs []uint32
	// FilesAs, if set, is the identity every file operation and snapshot
	// takes (workspace.AsUser): the sandbox's workspace is an idmapped
	// mount on which only its user, not the agent's root, has an identity
	// on disk, and files the API creates belong to that user as if a
	// command had written them.
	FilesAs *Owner
}

// Owner is a uid and gid.
type Owner struct{ UID, GID int }

// Sandbox runs processes and file operations in one workspace. It
// implements execbox.Sandbox; runtimes wrap it to add their teardown.
type Sandbox struct {
	cfg  Config
	log  *slog.Logger
	host []string // the agent's own environment, read once

	mu       sync.Mutex
	closed   bool
	nextID   uint64
	procs    map[string]*process
	finished []string // IDs of ended started processes, oldest first

	sessions sessionTable // see session.go
}

var _ execbox.Sandbox = (*Sandbox)(nil)

// New returns a Sandbox serving cfg.
func New(cfg Config) *Sandbox {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sandbox{
		cfg:   cfg,
		log:   log.With("sandbox", cfg.ID),
		host:  os.Environ(),
		procs: make(map[string]*process),
	}
}

// ID implements execbox.Sandbox.
func (s *Sandbox) ID() string { return s.cfg.ID }

// Workspace implements execbox.Sandbox.
func (s *Sandbox) Workspace() string { return s.cfg.Workspace.Dir() }

// Capabilities implements execbox.Sandbox: Config.Capabilities, the same
// after Close.
func (s *Sandbox) Capabilities() execbox.Capabilities { return s.cfg.Capabilities }

// Files implements execbox.Sandbox.
func (s *Sandbox) Files() execbox.Files {
	var f execbox.Files = closedFiles{s, s.cfg.Workspace.Files()}
	if o := s.cfg.FilesAs; o != nil {
		f = workspace.AsUser(f, o.UID, o.GID)
	}
	return f
}

// Snapshot implements execbox.Sandbox.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if o := s.cfg.FilesAs; o != nil {
		return workspace.DoAsUser(o.UID, o.GID, func() error { return s.cfg.Workspace.Snapshot(ctx, w) })
	}
	return s.cfg.Workspace.Snapshot(ctx, w)
}

func (s *Sandbox) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sandbox %s: %w", s.cfg.ID, execbox.ErrClosed)
	}
	return nil
}

// Exec implements execbox.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, req execbox.ExecRequest) (execbox.Result, error) {
	p, err := s.start(req, false)
	if err != nil {
		return execbox.Result{}, err
	}
	defer s.forget(p.id)
	select {
	case <-p.Done():
		res, _ := p.Result()
		return res, nil
	case <-ctx.Done():
		res, _ := p.Stop(context.Background(), execbox.ReasonKilled)
		return res, ctx.Err()
	}
}

// Start implements execbox.Sandbox.
func (s *Sandbox) Start(ctx context.Context, req execbox.ExecRequest) (execbox.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.start(req, true)
	if err != nil {
		return nil, err
	}
	go func() {
		<-p.Done()
		s.retire(p.id)
	}()
	return p, nil
}

// Process returns a started process by ID, for clients that reconnect.
func (s *Sandbox) Process(id string) (execbox.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[id]; ok && p.started {
		return p, nil
	}
	return nil, &execbox.FieldError{Field: "process", Problem: "no process " + strconv.Quote(id), Kind: execbox.ErrNotFound}
}

func (s *Sandbox) start(req execbox.ExecRequest, started bool) (*process, error) {
	return s.startWith(req, started, nil)
}

// startWith is start with adjust, if not nil, changing the process's
// options last (a session sets its terminal and arguments).
func (s *Sandbox) startWith(req execbox.ExecRequest, started bool, adjust func(*proc.Options) error) (*process, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	c, err := s.check(req)
	if err != nil {
		return nil, err
	}
	opts, err := s.options(req, c, started)
	if err != nil {
		return nil, err
	}
	path := opts.Path // the program resolved, named in errors and the log
	if adjust != nil {
		if err := adjust(&opts); err != nil {
			return nil, err
		}
	}
	if s.cfg.Scope != nil {
		scope, err := s.cfg.Scope(c.limits)
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", s.cfg.ID, err)
		}
		if scope != nil {
			opts.Scope = scope
		}
	}
	return s.launch(opts, path, started)
}

// checked is what check derived from a request: its limits merged with
// the spec's, the user it runs as (nil: the agent's own), and its
// directory as a host path.
type checked struct {
	limits execbox.Limits
	user   *execbox.User
	dir    string
}

// check checks what of a request only this sandbox can judge (limits it
// cannot enforce, a user it cannot or must not switch to, a directory
// outside the workspace) and reports every problem at once.
func (s *Sandbox) check(req execbox.ExecRequest) (checked, error) {
	spec := &s.cfg.Spec
	c := checked{limits: req.Limits.Merge(spec.Limits), user: req.User}
	var errs []error
	if err := execbox.CheckLimits(s.cfg.Runtime, s.cfg.Capabilities, req.Limits, "limits."); err != nil {
		errs = append(errs, err)
	}
	if c.user == nil {
		c.user = spec.User
	}
	if c.user != nil && !s.cfg.Capabilities.User {
		errs = append(errs, &execbox.FieldError{Field: "user", Problem: "switching users needs the runtime to run as root", Kind: execbox.ErrUnsupported})
	}
	if c.user != nil {
		if err := s.checkReserved(*c.user); err != nil {
			errs = append(errs, err)
		}
	}
	dir, err := s.cfg.Workspace.CheckDir("dir", req.Dir)
	if err != nil {
		errs = append(errs, err)
	}
	c.dir = dir
	return c, errors.Join(errs...)
}

// options turns a checked request into the process's options: the
// environment its policy allows, the program resolved on its PATH (or sh
// for a shell line), and the defaults of every bound it left unset.
func (s *Sandbox) options(req execbox.ExecRequest, c checked, started bool) (proc.Options, error) {
	spec := &s.cfg.Spec
	policy, allow := spec.EnvPolicy, spec.EnvAllow
	if req.EnvPolicy != "" {
		policy, allow = req.EnvPolicy, req.EnvAllow
	}
	env := buildEnv(s.host, policy, allow, s.Workspace(), spec.Env, req.Env)

	var path, shell string
	var args []string
	if req.Shell != "" {
		path, shell = Shell()
		args = []string{shell, "-c", req.Shell}
	} else {
		var err error
		path, err = lookPath(req.Command[0], getenv(env, "PATH"), c.dir)
		if err != nil {
			return proc.Options{}, err
		}
		args = req.Command
	}

	opts := proc.Options{
		Path:              path,
		Args:              args,
		Dir:               c.dir,
		Env:               env,
		Shell:             shell,
		Stdin:             req.Stdin,
		Interactive:       started && req.Stdin == nil,
		Limits:            c.limits,
		Timeout:           orDefault(req.Timeout, execbox.DefaultTimeout),
		GracePeriod:       orDefault(req.GracePeriod, execbox.DefaultGracePeriod),
		OutputLimit:       orDefault(req.OutputLimit, execbox.DefaultOutputLimit),
		KillOnOutputLimit: req.KillOnOutputLimit,
		DropCapabilities:  s.cfg.DropCapabilities,
		Logger:            s.log,
	}
	if started {
		opts.EventWindow = orDefault(req.EventWindow, execbox.DefaultEventWindow)
		opts.FlowControl = req.FlowControl
	}
	if u := c.user; u != nil {
		opts.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
		if opts.Credential.Groups == nil {
			opts.Credential.Groups = []uint32{}
		}
	}
	return opts, nil
}

// launch names the process, marks it for tree kills and starts it, under
// the lock so that Close, once it has begun, sees every process started
// (or finishes the scope of one it refused). path is the program as
// resolved, which errors and the log name.
func (s *Sandbox) launch(opts proc.Options, path string, started bool) (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		if opts.Scope != nil {
			opts.Scope.Finish(nil)
		}
		return nil, fmt.Errorf("sandbox %s: %w", s.cfg.ID, execbox.ErrClosed)
	}
	s.nextID++
	id := "p" + strconv.FormatUint(s.nextID, 10)
	opts.Marker = s.cfg.ID + "/" + id
	pp, err := proc.Start(opts)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &process{Process: pp, id: id, started: started}
	s.procs[id] = p
	s.log.Debug("started", "process", id, "path", path)
	return p, nil
}

func (s *Sandbox) forget(id string) {
	s.mu.Lock()
	delete(s.procs, id)
	s.mu.Unlock()
}

// retire keeps an ended started process for re-reading, within bounds.
func (s *Sandbox) retire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = append(s.finished, id)
	for len(s.finished) > maxFinished {
		delete(s.procs, s.finished[0])
		s.finished = s.finished[1:]
	}
}

// Close kills every process the sandbox started, including descendants
// that left their process group, then closes the workspace. It does not
// remove the workspace: the runtime decides that.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	procs := make([]*process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()

	var wg sync.WaitGroup
	s.closeSessions(&wg)
	for _, p := range procs {
		wg.Go(func() { _, _ = p.Stop(context.Background(), execbox.ReasonKilled) })
	}
	wg.Wait()
	var errs []error
	if !proc.KillMarked(s.cfg.ID+"/", time.Now().Add(10*time.Second)) {
		errs = append(errs, fmt.Errorf("sandbox %s: processes survived SIGKILL", s.cfg.ID))
	}
	if err := s.cfg.Workspace.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// process adapts *proc.Process to execbox.Process.
type process struct {
	*proc.Process
	id      string
	started bool
}

func (p *process) ID() string { return p.id }

func (p *process) Events(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	return p.Process.Events(ctx, from)
}

func (p *process) CloseStdin(ctx context.Context) error { return p.Process.CloseStdin() }

func (p *process) Signal(ctx context.Context, sig execbox.Signal) error {
	if sig <= 0 || sig > 64 {
		return execbox.Invalid("signal", "%d is not a signal", int(sig))
	}
	return p.Process.Signal(syscall.Signal(sig))
}

func (p *process) Kill(ctx context.Context) error {
	_, err := p.Stop(ctx, execbox.ReasonKilled)
	return err
}

func (p *process) Poll(ctx context.Context) (*execbox.Result, error) {
	if res, ok := p.Result(); ok {
		return &res, nil
	}
	return nil, nil
}

// closedFiles refuses file access after the sandbox is closed.
type closedFiles struct {
	s *Sandbox
	execbox.Files
}

func (f closedFiles) ReadFile(ctx context.Context, path string, opts execbox.ReadOptions) ([]byte, error) {
	if err := f.s.checkOpen(); err != nil {
		return nil, err
	}
	return f.Files.ReadFile(ctx, path, opts)
}

func (f closedFiles) WriteFile(ctx context.Context, path string, data []byte, opts execbox.WriteOptions) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	return f.Files.WriteFile(ctx, path, data, opts)
}

func (f closedFiles) Stat(ctx context.Context, path string) (execbox.FileInfo, error) {
	if err := f.s.checkOpen(); err != nil {
		return execbox.FileInfo{}, err
	}
	return f.Files.Stat(ctx, path)
}

func (f closedFiles) List(ctx context.Context, path string) ([]execbox.FileInfo, error) {
	if err := f.s.checkOpen(); err != nil {
		return nil, err
	}
	return f.Files.List(ctx, path)
}

func (f closedFiles) Mkdir(ctx context.Context, path string, opts execbox.MkdirOptions) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	return f.Files.Mkdir(ctx, path, opts)
}

func (f closedFiles) Remove(ctx context.Context, path string, opts execbox.RemoveOptions) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	return f.Files.Remove(ctx, path, opts)
}

func (f closedFiles) Upload(ctx context.Context, path string, r io.Reader) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	return f.Files.Upload(ctx, path, r)
}

func (f closedFiles) Download(ctx context.Context, path string, w io.Writer) error {
	if err := f.s.checkOpen(); err != nil {
		return err
	}
	return f.Files.Download(ctx, path, w)
}

// checkReserved refuses a user whose uid, gid or a group is reserved.
func (s *Sandbox) checkReserved(u execbox.User) error {
	ids := append([]uint32{u.UID, u.GID}, u.Groups...)
	for _, id := range ids {
		if slices.Contains(s.cfg.ReservedIDs, id) {
			return execbox.Invalid("user", "uid or gid %d is reserved for the agent", id)
		}
	}
	return nil
}
