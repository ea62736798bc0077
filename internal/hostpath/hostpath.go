// Package hostpath holds the rules every isolating runtime applies to
// host paths a caller hands it, such as a given workspace.
package hostpath

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
)

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

// CheckWorkspace refuses a given workspace that is / or a system
// directory, or a home directory of root (/root, root's home in the
// passwd database), unless allow: a command would write the host's
// system or root's dotfiles (the CLI uses the current directory, which
// for an administrator is often /root).
func CheckWorkspace(dir, real string, allow bool) error {
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

// CacheDir is the host directory where execbox keeps the cache called
// part (the static agent, the run workspace's compiler caches):
// $XDG_CACHE_HOME/execbox/PART when that variable is set, else
// /var/cache/execbox/PART for root, whose home a sandbox's unprivileged
// init cannot search, and ~/.cache/execbox/PART for others.
func CacheDir(part string) (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "execbox", part), nil
	}
	if os.Geteuid() == 0 {
		return filepath.Join("/var/cache/execbox", part), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	return filepath.Join(d, "execbox", part), nil
}
