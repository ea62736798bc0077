package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/imageuser"
	"github.com/execbox/execbox/internal/undo"
)

// Inside every container: the agent program (its path is also how this
// program knows, re-executed, that it is the agent: see agent_linux.go)
// and the directory of its configuration and socket.
const (
	agentPath  = "/.execbox/agent"
	runDir     = "/.execbox/run"  // the agent's configuration, from the host, read-only
	sockDir    = "/.execbox/sock" // the agent's socket, on a tmpfs of the container's
	bootFile   = "agent.json"
	socketFile = "agent.sock"
)

// Labels on every container this runtime makes.
const (
	labelRuntime = "dev.execbox.runtime" // "docker"
	labelSandbox = "dev.execbox.sandbox" // the sandbox's ID
	labelOwner   = "dev.execbox.owner"   // host/pid/start of the process that made it
	labelState   = "dev.execbox.state"   // its state directory on the host
	labelUser    = "dev.execbox.label."  // prefix of Spec.Labels
)

// droppedCaps are taken from Docker's default set: raw sockets (spoofing
// on a network), device nodes, audit writes and file capabilities are
// nothing a command needs.
var droppedCaps = []string{"NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP"}

// imageInfo is what Create uses of the image.
type imageInfo struct {
	ref  string
	id   string
	env  []string
	user string
}

// ensureImage returns the image, pulling it as Options.Pull says.
func (r *Runtime) ensureImage(ctx context.Context, dc *client.Client, ref string) (imageInfo, error) {
	if r.opts.Pull != PullAlways {
		info, err := inspectImage(ctx, dc, ref)
		if err == nil || !errors.Is(err, execbox.ErrNotFound) || r.opts.Pull == PullNever {
			return info, err
		}
	}
	resp, err := dc.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(ctx)
	}
	if err != nil {
		return imageInfo{}, &execbox.FieldError{Field: "image", Kind: classifyPull(err),
			Problem: fmt.Sprintf("pull %s: %v", ref, err)}
	}
	return inspectImage(ctx, dc, ref)
}

func inspectImage(ctx context.Context, dc *client.Client, ref string) (imageInfo, error) {
	res, err := dc.ImageInspect(ctx, ref)
	if err != nil {
		err = engineErr(err)
		if errors.Is(err, execbox.ErrNotFound) {
			return imageInfo{}, &execbox.FieldError{Field: "image", Kind: execbox.ErrNotFound,
				Problem: fmt.Sprintf("%s: no such image in the docker engine", ref)}
		}
		return imageInfo{}, fmt.Errorf("image %s: %w", ref, err)
	}
	info := imageInfo{ref: ref, id: res.ID}
	if c := res.Config; c != nil {
		info.env, info.user = c.Env, c.User
	}
	return info, nil
}

// classifyPull says what kind of failure a pull's is: the engine's
// classification where it gives one, the registry's words otherwise.
func classifyPull(err error) error {
	if k := engineErr(err); k != err {
		for _, kind := range []error{execbox.ErrNotFound, execbox.ErrPermission, execbox.ErrUnavailable, execbox.ErrInvalidArgument} {
			if errors.Is(k, kind) {
				return kind
			}
		}
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "not found"), strings.Contains(msg, "manifest unknown"), strings.Contains(msg, "does not exist"):
		return execbox.ErrNotFound
	case strings.Contains(msg, "unauthorized"), strings.Contains(msg, "denied"):
		return execbox.ErrPermission
	}
	return execbox.ErrUnavailable
}

// createContainer creates the sandbox's container, stopped.
func (r *Runtime) createContainer(ctx context.Context, dc *client.Client, id string, spec execbox.Spec, c Container, img imageInfo,
	agentBin, state string, ws workspace, u *undo.Stack) (string, error) {
	labels := map[string]string{}
	maps.Copy(labels, c.Labels)
	maps.Copy(labels, map[string]string{labelRuntime: Name, labelSandbox: id, labelOwner: r.owner, labelState: state})
	for k, v := range spec.Labels {
		labels[labelUser+k] = v
	}
	profile, err := seccompProfile()
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	// No init of Docker's: the agent is the container's init, which no
	// command can signal, and it reaps what commands orphan.
	noInit := false
	hc := &container.HostConfig{
		Init:        &noInit,
		NetworkMode: container.NetworkMode(r.opts.Network),
		CapDrop:     droppedCaps,
		SecurityOpt: []string{"no-new-privileges:true", "seccomp=" + profile},
		// The agent's configuration, read-only; its socket on a tmpfs
		// of the container's own, which the host reaches through the
		// container's root: nothing a command writes lands on the host.
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: agentBin, Target: agentPath, ReadOnly: true},
			{Type: mount.TypeBind, Source: state, Target: runDir, ReadOnly: true},
		},
		Tmpfs: map[string]string{sockDir: "rw,noexec,nosuid,nodev,size=64k,nr_inodes=16,mode=0700"},
		// The agent's own logs, bounded: a command cannot reach its
		// output, but a bound costs nothing.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
	}
	if ws.host != "" {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: ws.host, Target: c.Workspace})
	} else {
		hc.Tmpfs[c.Workspace] = ws.tmpfs
	}
	hc.Mounts = append(hc.Mounts, c.Mounts...)
	if r.opts.Memory > 0 {
		hc.Memory = int64(r.opts.Memory)
		hc.MemorySwap = int64(r.opts.Memory) // no swap beyond it
	}
	if r.opts.PIDs > 0 {
		pids := r.opts.PIDs
		hc.PidsLimit = &pids
	}
	if r.opts.CPUs > 0 {
		hc.NanoCPUs = int64(r.opts.CPUs * 1e9)
	}
	cfg := &container.Config{
		Image:      img.id,
		Entrypoint: []string{agentPath},
		Cmd:        []string{"--listen", "unix:" + path.Join(sockDir, socketFile), "--config", path.Join(runDir, bootFile)},
		User:       "0:0", // the agent; commands run as the user the Boot names
		WorkingDir: c.Workspace,
		Hostname:   "sandbox",
		Labels:     labels,
		Env:        append([]string{"container=docker"}, c.Env...),
	}
	name := c.Name
	if name == "" {
		name = "execbox-" + id
	}
	res, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: name})
	if err != nil {
		return "", fmt.Errorf("sandbox %s: create container from %s: %w", id, img.ref, engineErr(err))
	}
	u.Add(func() { r.remove(dc, res.ID) })
	return res.ID, nil
}

