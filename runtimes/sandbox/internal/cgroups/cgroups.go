//go:build linux

// Package cgroups gives each sandbox of the sandbox runtime a cgroup, on
// cgroup v1 (one hierarchy per controller) and v2 (the unified hierarchy)
// alike, and gives each command inside the boundary a child cgroup of it.
//
// The host side (Probe, Create, Seal, Remove) is a few file operations
// this package owns, with no cgroup library, whose dependencies every
// start of the binary would pay for (a sandbox's init and agent are
// re-executions of it): the mode of the hierarchy, the limits, the
// delegation of the subtree to the boundary's agent user (chown of the
// directories and of the files that move processes, never of the limit
// files, so that no command, uid 0 included, can write them), the kill
// of everything in a tree (cgroup.kill where the kernel has it), and the
// removal of a tree bottom-up.
//
// On v2, Probe finds the layout: the root of the cgroup2 mount (with or
// without nsdelegate), a configured parent, or a subtree execbox was
// given (systemd Delegate=yes, a user session, a container's cgroup
// namespace), into a leaf of which execbox first moves itself, since v2
// lets a cgroup hold processes or give controllers to children, not
// both. Nothing above the cgroup execbox started in is written.
//
// Inside the boundary, a Tree is the sandbox's cgroup as mounted there,
// and a Child the cgroup of one command. A v2 child is entered at clone
// time (CLONE_INTO_CGROUP, through SysProcAttr.CgroupFD). v1 has no such
// thing, and Go cannot run code between fork and exec, so a v1 child is
// entered by the thread that forks: it moves itself into the child (v1
// places threads, not only processes, and a child process starts in its
// parent thread's cgroups), forks, and moves back. Either way the command
// runs its first instruction inside its cgroup: nothing it forks escapes.
//
// The controllers used are memory, pids and cpu. Limits are:
//
//	memory  v1 memory.limit_in_bytes (and memory.memsw.limit_in_bytes, so
//	        swap does not extend it); v2 memory.max and memory.swap.max 0
//	pids    pids.max
//	cpu     quota over a 100 ms period (v1 cpu.cfs_quota_us, v2 cpu.max)
//
// An OOM kill is read from the oom_kill counter (v1 memory.oom_control,
// v2 memory.events), which the kernel keeps per cgroup and its ancestors.
package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Controllers are the controllers this package uses, in a fixed order.
var Controllers = []string{"memory", "pids", "cpu"}

// Limits of a cgroup. Zero means no limit of that kind.
type Limits struct {
	Memory int64   // bytes
	PIDs   int64   // processes and threads
	CPUs   float64 // cores of bandwidth
}

// cpuPeriod is the CFS period, in microseconds, of CPU quotas.
const cpuPeriod = 100_000

// quota returns the CPU quota in microseconds per cpuPeriod for cpus.
func quota(cpus float64) int64 {
	q := int64(cpus * cpuPeriod)
	return max(q, 1000) // the kernel's minimum is 1 ms
}

// readCounter returns the value of key in a "key value" lines file
// (memory.events, memory.oom_control), or 0.
func readCounter(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return counter(b, key)
}

// counter returns the value of key in b, "key value" lines, or 0.
func counter(b []byte, key string) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// readInt returns the integer in a one-value file, or 0.
func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readPIDs returns the PIDs in dir's cgroup.procs and, with recursive, in
// those of every cgroup below it.
func readPIDs(dir string, recursive bool) []int {
	var out []int
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err == nil {
		for f := range strings.FieldsSeq(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if recursive {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, readPIDs(filepath.Join(dir, e.Name()), true)...)
			}
		}
	}
	return out
}

// signalAll sends sig to every process in dir (and below, with
// recursive) and returns how many it found. The PIDs are those of the
// reader's PID namespace; sig 0 only counts them. A recursive SIGKILL on
// v2 from Linux 5.14 is one write to cgroup.kill, which the kernel
// carries out atomically against forks; elsewhere it is a scan.
func signalAll(dir string, recursive bool, sig syscall.Signal) int {
	pids := readPIDs(dir, recursive)
	if len(pids) > 0 && sig == syscall.SIGKILL && recursive &&
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return len(pids)
	}
	if sig != 0 {
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
	}
	return len(pids)
}

// killAll sends SIGKILL to everything in dir and below until it is empty
// or the deadline passes, and reports whether it is empty. A fork racing
// the scan is caught by the next pass; the pids limit bounds how many
// passes a fork bomb can force.
func killAll(dir string, deadline time.Time) bool {
	wait := time.Millisecond
	for {
		if signalAll(dir, true, syscall.SIGKILL) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// removeTree removes the cgroup dir and every cgroup below it, deepest
// first. The kernel refuses to remove a cgroup that still holds a process
// (EBUSY) for a moment after the process died; removeTree retries until
// the deadline. A missing dir is not an error.
func removeTree(dir string, deadline time.Time) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name()), deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	wait := time.Millisecond
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return errors.Join(errs...)
		}
		if (err != syscall.EBUSY && err != syscall.EAGAIN) || time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))...)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// ownCgroups parses /proc/self/cgroup: controller (or "" for v2) to path.
func ownCgroups() (map[string]string, error) { return parseCgroups("/proc/self/cgroup") }

// parseCgroups parses a /proc/PID/cgroup file.
func parseCgroups(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			out[""] = f[2]
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out, nil
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
