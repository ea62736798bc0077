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
