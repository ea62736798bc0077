package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MarkerVar is the environment variable execbox sets in every command it
// starts, "SANDBOX/PROCESS". Descendants inherit it, which is how execbox
// finds processes that left the command's process group (setsid) and its
// process tree (double fork, reparented to init). A process that both
// leaves the tree and scrubs its environment escapes this tracking: the
// local runtime is not a security boundary; the sandbox runtime kills by
// cgroup and pid namespace instead.
const MarkerVar = "EXECBOX_TRACE"

type procInfo struct {
	pid, ppid, pgrp int
	zombie          bool
}

// readStat parses /proc/PID/stat. The command name may contain spaces and
// parentheses, so fields are taken after the last ')'.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, zombie: f[0] == "Z" || f[0] == "X"}, true
}

// hasMarker reports whether pid's initial environment holds
// MarkerVar=value, or with prefix set, MarkerVar=value*.
func hasMarker(pid int, value string, prefix bool) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := []byte(MarkerVar + "=" + value)
	for len(b) > 0 {
		var kv []byte
		kv, b, _ = bytes.Cut(b, []byte{0})
		if prefix && bytes.HasPrefix(kv, want) || bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// treeQuery selects processes to kill: descendants of root, members of
// process group pgrp, and carriers of the marker.
type treeQuery struct {
	root, pgrp int
	marker     string
	prefix     bool  // marker is a prefix (a whole sandbox)
	scope      Scope // every member is part of the tree
}

// find returns the live (non-zombie) processes matching q.
func (q treeQuery) find() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	infos := make(map[int]procInfo, len(names))
	children := make(map[int][]int)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self {
			continue
		}
		if info, ok := readStat(pid); ok {
			infos[pid] = info
			children[info.ppid] = append(children[info.ppid], pid)
		}
	}
	picked := make(map[int]bool)
	if q.root > 0 {
		queue := []int{q.root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if _, ok := infos[p]; ok && !picked[p] {
				picked[p] = true
				queue = append(queue, children[p]...)
			}
		}
	}
	var out []int
	for pid, info := range infos {
		if info.zombie {
			continue
		}
		if picked[pid] || (q.pgrp > 0 && info.pgrp == q.pgrp) ||
			(q.marker != "" && hasMarker(pid, q.marker, q.prefix)) {
			out = append(out, pid)
		}
	}
	return out
}

// signal sends sig to every process q finds, and returns how many it found.
func (q treeQuery) signal(sig syscall.Signal) int {
	if q.pgrp > 0 {
		_ = syscall.Kill(-q.pgrp, sig)
	}
	pids := q.find()
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	n := len(pids)
	if q.scope != nil {
		n += q.scope.Signal(sig)
	}
	return n
}

// kill sends SIGKILL until nothing matching q is alive, or deadline passes.
// Repeating the scan catches children forked while the previous pass ran.
// It reports whether the tree is gone.
func (q treeQuery) kill(deadline time.Time) bool {
	wait := time.Millisecond
	for {
		if q.signal(syscall.SIGKILL) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// alive reports whether anything matching q is alive.
func (q treeQuery) alive() bool {
	return len(q.find()) > 0 || q.scope != nil && q.scope.Signal(0) > 0
}
