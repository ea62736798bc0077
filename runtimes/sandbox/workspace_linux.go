package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/execbox/execbox/internal/hostpath"
	"github.com/execbox/execbox/internal/undo"
	"golang.org/x/sys/unix"
)

// tempWorkspaceDir is the name of the workspace inside the root-only
// directory of a temporary workspace.
const tempWorkspaceDir = "ws"

// makeTempWorkspace creates a temporary workspace for a sandbox whose
// command user is uid:gid on the host (base+inside uid). It returns the
// outer directory (root:root 0700: no other host user can reach what the
// sandbox writes; the sandbox itself gets the workspace as a detached
// mount, never by path) and the workspace in it, owned by uid:gid, so
// that nothing the sandbox writes there carries root's privilege. With a
// quota (size > 0) the workspace is a tmpfs of that many bytes and
// inodes: writing past it is ENOSPC, and its pages are charged to the
// memory cgroup of the writer, the sandbox.
func makeTempWorkspace(parent, id string, uid, gid uint32, size, inodes int64) (_, _ string, err error) {
	outer, err := os.MkdirTemp(parent, "execbox-"+id+"-")
	if err != nil {
		return "", "", fmt.Errorf("create workspace: %w", err)
	}
	var u undo.Stack
	defer u.OnError(&err)
	u.Add(func() { removeTempWorkspace(outer) })
	if err := os.Chmod(outer, 0o700); err != nil {
		return "", "", err
	}
	ws := filepath.Join(outer, tempWorkspaceDir)
	if err := os.Mkdir(ws, 0o700); err != nil {
		return "", "", fmt.Errorf("create workspace: %w", err)
	}
	if size > 0 {
		opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", size, inodes, uid, gid)
		if err := unix.Mount("execbox-workspace", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return "", "", fmt.Errorf("workspace tmpfs: %w", err)
		}
		return outer, ws, nil
	}
	// No quota: a plain directory; chown by descriptor, never by path.
	fd, err := unix.Open(ws, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", "", err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
		return "", "", err
	}
	return outer, ws, unix.Fchmod(fd, 0o755)
}

// removeTempWorkspace unmounts the quota tmpfs of a temporary workspace,
// if any, and removes it. It is what Close and the sweep do.
func removeTempWorkspace(outer string) error {
	ws := filepath.Join(outer, tempWorkspaceDir)
	// EINVAL: no quota, not a mount; EPERM: rootless, where the quota
	// tmpfs is the init's, never the host's.
	if err := unix.Unmount(ws, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("unmount workspace %s: %w", ws, err)
	}
	return os.RemoveAll(outer)
}

// checkWorkspace refuses a given workspace that is a system directory or
// a home directory of root (hostpath.CheckWorkspace).
var checkWorkspace = hostpath.CheckWorkspace
