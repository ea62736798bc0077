//go:build linux

package cgroups

import "golang.org/x/sys/unix"

type syscallStatfs = unix.Statfs_t

const (
	cgroupSuperMagic  = unix.CGROUP_SUPER_MAGIC
	cgroup2SuperMagic = unix.CGROUP2_SUPER_MAGIC
)

func statfs(path string, st *unix.Statfs_t) error { return unix.Statfs(path, st) }
