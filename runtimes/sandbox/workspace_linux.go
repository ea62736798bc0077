package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
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
func makeTempWorkspace(parent, id string, uid, gid uint32, size, inodes int64) (outer, ws string, err error) {
	outer, err = os.MkdirTemp(parent, "execbox-"+id+"-")
	if err != nil {
		return "", "", fmt.Errorf("create workspace: %w", err)
	}
	defer func() {
		if err != nil {
			removeTempWorkspace(outer)
		}
	}()
	if err := os.Chmod(outer, 0o700); err != nil {
		return "", "", err
	}
	ws = filepath.Join(outer, tempWorkspaceDir)
	if err := os.Mkdir(ws, 0o700); err != nil {
		return "", "", err
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

// systemDirs are host directories (and everything below those marked
// with a trailing slash) that a sandbox must not get read-write unless
// asked explicitly: the system, what root owns, and the shared temporary
// directories.
var systemDirs = []string{
	"/", "/usr/", "/etc/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/",
	"/boot/", "/dev/", "/proc/", "/sys/", "/var", "/var/lib/", "/var/log/", "/var/cache/",
	"/run/", "/root/", "/srv", "/opt", "/home", "/mnt", "/media", "/snap/", "/nix/",
	// Shared temporary directories: root's files there would be the
	// command's to replace, and its new files root's (symlink races).
	"/tmp", "/var/tmp",
}

// checkWorkspace refuses a given workspace that is / or a system
// directory, or a home directory of root (/root, root's home in the
// passwd database), unless allow: a command would write the host's
// system or root's dotfiles (the CLI uses the current directory, which
// for an administrator is often /root).
func checkWorkspace(dir, real string, allow bool) error {
	if allow {
		return nil
	}
	homes := []string{"/root"}
	if u, err := user.LookupId("0"); err == nil && u.HomeDir != "" {
		homes = append(homes, filepath.Clean(u.HomeDir))
	}
	// Rootless, the caller's own home is to its dotfiles what root's is
	// to root's (its subdirectories, projects, are fine).
	if euid := os.Geteuid(); euid != 0 {
		mine := []string{os.Getenv("HOME")}
		if u, err := user.LookupId(strconv.Itoa(euid)); err == nil {
			mine = append(mine, u.HomeDir)
		}
		for _, p := range []string{dir, real} {
			for _, h := range mine {
				if h != "" && filepath.IsAbs(h) && p == filepath.Clean(h) {
					return &execbox.FieldError{Field: "workspace", Kind: execbox.ErrPermission,
						Problem: fmt.Sprintf("%s is your home directory (a command could rewrite your dotfiles); use a project directory, or pass allow_system_workspace (--allow-system-workspace)", dir)}
				}
			}
		}
	}
	for _, p := range []string{dir, real} {
		for _, h := range homes {
			if p == h || strings.HasPrefix(p, h+"/") && h != "/" {
				return &execbox.FieldError{Field: "workspace", Kind: execbox.ErrPermission,
					Problem: fmt.Sprintf("%s is a home directory of root; pass allow_system_workspace (--allow-system-workspace) to use it", dir)}
			}
		}
		for _, s := range systemDirs {
			under := strings.HasSuffix(s, "/") && s != "/" && strings.HasPrefix(p, s)
			if p == strings.TrimSuffix(s, "/") || p == s || under {
				return &execbox.FieldError{Field: "workspace", Kind: execbox.ErrPermission,
					Problem: fmt.Sprintf("%s is a system directory; pass allow_system_workspace (--allow-system-workspace) to use it", dir)}
			}
		}
	}
	return nil
}
