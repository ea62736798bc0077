package sandbox

import (
	"reflect"
	"strings"
	"testing"
)

// mountinfoDocker is /proc/self/mountinfo of a Docker container on a
// cgroup v1 host, with a private cgroup namespace (memory) and with the
// host's (pids), trimmed.
const mountinfoDocker = `76 60 0:47 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs ro
77 76 0:46 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
81 77 0:32 / /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
85 77 0:36 /docker/d699 /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids
90 60 0:50 / /sys/fs/cgroup2 rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
91 60 0:51 / /mnt/cgroup ro,relatime - cgroup cgroup rw,cpu
`

func TestParseCgroupMounts(t *testing.T) {
	got := parseCgroupMounts([]byte(mountinfoDocker))
	want := []cgroupMount{
		{point: "/sys/fs/cgroup/memory", root: "/", readOnly: true, fsType: "cgroup"},
		{point: "/sys/fs/cgroup/pids", root: "/docker/d699", readOnly: true, fsType: "cgroup"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseCgroupMounts =\n%+v\nwant\n%+v", got, want)
	}
}

// FuzzParseCgroupMounts: any mountinfo parses without panicking, and
// every mount returned is a cgroup file system under /sys/fs/cgroup.
func FuzzParseCgroupMounts(f *testing.F) {
	f.Add([]byte(mountinfoDocker))
	f.Add([]byte("1 2 3:4 / /sys/fs/cgroup ro - cgroup2 x ro\n - \n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range parseCgroupMounts(b) {
			if m.fsType != "cgroup" && m.fsType != "cgroup2" {
				t.Errorf("mount of type %q", m.fsType)
			}
			if m.point != "/sys/fs/cgroup" && !strings.HasPrefix(m.point, "/sys/fs/cgroup/") {
				t.Errorf("mount point %q outside /sys/fs/cgroup", m.point)
			}
		}
	})
}
