package workspace

import (
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// capacity returns the size in bytes of the file system holding r, or -1
// if it cannot tell.
func capacity(r *os.Root) int64 {
	f, err := r.Open(".")
	if err != nil {
		return -1
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return -1
	}
	unit := st.Frsize
	if unit <= 0 {
		unit = st.Bsize
	}
	if unit <= 0 {
		return -1
	}
	if st.Blocks > uint64(math.MaxInt64/unit) {
		return math.MaxInt64
	}
	return int64(st.Blocks) * unit
}
