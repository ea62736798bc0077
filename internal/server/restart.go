package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/owner"
)

// Restart safety. An execbox serve killed without a chance to close its
// sandboxes (kill -9, a crash, the OOM killer) leaves them behind. Two
// things make a restart clean:
//
//   - Sweep: each runtime that keeps records of its sandboxes (sandbox,
//     local, docker, devcontainer) removes, before the new server serves,
//     what sandboxes of dead execbox processes left (processes, cgroups,
//     mounts, containers, temporary workspaces).
//   - Lost IDs: with Options.StateDir, the server records each sandbox
//     it holds (owner.Dir, one file per ID naming this process). A new
//     server claims the records of a dead one: those IDs then answer
//     "closed" (execbox.ErrClosed, HTTP 410) saying the sandbox was lost
//     with the server that held it, rather than "not_found". "closed" is
//     what a client must act on: the sandbox is gone for good (retrying
//     cannot bring it back, as "unavailable" would suggest), and a new
//     one must be created.

// Sweeper is a runtime that can remove what sandboxes of dead execbox
// processes left. The sandbox, local, docker and devcontainer runtimes
// are Sweepers.
type Sweeper interface {
	Sweep(ctx context.Context) (int, error)
}

// Sweep runs the sweep of every runtime that is a Sweeper, at once, and
// logs what each removed. execbox serve calls it before it serves. A
// runtime whose sweep fails (a Docker engine that is down) is logged and
// does not stop the others.
func Sweep(ctx context.Context, runtimes []execbox.Runtime, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var wg sync.WaitGroup
	for _, rt := range runtimes {
		sw, ok := rt.(Sweeper)
		if !ok {
			continue
		}
		wg.Go(func() {
			start := time.Now()
			n, err := sw.Sweep(ctx)
			if n > 0 {
				log.Info("removed what sandboxes of dead execbox processes left", "runtime", rt.Name(), "sandboxes", n, "duration", time.Since(start))
			}
			if err != nil {
				log.Warn("sweeping what sandboxes of dead execbox processes left", "runtime", rt.Name(), "err", err)
			}
		})
	}
	wg.Wait()
}

// restartState is the server's records and the IDs a dead predecessor
// lost. A nil *restartState (no Options.StateDir) records nothing and
// knows no lost ID.
type restartState struct {
	dir     *owner.Dir
	started time.Time
	log     *slog.Logger
	// lost is fixed once claimed: no lock.
	lost map[string]lostSandbox
}

// heldRecord is the data of the server's record of a sandbox.
type heldRecord struct {
	Runtime string `json:"runtime"`
	// Owner is the tenant owning the sandbox, so that after a restart
	// its lost ID answers its owner alone (others get not_found).
	Owner string `json:"owner,omitempty"`
}

// lostSandbox is what the server knows of a lost sandbox.
type lostSandbox struct {
	runtime, owner string
	created        time.Time
}

// openRestart opens the state directory (nil without one) and claims
// the records of dead servers: their IDs are lost.
func openRestart(path string, log *slog.Logger) (*restartState, error) {
	if path == "" {
		return nil, nil
	}
	dir, err := owner.OpenDir(path)
	if err != nil {
		return nil, &execbox.FieldError{Field: "server.state_dir", Kind: execbox.ErrUnavailable, Problem: err.Error()}
	}
	rs := &restartState{dir: dir, started: time.Now(), log: log, lost: map[string]lostSandbox{}}
	dead, err := dir.Dead()
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("server.state_dir: %w", err)
	}
	for _, rec := range dead {
		var h heldRecord
		_ = json.Unmarshal(rec.Data, &h)
		rs.lost[rec.ID] = lostSandbox{runtime: h.Runtime, owner: h.Owner, created: rec.Created}
		if err := dir.Remove(rec.ID); err != nil {
			log.Warn("removing the record of a lost sandbox", "sandbox", rec.ID, "err", err)
		}
	}
	if len(dead) > 0 {
		log.Warn("sandboxes were lost with the execbox server that held them", "count", len(dead))
	}
	return rs, nil
}

// hold records id as held by this server, for its owner (a tenant).
func (rs *restartState) hold(id, runtime, owner string) error {
	if rs == nil {
		return nil
	}
	if err := rs.dir.Write(id, heldRecord{Runtime: runtime, Owner: owner}); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// release removes id's record: the sandbox is closed.
func (rs *restartState) release(id string) {
	if rs == nil {
		return
	}
	if err := rs.dir.Remove(id); err != nil {
		rs.log.Warn("removing the record of a closed sandbox", "sandbox", id, "err", err)
	}
}

// lostOwner returns the owner of a lost sandbox; ok is false for any
// other ID.
func (rs *restartState) lostOwner(id string) (owner string, ok bool) {
	if rs == nil {
		return "", false
	}
	l, ok := rs.lost[id]
	return l.owner, ok
}

// lostErr is the error of a request for a lost sandbox, nil for any
// other ID.
func (rs *restartState) lostErr(id string) error {
	if rs == nil {
		return nil
	}
	l, ok := rs.lost[id]
	if !ok {
		return nil
	}
	return &lostError{id: id, runtime: l.runtime, created: l.created, restarted: rs.started}
}

// lostError is ErrClosed, saying why.
type lostError struct {
	id, runtime        string
	created, restarted time.Time
}

func (e *lostError) Error() string {
	return fmt.Sprintf("sandbox %s was lost: the server that held it (runtime %s, created at %s) stopped without closing it; this server restarted at %s",
		e.id, e.runtime, e.created.UTC().Format(time.RFC3339), e.restarted.UTC().Format(time.RFC3339))
}

func (e *lostError) Is(target error) bool { return target == execbox.ErrClosed }

// close closes the state directory.
func (rs *restartState) close() {
	if rs != nil {
		rs.dir.Close()
	}
}

// DefaultStateDir is the default of Options.StateDir for execbox serve:
// /run/execbox/server as root, else $XDG_RUNTIME_DIR/execbox/server or
// TMPDIR/execbox-UID/server.
func DefaultStateDir() string { return owner.DefaultDir("server") }
