// Package local is the runtime that runs commands as host processes, with
// no isolation and no overhead beyond execbox's own process handling: the
// execbox agent runs in-process. Use it for trusted code, development, or
// inside a boundary you already have (a VM, a container). It enforces the
// rlimits (CPU time, file size, open files, address space), runs commands
// as another user when execbox is root, and kills whole process trees,
// including descendants that called setsid or double-forked.
//
// What it cannot kill: a process that leaves the command's process group
// and tree and also scrubs its environment, where the tree kill's marker
// (EXECBOX_TRACE) lives (env -i setsid sh -c 'daemon &'). It outlives the
// command's timeout, Kill and the sandbox's Close, as the host user,
// and nothing but that user's permissions contains it: the host is not a
// boundary. Run code that might do that on an isolated runtime (sandbox:
// a cgroup per command; docker: the container).
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/agent/workspace"
	"github.com/execbox/execbox/internal/owner"
	"github.com/execbox/execbox/internal/provision"
	"github.com/execbox/execbox/internal/undo"
)

// Name is the registered name of this runtime.
const Name = "local"

func init() {
	execbox.Register(Name, func(opts execbox.Options) (execbox.Runtime, error) {
		var o Options
		if err := execbox.DecodeSettings(Name, opts.Settings, &o); err != nil {
			return nil, err
		}
		o.Logger = opts.Logger
		return New(o), nil
	})
}

// Options configure the local runtime. The zero value is ready to use.
type Options struct {
	// TempDir is where temporary workspaces are made; empty means
	// os.TempDir(). YAML: runtimes.local.temp_dir.
	TempDir string `json:"temp_dir,omitempty"`
	// StateDir is where each live sandbox is recorded with its owner, so
	// that a later execbox process removes what it left if this one dies
	// (Sweep); empty means /run/execbox/local as root, else
	// $XDG_RUNTIME_DIR/execbox/local or TMPDIR/execbox-UID/local.
	// YAML: runtimes.local.state_dir.
	StateDir string `json:"state_dir,omitempty"`
	// Logger; nil discards.
	Logger *slog.Logger `json:"-"`
}

// Runtime is the local runtime.
type Runtime struct {
	opts Options
	log  *slog.Logger

	// The state directory (see sweep.go), opened at the first Create,
	// which also sweeps it once.
	dirOnce   sync.Once
	dir       *owner.Dir
	dirErr    error
	sweepOnce sync.Once
}

var _ execbox.Runtime = (*Runtime)(nil)

// New returns a local runtime.
func New(opts Options) *Runtime {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{opts: opts, log: log.With("runtime", Name)}
}

// Name implements execbox.Runtime.
func (r *Runtime) Name() string { return Name }

// Health implements execbox.Runtime: local is always available.
func (r *Runtime) Health(ctx context.Context) execbox.Health {
	detail := "host processes, no isolation"
	if os.Geteuid() == 0 {
		detail += "; running as root (commands run as root unless spec.user is set)"
	}
	return execbox.Health{Available: true, Detail: detail}
}

// Capabilities implements execbox.Runtime.
func (r *Runtime) Capabilities() execbox.Capabilities {
	return execbox.Capabilities{Rlimits: true, User: os.Geteuid() == 0}
}

// Create implements execbox.Runtime.
func (r *Runtime) Create(ctx context.Context, spec execbox.Spec) (_ execbox.Sandbox, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	caps := r.Capabilities()
	var errs []error
	if err := execbox.CheckLimits(Name, caps, spec.Limits, "limits."); err != nil {
		errs = append(errs, err)
	}
	if err := execbox.CheckServerFields(Name, &spec); err != nil {
		errs = append(errs, err)
	}
	if spec.User != nil && !caps.User {
		errs = append(errs, &execbox.FieldError{Field: "user", Problem: "switching users needs execbox to run as root", Kind: execbox.ErrUnsupported})
	}
	if spec.Image != "" {
		errs = append(errs, &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported,
			Problem: "the local runtime runs commands on the host itself; use the sandbox runtime for an image"})
	}
	if err := provision.CheckAssets(&spec); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	id, err := newID()
	if err != nil {
		return nil, err
	}
	// Every step that creates something registers its undo; a failure
	// unwinds them so nothing is half-created.
	var u undo.Stack
	defer u.OnError(&err)

	dir := spec.Workspace
	temp := dir == ""
	if err := r.record(ctx, id, temp); err != nil {
		return nil, err
	}
	u.Add(func() { r.dir.Remove(id) })
	if temp {
		if dir, err = os.MkdirTemp(r.opts.TempDir, "execbox-"+id+"-"); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
		u.Add(func() { os.RemoveAll(dir) })
	} else {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, execbox.Invalid("workspace", "%v", err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, execbox.Invalid("workspace", "%s is not an existing directory", dir)
		}
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	if temp && spec.User != nil {
		if err := ws.Chown(int(spec.User.UID), int(spec.User.GID)); err != nil {
			ws.Close()
			return nil, fmt.Errorf("chown workspace: %w", err)
		}
	}
	sb := &Sandbox{
		Sandbox: agent.New(agent.Config{
			ID:           id,
			Runtime:      Name,
			Workspace:    ws,
			Spec:         spec,
			Capabilities: caps,
			Logger:       r.log,
		}),
		removeDir: temp,
		dir:       dir,
		records:   r.dir,
	}
	if spec.User != nil {
		sb.user = &fsUser{int(spec.User.UID), int(spec.User.GID)}
	}
	u.Add(func() { sb.Sandbox.Close() })
	if err := provision.Apply(ctx, sb, &spec); err != nil {
		return nil, err
	}
	r.log.Debug("created", "sandbox", id, "workspace", dir)
	return sb, nil
}

// Sandbox is a local sandbox: the agent's sandbox plus removal of a
// temporary workspace on Close.
type Sandbox struct {
	*agent.Sandbox
	removeDir bool
	dir       string
	user      *fsUser    // the command user, if not execbox's own
	records   *owner.Dir // holds its record, removed at Close
}

// fsUser is a file system identity.
type fsUser struct{ uid, gid int }

// Files implements execbox.Sandbox. With a command user, files are read
// and written as that user (its file system identity, without execbox's
// privilege): the workspace is that user's, who can plant symlinks in it,
// and they must not lead execbox to touch what the user could not.
func (s *Sandbox) Files() execbox.Files {
	if s.user == nil {
		return s.Sandbox.Files()
	}
	return workspace.AsUser(s.Sandbox.Files(), s.user.uid, s.user.gid)
}

// Snapshot implements execbox.Sandbox, as the command user as Files does.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer) error {
	if s.user == nil {
		return s.Sandbox.Snapshot(ctx, w)
	}
	return workspace.DoAsUser(s.user.uid, s.user.gid, func() error { return s.Sandbox.Snapshot(ctx, w) })
}

// Close kills every process the sandbox started and removes a temporary
// workspace. A given workspace is never removed.
func (s *Sandbox) Close() error {
	err := s.Sandbox.Close()
	if s.removeDir {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err == nil {
		// Kept after a failure, for a later sweep to finish the job.
		err = s.records.Remove(s.ID())
	}
	return err
}

func newID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sb-" + hex.EncodeToString(b), nil
}
