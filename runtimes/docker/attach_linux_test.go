package docker_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/docker"
)

// runningContainer starts a container of the tools image that is none of
// execbox's (as a user or another tool would: its own process, Docker's
// init), with a directory /work, and removes it when t ends.
func runningContainer(t *testing.T) string {
	t.Helper()
	dc := engine(t)
	init := true
	res, err := dc.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config:     &container.Config{Image: shared.tag, Entrypoint: []string{"sleep", "3600"}, WorkingDir: "/work", Env: []string{"FROM_CONTAINER=yes"}},
		HostConfig: &container.HostConfig{Init: &init, NetworkMode: "none", Tmpfs: map[string]string{"/work": "mode=1777"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dc.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := dc.ContainerStart(t.Context(), res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// TestAttach: commands run in a running container through an injected
// agent, with the container's environment; Close stops the agent and
// what it started and leaves the container running, with no trace but
// the agent program; a second Attach reuses that program.
func TestAttach(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	cid := runningContainer(t)
	dc := engine(t)

	start := time.Now()
	sb, err := rt.Attach(t.Context(), cid, execbox.Spec{Env: map[string]string{"FROM_SPEC": "1"}}, docker.AttachOptions{Workspace: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first Attach (copies the agent) took %v", time.Since(start))
	if sb.ContainerID() != cid || sb.Workspace() != "/work" {
		t.Errorf("ContainerID, Workspace = %s, %s", sb.ContainerID(), sb.Workspace())
	}
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: `echo "$FROM_CONTAINER $FROM_SPEC $(pwd) $(id -u)"`})
	if err != nil || res.Stdout.String() != "yes 1 /work 0\n" {
		t.Fatalf("Exec: %q %q, %v", res.Stdout.String(), res.Stderr.String(), err)
	}
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = p
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ins, err := dc.ContainerInspect(t.Context(), cid, client.ContainerInspectOptions{})
	if err != nil || !ins.Container.State.Running {
		t.Fatalf("the container after Close: %v, %+v", err, ins.Container.State)
	}
	// Nothing of the sandbox runs in the container: its processes are
	// Docker's init and its own sleep.
	procs := containerProcs(t, dc, cid)
	if len(procs) != 2 {
		t.Errorf("processes left in the container after Close: %q", procs)
	}
	if ents, err := os.ReadDir("/proc/" + strconv.Itoa(ins.Container.State.Pid) + "/root/.execbox"); err != nil || len(ents) != 1 || ents[0].Name() != "agent" {
		t.Errorf("/.execbox after Close: %v, %v; want the agent program only", ents, err)
	}

	// Again, twice at once: the program is there.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			start := time.Now()
			sb, err := rt.Attach(t.Context(), cid, execbox.Spec{User: &execbox.User{UID: 1234, GID: 1234}}, docker.AttachOptions{Workspace: "/work"})
			if err != nil {
				t.Error(err)
				return
			}
			defer sb.Close()
			t.Logf("Attach %d took %v", i, time.Since(start))
			res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "id -u"})
			if err != nil || res.Stdout.String() != "1234\n" {
				t.Errorf("Exec as 1234: %q, %v", res.Stdout.String(), err)
			}
		})
	}
	wg.Wait()
}

// containerProcs lists the command lines of the container's processes.
func containerProcs(t *testing.T, dc *client.Client, cid string) []string {
	t.Helper()
	top, err := dc.ContainerTop(t.Context(), cid, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range top.Processes {
		out = append(out, strings.Join(p, " "))
	}
	return out
}

// TestAttachAgentKilled: a command that kills the injected agent (it is
// not the container's init) gets ErrUnavailable saying so, not a hang;
// Close still works and the container lives on.
func TestAttachAgentKilled(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	cid := runningContainer(t)
	sb, err := rt.Attach(t.Context(), cid, execbox.Spec{}, docker.AttachOptions{Workspace: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = sb.Exec(ctx, execbox.ExecRequest{Shell: "kill -9 $PPID; sleep 10"})
	if ctx.Err() != nil {
		t.Fatal("Exec hung")
	}
	_, err = sb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}})
	if !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "agent") {
		t.Errorf("Exec after the agent was killed: %v, want ErrUnavailable about the agent", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	ins, err := engine(t).ContainerInspect(t.Context(), cid, client.ContainerInspectOptions{})
	if err != nil || !ins.Container.State.Running {
		t.Errorf("the container: %v, %+v", err, ins.Container.State)
	}
}

// TestAttachErrors: what Attach cannot do fails before anything is left
// in the container.
func TestAttachErrors(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	cid := runningContainer(t)
	for _, tc := range []struct {
		name string
		cid  string
		spec execbox.Spec
		a    docker.AttachOptions
		kind error
		want string
	}{
		{"no workspace", cid, execbox.Spec{}, docker.AttachOptions{}, execbox.ErrInvalidArgument, "workspace"},
		{"missing workspace", cid, execbox.Spec{}, docker.AttachOptions{Workspace: "/nonexistent"}, execbox.ErrInvalidArgument, "workspace"},
		{"image", cid, execbox.Spec{Image: "x"}, docker.AttachOptions{Workspace: "/work"}, execbox.ErrUnsupported, "image"},
		{"memory", cid, execbox.Spec{Limits: execbox.Limits{Memory: 1 << 20}}, docker.AttachOptions{Workspace: "/work"}, execbox.ErrUnsupported, "limits.memory"},
		{"user", cid, execbox.Spec{}, docker.AttachOptions{Workspace: "/work", User: "nobody-here"}, execbox.ErrInvalidArgument, "user"},
		{"no container", "execbox-no-such-container", execbox.Spec{}, docker.AttachOptions{Workspace: "/work"}, execbox.ErrNotFound, ""},
	} {
		sb, err := rt.Attach(t.Context(), tc.cid, tc.spec, tc.a)
		if err == nil {
			sb.Close()
			t.Errorf("%s: Attach succeeded", tc.name)
			continue
		}
		var fe *execbox.FieldError
		if !errors.Is(err, tc.kind) || tc.want != "" && (!errors.As(err, &fe) || fe.Field != tc.want) {
			t.Errorf("%s: %v, want %v naming %q", tc.name, err, tc.kind, tc.want)
		}
	}
	dc := engine(t)
	if _, err := dc.ContainerStop(t.Context(), cid, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Attach(t.Context(), cid, execbox.Spec{}, docker.AttachOptions{Workspace: "/work"}); !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("Attach to a stopped container: %v, want ErrUnavailable", err)
	}
}

// TestVerifyMounts: what is mounted at a target is told apart from
// another directory than the one checked.
func TestVerifyMounts(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	dc := engine(t)
	dir, other := t.TempDir(), t.TempDir()
	init := true
	res, err := dc.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config:     &container.Config{Image: shared.tag, Entrypoint: []string{"sleep", "3600"}},
		HostConfig: &container.HostConfig{Init: &init, NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/work"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dc.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := dc.ContainerStart(t.Context(), res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	pin := func(p string) *os.File {
		f, err := os.OpenFile(p, unix.O_PATH, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	if err := rt.VerifyMounts(t.Context(), res.ID, map[string]*os.File{"/work": pin(dir)}); err != nil {
		t.Errorf("VerifyMounts of what is mounted: %v", err)
	}
	if err := rt.VerifyMounts(t.Context(), res.ID, map[string]*os.File{"/work": pin(other)}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("VerifyMounts of another directory: %v, want ErrPermission", err)
	}
}
