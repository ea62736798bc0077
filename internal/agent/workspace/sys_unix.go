//go:build unix

package workspace

import (
	"io/fs"
	"syscall"
)

// fileKey identifies a file on the machine: device and inode.
type fileKey struct{ dev, ino uint64 }

// keyOf returns fi's identity, and whether the file has more than one
// link (only then is the identity worth recording).
func keyOf(fi fs.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileKey{}, false
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino)}, true
}

// mayWrite reports whether o may write the file fi by its permission bits
// (owner, group, others: the first class that matches decides, as the
// kernel does; o's supplementary groups are not known here).
func mayWrite(fi fs.FileInfo, o *owner) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	perm := fi.Mode().Perm()
	switch {
	case o.uid != -1 && int(st.Uid) == o.uid:
		return perm&0o200 != 0
	case o.gid != -1 && int(st.Gid) == o.gid:
		return perm&0o020 != 0
	}
	return perm&0o002 != 0
}

// oDirectory makes an open fail unless it finds a directory.
const oDirectory = syscall.O_DIRECTORY
