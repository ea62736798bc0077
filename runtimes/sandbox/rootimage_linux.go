package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// imageDirs and imageFiles are the paths of an image's root that the
// boundary mounts over or writes (setupBoundary): they are made real
// directories and files of the sandbox's own upper layer first.
var (
	imageDirs  = []string{"/etc", "/proc", "/dev", "/sys", "/tmp", Workspace, "/root", "/home", "/run", "/var/tmp"}
	imageFiles = []string{"/etc/passwd", "/etc/group", "/etc/hostname", "/etc/hosts"}
)

// imageRoot, in the init, moves the image's root (the host's detached
// overlay, cfg.rootMount) onto root, makes the paths the boundary mounts
// over real (realPath) and creates the mask file and directory, as
// rootTmpfs does on a tmpfs. Until pivot_root the init still sees the
// host's tree: an image's symlink /proc -> /../../var/lib would
// otherwise lead a mount there (harmless to the host, whose tree is the
// init's private copy, but not the sandbox's /proc), and one at
// /etc/passwd would make the init read a host file into the sandbox.
func imageRoot(cfg *bootConfig, root string) (maskFile, maskDir string, err error) {
	if err := unix.MoveMount(cfg.rootMount, "", unix.AT_FDCWD, root, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", "", fmt.Errorf("mount the image's root: %w", err)
	}
	unix.Close(cfg.rootMount)
	for _, p := range imageDirs {
		if err := realPath(root, p, true); err != nil {
			return "", "", err
		}
	}
	for _, p := range imageFiles {
		if err := realPath(root, p, false); err != nil {
			return "", "", err
		}
	}
	for _, p := range cfg.ReadOnly {
		fi, err := os.Stat(p)
		if err != nil {
			return "", "", err
		}
		if err := realPath(root, p, fi.IsDir()); err != nil {
			return "", "", err
		}
	}
	maskFile, maskDir = filepath.Join(root, ".mask-file"), filepath.Join(root, ".mask-dir")
	if err := realPath(root, "/.mask-file", false); err != nil {
		return "", "", err
	}
	if err := os.Chmod(maskFile, 0); err != nil {
		return "", "", err
	}
	if err := realPath(root, "/.mask-dir", true); err != nil {
		return "", "", err
	}
	return maskFile, maskDir, os.Chmod(maskDir, 0)
}

// realPath makes p, below root, a directory (dir) or a regular file,
// every parent a directory, none a symlink: what is in the way is
// removed, what is missing is made (directories 0755, files empty 0644).
// Nothing can change root meanwhile: no process of the sandbox runs yet.
func realPath(root, p string, dir bool) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := root
	for i, name := range parts {
		cur = filepath.Join(cur, name)
		wantDir := dir || i < len(parts)-1
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("image root %s: %w", p, err)
		case fi.Mode()&fs.ModeSymlink == 0 && fi.IsDir() == wantDir && (wantDir || fi.Mode().IsRegular()):
			continue
		default:
			if err := os.RemoveAll(cur); err != nil {
				return fmt.Errorf("image root %s: %w", p, err)
			}
		}
		if wantDir {
			err = os.Mkdir(cur, 0o755)
		} else {
			err = os.WriteFile(cur, nil, 0o644)
		}
		if err != nil {
			return fmt.Errorf("image root %s: %w", p, err)
		}
	}
	return nil
}
