package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupMount is a cgroup file system mounted under /sys/fs/cgroup, as
// /proc/self/mountinfo lists it.
type cgroupMount struct {
	point    string // mount point
	root     string // the cgroup at the mount's root, in our cgroup namespace
	readOnly bool
	fsType   string // "cgroup" (v1) or "cgroup2"
}

// parseCgroupMounts returns the cgroup mounts in mountinfo.
func parseCgroupMounts(mountinfo []byte) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 1 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		if f[4] != "/sys/fs/cgroup" && !strings.HasPrefix(f[4], "/sys/fs/cgroup/") {
			continue
		}
		ro := false
		for _, o := range strings.Split(f[5], ",") {
			ro = ro || o == "ro"
		}
		out = append(out, cgroupMount{point: f[4], root: f[3], readOnly: ro, fsType: g[0]})
	}
	return out
}

// makeContainerCgroupsWritable remounts read-write the cgroup mounts that
// a container runtime mounted read-only at the root of a private cgroup
// namespace (docker run --cgroupns private, a Kubernetes pod): there the
// mounted tree is the container's own cgroup, the subtree it was given,
// and execbox needs to write it to give each sandbox a cgroup. It needs
// CAP_SYS_ADMIN (which also lets anything else in the container remount
// it) and changes only the container's own mount namespace. Elsewhere
// (the host, a container sharing the host's cgroup namespace) it changes
// nothing. It returns what it remounted.
func makeContainerCgroupsWritable() ([]string, error) {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var done []string
	for _, m := range parseCgroupMounts(info) {
		if !m.readOnly || m.root != "/" {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(m.point, &st); err != nil {
			return done, err
		}
		flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND)
		for _, f := range []struct{ st, ms int64 }{{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC}} {
			if st.Flags&f.st != 0 {
				flags |= uintptr(f.ms)
			}
		}
		if err := unix.Mount("", m.point, "", flags, ""); err != nil {
			return done, fmt.Errorf("remount %s read-write: %w", m.point, err)
		}
		done = append(done, m.point)
	}
	return done, nil
}
