package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox"
	execclient "github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/boundary"
	"github.com/execbox/execbox/internal/owner"
)

// Sandbox is a sandbox of this runtime: the agent in its container,
// reached over the protocol, and the container's teardown.
type Sandbox struct {
	*boundary.Sandbox
	r         *Runtime
	dc        *client.Client
	id        string
	cid       string // the container's ID
	workspace string // the workspace's path in the container
	state     string // the host directory of the agent's configuration and socket
	c         *execclient.Client
	pin       *os.File // the agent's socket (O_PATH)
	// detach, for a sandbox of Attach, is what Close does in place of
	// removing the container: stop the agent, remove what Attach put in.
	detach func() error

	closeOnce sync.Once
	closeErr  error
}

var _ execbox.Sandbox = (*Sandbox)(nil)

// Workspace implements execbox.Sandbox.
func (s *Sandbox) Workspace() string { return s.workspace }

// ContainerID is the engine's ID of the sandbox's container.
func (s *Sandbox) ContainerID() string { return s.cid }

// Close implements execbox.Sandbox: the agent kills what it started, then
// the container is removed (killed if need be, its temporary workspace
// with it), then the host's state directory. It is idempotent.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		s.Sandbox.MarkClosed()
		_ = s.Sandbox.Sandbox.Close() // the agent's client; removing the container kills the rest
		s.c.Close()
		s.pin.Close()
		if s.detach != nil {
			s.closeErr = s.detach()
			return
		}
		errs := []error{s.r.remove(s.dc, s.cid)}
		if err := os.RemoveAll(s.state); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// lost explains a call that could not reach the agent while the sandbox
// is open: if the container stopped (its init ends with the agent, within
// moments) or is gone, why.
func (s *Sandbox) lost(err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for delay := 5 * time.Millisecond; ; delay *= 2 {
		res, ierr := s.dc.ContainerInspect(ctx, s.cid, client.ContainerInspectOptions{})
		switch {
		case ierr != nil && cerrNotFound(ierr):
			return fmt.Errorf("sandbox %s: its agent is gone, the container %.12s was removed: %w", s.id, s.cid, execbox.ErrUnavailable)
		case ierr != nil || res.Container.State == nil:
			return err
		case !res.Container.State.Running:
			st := res.Container.State
			why := "exited with code " + strconv.Itoa(st.ExitCode)
			if st.OOMKilled {
				why += ", killed for lack of memory (runtimes.docker.memory)"
			}
			return fmt.Errorf("sandbox %s: its agent is gone, the container %s%s: %w", s.id, why, s.r.logsTail(s.dc, s.cid), execbox.ErrUnavailable)
		}
		if delay > time.Second {
			return err // the container runs: the connection broke, not the agent
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return err
		}
	}
}

// sweep removes the containers and state directories of this runtime's
// sandboxes whose process died on this host
// without closing them. It runs once per Runtime, at the first Create.
func (r *Runtime) sweep(ctx context.Context, dc *client.Client) {
	n, err := r.Sweep(ctx)
	if err != nil {
		r.log.Warn("sweep of leftover containers", "err", err)
	} else if n > 0 {
		r.log.Info("removed leftover containers of processes that died", "count", n)
	}
}

// Sweep removes what sandboxes of dead processes left (see sweep) and
// returns how many containers it removed.
func (r *Runtime) Sweep(ctx context.Context) (int, error) {
	return r.SweepDead(ctx, Name, func(labels map[string]string) {
		if dir := labels[labelState]; r.ownsDir(dir) {
			os.RemoveAll(dir)
		}
	})
}

// SweepDead removes the containers labelled as the runtime's (dev.execbox.
// runtime) whose owner label names a process of this host and PID
// namespace that died, calling cleanup with the labels of each removed,
// and returns how many it removed. A container without an owner label
// is never removed. Runtimes built on this one sweep with it too.
func (r *Runtime) SweepDead(ctx context.Context, runtime string, cleanup func(labels map[string]string)) (int, error) {
	dc, err := r.engine()
	if err != nil {
		return 0, err
	}
	list, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", labelRuntime+"="+runtime)})
	if err != nil {
		return 0, engineErr(err)
	}
	n := 0
	var errs []error
	for _, c := range list.Items {
		if label := c.Labels[labelOwner]; label == "" || owner.Alive(label) {
			continue
		}
		if err := r.remove(dc, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		cleanup(c.Labels)
	}
	return n, errors.Join(errs...)
}

// ownsDir reports whether dir is one this runtime could have made: a
// label is the engine's word, and a sweep removes nothing else.
func (r *Runtime) ownsDir(dir string) bool {
	return strings.HasPrefix(dir, r.opts.StateDir+"/sb-") && !strings.Contains(dir[len(r.opts.StateDir)+1:], "/")
}
