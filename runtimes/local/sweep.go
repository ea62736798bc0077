package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
	"github.com/execbox/execbox/internal/owner"
)

// A local sandbox's processes are children of this process (killed with
// it: Pdeathsig) and whatever they started, which nothing kills when this
// process dies: a daemon that called setsid lives on, and a temporary
// workspace stays on disk. Each sandbox is therefore recorded in the
// state directory (owner.Dir) while it lives; a later execbox process
// (execbox serve at start, or the first Create) finds the records of
// owners that died and removes what they left: the processes carrying
// the sandbox's marker (proc.MarkerVar), its temporary workspace and the
// record.

// record is the data of a local sandbox's record.
type record struct {
	// TempParent is the directory of its temporary workspace
	// (execbox-ID-*), empty for a given workspace, which is never removed.
	TempParent string `json:"temp_parent,omitempty"`
}

// stateDir opens the state directory once.
func (r *Runtime) stateDir() (*owner.Dir, error) {
	r.dirOnce.Do(func() {
		path := r.opts.StateDir
		if path == "" {
			path = owner.DefaultDir(Name)
		}
		r.dir, r.dirErr = owner.OpenDir(path)
		if r.dirErr != nil {
			r.dirErr = &execbox.FieldError{Field: "runtimes.local.state_dir", Kind: execbox.ErrUnavailable, Problem: r.dirErr.Error()}
		}
	})
	return r.dir, r.dirErr
}

// record writes the record of sandbox id, after sweeping once per
// Runtime what dead owners left.
func (r *Runtime) record(ctx context.Context, id string, temp bool) error {
	dir, err := r.stateDir()
	if err != nil {
		return err
	}
	r.sweepOnce.Do(func() { r.logSweep(ctx) })
	var rec record
	if temp {
		rec.TempParent = r.opts.TempDir
		if rec.TempParent == "" {
			rec.TempParent = os.TempDir()
		}
		if rec.TempParent, err = filepath.Abs(rec.TempParent); err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
	}
	return dir.Write(id, rec)
}

// logSweep sweeps and logs what it did.
func (r *Runtime) logSweep(ctx context.Context) {
	n, err := r.Sweep(ctx)
	if n > 0 {
		r.log.Info("removed leftovers of dead execbox processes", "sandboxes", n)
	}
	if err != nil {
		r.log.Warn("removing leftovers of dead execbox processes", "err", err)
	}
}

// Sweep removes what the sandboxes of execbox processes that died left:
// the processes that carry their markers (SIGTERM, then SIGKILL), their
// temporary workspaces and their records. It returns how many sandboxes
// it removed. execbox serve calls it at start; Create does, once per
// Runtime.
func (r *Runtime) Sweep(ctx context.Context) (int, error) {
	dir, err := r.stateDir()
	if err != nil {
		return 0, err
	}
	dead, err := dir.Dead()
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, rec := range dead {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if err := sweepOne(dir, rec); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// sweepOne removes what one dead sandbox left, the record last.
func sweepOne(dir *owner.Dir, rec owner.Record) error {
	if !validID(rec.ID) {
		return fmt.Errorf("record of %q: not a local sandbox ID", rec.ID)
	}
	var data record
	if len(rec.Data) > 0 {
		if err := json.Unmarshal(rec.Data, &data); err != nil {
			return fmt.Errorf("record of %s: %w", rec.ID, err)
		}
	}
	if !proc.KillMarked(rec.ID+"/", time.Now().Add(10*time.Second)) {
		return fmt.Errorf("sandbox %s: processes of a dead owner survive SIGKILL", rec.ID)
	}
	if data.TempParent != "" && filepath.IsAbs(data.TempParent) {
		// The workspaces os.MkdirTemp made for this ID; RemoveAll
		// follows no symlink below them.
		ents, _ := os.ReadDir(data.TempParent)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "execbox-"+rec.ID+"-") {
				if err := os.RemoveAll(filepath.Join(data.TempParent, e.Name())); err != nil {
					return fmt.Errorf("sandbox %s: %w", rec.ID, err)
				}
			}
		}
	}
	return dir.Remove(rec.ID)
}

// validID reports whether id is one newID could make ("sb-" and hex):
// a record's ID reaches a glob and a marker.
func validID(id string) bool {
	hex, ok := strings.CutPrefix(id, "sb-")
	return ok && len(hex) == 12 && strings.Trim(hex, "0123456789abcdef") == ""
}