// RemoveContainer removes a container and its anonymous volumes, killing
// it; one already gone is no error.
func (r *Runtime) RemoveContainer(cid string) error {
	dc, err := r.engine()
	if err != nil {
		return err
	}
	return r.remove(dc, cid)
}

// remove is RemoveContainer with the engine's client.
func (r *Runtime) remove(dc *client.Client, cid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := dc.ContainerRemove(ctx, cid, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrNotFound(err) {
		return fmt.Errorf("remove container %s: %w", cid, engineErr(err))
	}
	return nil
}

func cerrNotFound(err error) bool { return errors.Is(engineErr(err), execbox.ErrNotFound) }

// imageUser is the user the image's config names, as ids: parsed when
// numeric; else looked up in the image's /etc/passwd and /etc/group,
// read from a container created (never started) for the purpose, once
// per image and user.
func (r *Runtime) imageUser(ctx context.Context, dc *client.Client, img imageInfo) (*execbox.User, error) {
	if u, ok := numericUser(img.user); ok {
		return &u, nil
	}
	key := img.id + "\x00" + img.user
	r.usersMu.Lock()
	u, ok := r.users[key]
	r.usersMu.Unlock()
	if ok {
		return &u, nil
	}
	probe, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: img.id, Entrypoint: []string{"/nonexistent"}, Labels: map[string]string{labelRuntime: Name, labelOwner: r.owner}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: read its users: %w", img.ref, engineErr(err))
	}
	defer r.remove(dc, probe.ID)
	u, err = imageuser.Resolve(img.user, img.ref, func(name string) (io.ReadCloser, error) {
		res, err := dc.CopyFromContainer(ctx, probe.ID, client.CopyFromContainerOptions{SourcePath: "/" + name})
		if err != nil {
			return nil, err
		}
		defer res.Content.Close()
		// One regular file in a tar stream; anything else (a link to
		// elsewhere) is no such file.
		tr := tar.NewReader(res.Content)
		h, err := tr.Next()
		if err != nil || h.Typeflag != tar.TypeReg {
			return nil, fs.ErrNotExist
		}
		b, err := io.ReadAll(io.LimitReader(tr, 16<<20+1))
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	})
	if err != nil {
		return nil, err
	}
	r.usersMu.Lock()
	r.users[key] = u
	r.usersMu.Unlock()
	return &u, nil
}

// numericUser parses "", "uid" and "uid:gid" (a uid alone has the gid of
// the same number, as imageuser.Resolve gives when passwd has no entry).
func numericUser(s string) (execbox.User, bool) {
	if s == "" {
		return execbox.User{}, true
	}
	us, gs, hasGroup := strings.Cut(s, ":")
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil || !hasGroup {
		return execbox.User{}, false // a passwd entry may name another gid
	}
	gid, err := strconv.ParseUint(gs, 10, 32)
	if err != nil {
		return execbox.User{}, false
	}
	return execbox.User{UID: uint32(uid), GID: uint32(gid)}, true
}

// waitSocket waits for the agent's socket to appear, and returns a
// descriptor of it (O_PATH): connections go through it, not the path.
// open, if not nil, opens it (O_PATH) in place of the host's path sock,
// which then only names it.
func waitSocket(ctx context.Context, sock string, open func() (int, error), exited <-chan container.WaitResponse, waitErr <-chan error) (*os.File, error) {
	if open == nil {
		open = func() (int, error) { return unix.Open(sock, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0) }
	}
	delay := 200 * time.Microsecond
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		fd, err := open()
		if err == nil {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
				unix.Close(fd)
				return nil, fmt.Errorf("%s is not a socket", sock)
			}
			return os.NewFile(uintptr(fd), sock), nil
		}
		if !errors.Is(err, unix.ENOENT) {
			return nil, err
		}
		select {
		case res := <-exited:
			return nil, fmt.Errorf("the container exited with code %d: %w", res.StatusCode, execbox.ErrUnavailable)
		case err := <-waitErr:
			if err != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("wait for the container: %w", engineErr(err))
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("no socket after 60s: %w", execbox.ErrUnavailable)
		case <-time.After(delay):
			delay = min(2*delay, 10*time.Millisecond)
		}
	}
}

// logsTail is the end of the container's output (the agent's logs), to
// explain a failure; "" if there is none.
func (r *Runtime) logsTail(dc *client.Client, cid string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := dc.ContainerLogs(ctx, cid, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 8<<10))
	s := strings.TrimSpace(out.String())
	if s == "" {
		return ""
	}
	return "; the container's output:\n" + s
}
