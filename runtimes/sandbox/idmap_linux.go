package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// idmapKey is an idmapping of one user and group: files owned on disk by
// DiskUID:DiskGID appear (and are created) as HostUID:HostGID; with a
// Size above 1, so do the Size ids that follow each.
type idmapKey struct{ DiskUID, DiskGID, HostUID, HostGID, Size uint32 }

// usernsCache keeps one user namespace per idmapping, held by its file
// descriptor: making one costs a process, and sandboxes reuse the same
// few (one per uid range and workspace owner).
type usernsCache struct {
	mu  sync.Mutex
	fds map[idmapKey]int
}

// maxCachedUserns bounds the cache; past it the oldest are not kept.
const maxCachedUserns = 4096

// get returns a user namespace with k's mapping, owned by the cache.
func (c *usernsCache) get(k idmapKey) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[k]; ok {
		return fd, nil
	}
	fd, err := newUserns(k)
	if err != nil {
		return -1, err
	}
	if c.fds == nil {
		c.fds = map[idmapKey]int{}
	}
	if len(c.fds) >= maxCachedUserns {
		for key, old := range c.fds {
			unix.Close(old)
			delete(c.fds, key)
			break
		}
	}
	c.fds[k] = fd
	return fd, nil
}

// newUserns creates a user namespace mapping k by starting a helper in it
// (a user namespace needs a process to be created), and opens it.
func newUserns(k idmapKey) (int, error) {
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{usernsArg0},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(k.DiskUID), HostID: int(k.HostUID), Size: int(max(k.Size, 1))}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(k.DiskGID), HostID: int(k.HostGID), Size: int(max(k.Size, 1))}},
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("user namespace for an idmapped mount: %w", err)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	stdin.Close()
	_ = cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("open user namespace: %w", err)
	}
	return fd, nil
}

// idmappedClone returns a detached mount of dir (a file descriptor for
// move_mount) through which its files owned by k.DiskUID:DiskGID belong
// to k.HostUID:HostGID, nosuid and nodev; with userns -1, not idmapped.
// The caller closes it.
func idmappedClone(dir string, userns int) (*os.File, error) {
	return idmappedCloneAt(unix.AT_FDCWD, dir, userns)
}

// idmappedCloneAt is idmappedClone of path relative to the descriptor
// dirfd; path "" is dirfd itself.
func idmappedCloneAt(dirfd int, path string, userns int) (*os.File, error) {
	flags, dir := uint(unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC), path
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
		dir = fmt.Sprintf("descriptor %d", dirfd)
	}
	fd, err := unix.OpenTree(dirfd, path, flags)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", dir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if userns >= 0 {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(userns)
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("idmapped mount of %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), "workspace-mount"), nil
}
