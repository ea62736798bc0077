//go:build linux

package sandbox_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"golang.org/x/sys/unix"
)

// TestIsolation tries what hostile code would try from inside a sandbox.
// Each attempt must fail the expected way, and the host must be unchanged
// afterwards: no process, mount, cgroup or directory of the sandboxes.
func TestIsolation(t *testing.T) {
	testutil.Require(t, testutil.Root) // uid ranges, users inside, a secret of host root: the rootless suite is TestRootlessIsolation
	token := strconv.FormatInt(time.Now().UnixNano(), 36)

	// Something of the host the sandbox must not reach: a file in /root,
	// one in the host's /tmp, a setuid-root copy of id, the workspace of
	// another sandbox, and a listener on the host's loopback.
	rootSecret := "/root/.execbox-isolation-" + token
	writeFile(t, rootSecret, "secret", 0o600)
	t.Cleanup(func() { os.Remove(rootSecret) })
	tmpSecret := filepath.Join(os.TempDir(), "execbox-isolation-"+token)
	writeFile(t, tmpSecret, "secret", 0o644)
	t.Cleanup(func() { os.Remove(tmpSecret) })
	// Read-only paths must be reachable by the sandbox's root, who is
	// nobody on the host: not below t.TempDir's private directory.
	suidDir, err := os.MkdirTemp("", "execbox-isolation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(suidDir) })
	os.Chmod(suidDir, 0o755)
	if idPath, err := exec.LookPath("id"); err == nil {
		b, _ := os.ReadFile(idPath)
		writeFile(t, filepath.Join(suidDir, "suid-id"), string(b), 0o755)
		if err := os.Chmod(filepath.Join(suidDir, "suid-id"), 0o4755); err != nil {
			t.Fatal(err)
		}
	}
	var ln net.Listener
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	_ = accepted
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	rt := requireSandbox(t, sandbox.Options{TmpSize: 8 << 20, ReadOnlyPaths: []string{suidDir}})
	mountsBefore := mountLines(t)
	var closed []execbox.Sandbox
	create := func(spec execbox.Spec) execbox.Sandbox {
		t.Helper()
		sb, err := rt.Create(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		closed = append(closed, sb)
		t.Cleanup(func() { sb.Close() })
		return sb
	}
	victim := create(execbox.Spec{})
	if err := victim.Files().WriteFile(t.Context(), "secret.txt", []byte("victim"), execbox.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	victimHost := sandbox.Leftovers(victim.(*sandbox.Sandbox))
	victimWS := filepath.Join(victimHost[len(victimHost)-1], "ws") // its temporary workspace
	sb := create(execbox.Spec{Limits: execbox.Limits{Memory: 64 << 20, PIDs: 64}})

	run := func(t *testing.T, req execbox.ExecRequest) execbox.Result {
		t.Helper()
		if req.Timeout == 0 {
			req.Timeout = 20 * time.Second
		}
		res, err := sb.Exec(t.Context(), req)
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		return res
	}
	// refused runs script, which must exit non-zero.
	refused := func(t *testing.T, script string) execbox.Result {
		t.Helper()
		res := run(t, execbox.ExecRequest{Command: []string{"sh", "-c", script}})
		if res.Success() {
			t.Errorf("%q succeeded (stdout %q), want it refused", script, res.Stdout.Text())
		}
		return res
	}

	t.Run("read-secrets", func(t *testing.T) {
		for _, p := range []string{"/etc/shadow", "/etc/gshadow", rootSecret, tmpSecret, victimWS + "/secret.txt"} {
			res := refused(t, "cat "+p)
			if strings.Contains(res.Stdout.Text(), "secret") || strings.Contains(res.Stdout.Text(), "victim") || strings.Contains(res.Stdout.Text(), "root:") {
				t.Errorf("cat %s printed %q", p, res.Stdout.Text())
			}
		}
		res := run(t, execbox.ExecRequest{Shell: "ls -A /root /home /run; ls /var; test -e /var/run/docker.sock && echo docker"})
		if out := strings.TrimSpace(res.Stdout.Text()); strings.Contains(out, "docker") || strings.Contains(out, "execbox") {
			t.Errorf("host directories visible: %q", out)
		}
	})

	t.Run("write-outside", func(t *testing.T) {
		for _, p := range []string{"/usr/x", "/etc/x", "/x", "/bin/x", "/var/x", "/sys/x", "/proc/x", "/dev/x"} {
			refused(t, "echo x > "+p)
		}
		refused(t, "echo 1 > /sys/fs/cgroup/memory/memory.limit_in_bytes || echo 1 > /sys/fs/cgroup/memory.max")
		refused(t, "echo 100000 > /sys/fs/cgroup/pids/pids.max || echo 100000 > /sys/fs/cgroup/pids.max")
		if res := run(t, execbox.ExecRequest{Shell: "echo x > /workspace/ok && echo x > /tmp/ok && echo x > /dev/shm/ok"}); !res.Success() {
			t.Errorf("writing the workspace, /tmp and /dev/shm: %s %s", res.String(), res.Stderr.Text())
		}
	})

	t.Run("network", func(t *testing.T) {
		for _, target := range []string{"127.0.0.1/" + strconv.Itoa(port), "169.254.169.254/80", "1.1.1.1/53"} {
			res := refused(t, "exec bash -c 'exec 3<>/dev/tcp/"+target+"'")
			t.Logf("connect %s: %s", target, strings.TrimSpace(res.Stderr.Text()))
		}
		select {
		case <-accepted:
			t.Error("the host's listener on 127.0.0.1 accepted a connection from the sandbox")
		default:
		}
		// Loopback inside works: one command's server, the next's client.
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"python3", "-c", "import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', 8099)); s.listen(); print('up', flush=True); c,_=s.accept(); c.send(b'hi'); c.close()"}})
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, func() bool {
			r := run(t, execbox.ExecRequest{Shell: "exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/8099 && cat <&3'"})
			return r.Success()
		}, "a server started in the sandbox reachable over its loopback")
		p.Kill(t.Context())
	})

	t.Run("vsock", func(t *testing.T) {
		testutil.Require(t, testutil.Command("python3"))
		res := run(t, execbox.ExecRequest{Command: []string{"python3", "-c", "import socket\ntry:\n socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n print('open')\nexcept OSError as e:\n print(e.errno)"}})
		if out := strings.TrimSpace(res.Stdout.Text()); out != strconv.Itoa(int(unix.EAFNOSUPPORT)) {
			t.Errorf("an AF_VSOCK socket in the sandbox: %q, want errno EAFNOSUPPORT (%d)", out, unix.EAFNOSUPPORT)
		}
		// Where the host itself has vsock (a cloud VM, as CI's), only the
		// sandbox's filter can have refused it.
		if fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
			unix.Close(fd)
		} else {
			t.Logf("the host has no vsock either (%v): the check above shows the errno, not the filter", err)
		}
	})

	t.Run("host-processes", func(t *testing.T) {
		me := os.Getpid()
		refused(t, fmt.Sprintf("kill -0 %d", me))
		res := run(t, execbox.ExecRequest{Shell: "ls /proc | grep -c '^[0-9]'"})
		if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout.Text())); n > 10 {
			t.Errorf("the sandbox sees %d processes", n)
		}
		// Not even the sandbox's init and agent are visible to commands.
		refused(t, "cat /proc/1/cmdline")
	})

	t.Run("privileges", func(t *testing.T) {
		res := run(t, execbox.ExecRequest{Shell: "grep -E '^(Uid|CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status"})
		out := res.Stdout.Text()
		for _, want := range []string{"Uid:\t1000", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
		// A setuid-root binary does not elevate.
		if _, err := os.Stat(filepath.Join(suidDir, "suid-id")); err == nil {
			res := run(t, execbox.ExecRequest{Command: []string{filepath.Join(suidDir, "suid-id"), "-u"}})
			if got := strings.TrimSpace(res.Stdout.Text()); got != "1000" {
				t.Errorf("setuid-root id -u printed %q (%s), want 1000", got, res.Stderr.Text())
			}
		}
		refused(t, "su -c true root </dev/null")
		refused(t, "mount -t tmpfs none /tmp")
		refused(t, "unshare -U true")
		refused(t, "unshare -r true")
		refused(t, "unshare -n true")
		// ptrace of a sibling, and of oneself under strace.
		refused(t, "sleep 30 & p=$!; python3 -c \"import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); r=l.ptrace(16, $p, 0, 0); sys.exit(0 if r == 0 else 1)\"; s=$?; kill $p; exit $s")
		if _, err := exec.LookPath("strace"); err == nil {
			refused(t, "strace -f true")
		}
		// As root inside: still no capability.
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "id -u; mount -t tmpfs none /tmp 2>&1 || echo refused", User: &execbox.User{UID: 0, GID: 0}})
		if err != nil {
			t.Fatal(err)
		}
		if out := res.Stdout.Text(); !strings.HasPrefix(out, "0\n") || !strings.Contains(out, "refused") {
			t.Errorf("as root inside:\n%s", out)
		}
	})

	// Every command, whatever its uid, starts with no capability in any
	// set (the bounding set included: exec cannot give one back) and no
	// core dumps, which it cannot turn back on.
	t.Run("capabilities", func(t *testing.T) {
		for _, uid := range []uint32{1000, 0} {
			res, err := sb.Exec(t.Context(), execbox.ExecRequest{
				Shell: "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; echo core $(ulimit -Hc); ulimit -c unlimited 2>/dev/null && echo raised",
				User:  &execbox.User{UID: uid, GID: uid},
			})
			if err != nil {
				t.Fatal(err)
			}
			out := res.Stdout.Text()
			for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "core 0\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("uid %d: status lacks %q:\n%s", uid, want, out)
				}
			}
			if strings.Contains(out, "raised") {
				t.Errorf("uid %d raised its core dump limit", uid)
			}
		}
	})

	// The agent's identity is its own: a user asking for it is refused.
	t.Run("agent-id-refused", func(t *testing.T) {
		for _, u := range []execbox.User{{UID: sandbox.AgentID}, {GID: sandbox.AgentID}, {UID: 1000, GID: 1000, Groups: []uint32{sandbox.AgentID}}} {
			_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}, User: &u})
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || fe.Field != "user" || !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Errorf("user %+v: err %v, want a FieldError naming user", u, err)
			}
			other, err := rt.Create(t.Context(), execbox.Spec{User: &u})
			if err == nil {
				other.Close()
			}
			if !errors.As(err, &fe) || !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Errorf("Create with user %+v: err %v, want a FieldError", u, err)
			}
		}
	})

	t.Run("fork-bomb", func(t *testing.T) {
		// The bomb runs in the background of a started command: it fills
		// the sandbox's PIDs (64), no more, and Kill ends all of it.
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Shell: "f() { f | f & }; f; wait"})
		if err != nil {
			t.Fatal(err)
		}
		// The sandbox's cgroups in the pids hierarchy (v1) or the unified
		// one (v2): the one with a pids.max of 64, and where the kernel
		// counts forks it refused (pids.events "max": in the cgroup that
		// forked, or the one at its limit, by kernel version).
		var limitDir string
		dirs := sandbox.Leftovers(sb.(*sandbox.Sandbox))
		for _, d := range dirs {
			for _, c := range []string{filepath.Join(d, "cmds"), d} {
				if b, err := os.ReadFile(filepath.Join(c, "pids.max")); err == nil && strings.TrimSpace(string(b)) != "max" && limitDir == "" {
					limitDir = c
					if got := strings.TrimSpace(string(b)); got != "64" {
						t.Errorf("pids.max of %s = %s, want the sandbox's 64", c, got)
					}
				}
			}
		}
		if limitDir == "" {
			t.Fatalf("no cgroup with a pids.max among %v", dirs)
		}
		// The bomb reaching the limit is an event the kernel counts: no
		// sampling window. Tasks are counted in the cgroup's lists then,
		// not read off pids.current: a fork refused at the limit adds
		// its charge before taking it back, so a reader of pids.current
		// can see 65 of 64 for an instant (seen on cgroup v1).
		testutil.Eventually(t, 30*time.Second, func() bool { return refusedForks(t, limitDir) > 0 },
			"the fork bomb to reach the limit of 64 (pids.events)")
		if n := countTasks(t, limitDir); n > 64 {
			t.Errorf("fork bomb: %d processes in the sandbox at its limit of 64", n)
		}
		start := time.Now()
		if err := p.Kill(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Logf("Kill took %v", time.Since(start))
		if r := run(t, execbox.ExecRequest{Command: []string{"true"}}); !r.Success() {
			t.Errorf("the sandbox after a fork bomb: %s", r.String())
		}
	})

	t.Run("memory", func(t *testing.T) {
		res := run(t, execbox.ExecRequest{Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}})
		if res.Reason != execbox.ReasonOOMKilled {
			t.Errorf("allocating 256 MiB in a 64 MiB sandbox: %s, want %s", res.String(), execbox.ReasonOOMKilled)
		}
		if r := run(t, execbox.ExecRequest{Command: []string{"true"}}); !r.Success() {
			t.Errorf("the sandbox after an OOM kill: %s", r.String())
		}
	})

	t.Run("fill-tmp", func(t *testing.T) {
		res := refused(t, "head -c 16777216 /dev/zero > /tmp/fill")
		if !strings.Contains(res.Stderr.Text(), "No space left") {
			t.Errorf("filling /tmp: %s, stderr %q; want ENOSPC", res.String(), res.Stderr.Text())
		}
		run(t, execbox.ExecRequest{Shell: "rm -f /tmp/fill"})
	})

	t.Run("endless-output", func(t *testing.T) {
		res := run(t, execbox.ExecRequest{Command: []string{"yes"}, OutputLimit: 1 << 20, Timeout: 2 * time.Second})
		if res.Reason != execbox.ReasonTimedOut || !res.Stdout.Truncated() || int64(len(res.Stdout.Data)) > 1<<20 {
			t.Errorf("yes: %s, kept %d of %d bytes", res.String(), len(res.Stdout.Data), res.Stdout.Total)
		}
	})

	t.Run("setsid-escape", func(t *testing.T) {
		// A daemon that leaves the session, the process tree and the
		// marker environment behind: the command's cgroup still holds it.
		res := run(t, execbox.ExecRequest{Shell: "setsid sh -c 'exec env -i sleep 300' </dev/null >/dev/null 2>&1 & exec sleep 300", Timeout: time.Second})
		if res.Reason != execbox.ReasonTimedOut {
			t.Errorf("%s, want timed out", res.String())
		}
		r := run(t, execbox.ExecRequest{Shell: "ps -eo comm | grep -c '^sleep$' || true"})
		if n := strings.TrimSpace(r.Stdout.Text()); n != "0" {
			t.Errorf("%s sleep processes survive the timeout", n)
		}
	})

	// Root inside is not the agent: it cannot signal, stop or trace the
	// init (PID 1) or the agent, nor open their /proc entries, and the
	// sandbox keeps working after it tried. kill -9 -1 comes last: it
	// kills whatever the command may signal.
	t.Run("root-vs-agent", func(t *testing.T) {
		testutil.Require(t, testutil.Command("python3"))
		agent := checkAgentIdentity(t, sb.(*sandbox.Sandbox))
		root := &execbox.User{UID: 0, GID: 0}
		ptrace := "python3 -c \"import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(0 if l.ptrace(16, %s, 0, 0) == 0 else 1)\""
		var scripts []string
		for _, pid := range []string{"1", agent} {
			scripts = append(scripts, "kill -0 "+pid, "kill -9 "+pid, "kill -STOP "+pid, "kill -TERM "+pid,
				"ls /proc/"+pid+"/fd", "ls -l /proc/"+pid+"/fd/0", "cat /proc/"+pid+"/environ", fmt.Sprintf(ptrace, pid))
		}
		for _, script := range scripts {
			res := run(t, execbox.ExecRequest{Shell: script, User: root})
			if res.Success() {
				t.Errorf("as root inside, %q succeeded: %s", script, res.Stdout.Text())
			}
		}
		run(t, execbox.ExecRequest{Shell: "kill -9 -1; kill -STOP -1", User: root})
		if r := run(t, execbox.ExecRequest{Command: []string{"true"}}); !r.Success() {
			t.Errorf("the sandbox after root inside tried to kill the agent: %s", r.String())
		}
	})

	// Afterwards the host is as it was.
	for _, s := range closed {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkGone(t, s)
	}
	if after := mountLines(t); len(after) != len(mountsBefore) {
		t.Errorf("host mounts changed: %d before, %d after", len(mountsBefore), len(after))
	}
	if b, err := exec.Command("ps", "-o", "args=", "--ppid", strconv.Itoa(os.Getpid())).Output(); err == nil && strings.Contains(string(b), "execbox-sandbox") {
		t.Errorf("sandbox processes left on the host:\n%s", b)
	}
}

func writeFile(t *testing.T, p, data string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

// mountLines returns the host's mount table.
func mountLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Temporary workspaces are host mounts (a size-capped tmpfs) by
		// design; other tests' sandboxes make and remove theirs meanwhile.
		if f := strings.Fields(sc.Text()); len(f) > 4 && strings.Contains(f[4], "/execbox-") && strings.HasSuffix(f[4], "/ws") {
			continue
		}
		out = append(out, sc.Text())
	}
	return out
}

// checkAgentIdentity checks, from the host, that the init (PID 1 inside)
// and its only child, the agent, run as the inside uid and gid AgentID
// and are not dumpable, and returns the agent's PID inside.
func checkAgentIdentity(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	initPID := sandbox.InitPID(sb)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", initPID, initPID))
	if err != nil {
		t.Fatal(err)
	}
	children := strings.Fields(string(b))
	if len(children) != 1 {
		t.Fatalf("the init has children %v, want the agent alone", children)
	}
	agentPID, _ := strconv.Atoi(children[0])
	m, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", initPID))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(m)) // "0 base 65536"
	base, _ := strconv.Atoi(f[1])
	host := strconv.Itoa(base + sandbox.AgentID)
	agentInside := ""
	for _, p := range []struct {
		name   string
		pid    int
		inside string
	}{{"init", initPID, "1"}, {"agent", agentPID, ""}} {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(st), "\n") {
			k, v, _ := strings.Cut(line, ":")
			fields := strings.Fields(v)
			switch k {
			case "Uid", "Gid":
				for _, id := range fields {
					if id != host {
						t.Errorf("%s: %s %v, want every id %s (inside %d)", p.name, k, fields, host, sandbox.AgentID)
						break
					}
				}
			case "NSpid":
				if p.inside == "" {
					agentInside = fields[len(fields)-1]
				} else if fields[len(fields)-1] != p.inside {
					t.Errorf("%s: NSpid %v, want %s inside", p.name, fields, p.inside)
				}
			}
		}
		// Not dumpable: /proc/PID entries belong to root, not its uid.
		var fi syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/environ", p.pid), &fi); err != nil {
			t.Fatal(err)
		}
		if strconv.Itoa(int(fi.Uid)) == host {
			t.Errorf("%s is dumpable: its /proc entries belong to its uid %d", p.name, fi.Uid)
		}
	}
	if agentInside == "" {
		t.Fatalf("no NSpid for the agent (host PID %d)", agentPID)
	}
	return agentInside
}

// TestIsolationInheritedDescriptor: a descriptor the process that
// creates a sandbox holds without close-on-exec (here the host's "/",
// at 100) must reach neither the agent's commands nor anything else
// inside: through /proc/self/fd/100 a command would list and write the
// host's root (the class of runc's CVE-2024-21626). Go's os/exec passes
// such a descriptor on to the init; every hop must stop it.
func TestIsolationInheritedDescriptor(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	const fd = 100
	d, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Dup3(d, fd, 0)
	unix.Close(d)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	unix.Close(fd) // the sandbox's processes are started
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	probe := fmt.Sprintf("p=/proc/self/fd/%d; if [ -e $p ]; then echo leaked: $(readlink $p); ls $p/ | head -3; fi", fd)
	for _, user := range []*execbox.User{nil, insideRoot(rt)} {
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: probe, User: user, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if out := res.Stdout.Text(); out != "" || !res.Success() {
			t.Errorf("user %v: descriptor %d reached the command (%s):\n%s", user, fd, res.String(), out)
		}
	}
}

// TestIsolationCgroups is a command run as uid 0 inside trying every way
// out of its cgroup and its limits. It stands alone (not in TestIsolation)
// so that it runs on every host kind of the VM matrix.
func TestIsolationCgroups(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	requireCgroupLimits(t, rt)
	sb, err := rt.Create(t.Context(), execbox.Spec{Limits: execbox.Limits{Memory: 64 << 20, PIDs: 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
		checkGone(t, sb)
	}()
	// As uid 0 inside, a command tries to leave its cgroup, move
	// others, change limits, turn off controllers, remove its cgroup
	// and mount a cgroupfs of its own: all refused, on v1 (one
	// directory per controller below /sys/fs/cgroup) and v2 alike.
	asRoot := func(t *testing.T, script string) {
		t.Helper()
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"sh", "-c", script}, User: insideRoot(rt), Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Success() {
			t.Errorf("as uid 0: %q succeeded (stdout %q), want it refused", script, res.Stdout.Text())
		}
	}
	// own prints the command's own cgroup directory of a controller
	// (or of v2), as seen in its cgroup namespace.
	const own = `own() { if [ -e /sys/fs/cgroup/cgroup.controllers ]; then echo /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); else echo /sys/fs/cgroup/$1$(grep ":$1:" /proc/self/cgroup | cut -d: -f3); fi; }; `
	const dirs = `for d in /sys/fs/cgroup /sys/fs/cgroup/pids /sys/fs/cgroup/memory; do [ -e $d/cgroup.procs ] && `
	for _, script := range []string{
		dirs + `echo $$ > $d/agent/cgroup.procs && exit 0; done; exit 1`,
		dirs + `echo $$ > $d/cgroup.procs && exit 0; done; exit 1`,
		dirs + `echo $$ > $d/cmds/cgroup.procs && exit 0; done; exit 1`,
		own + `echo $$ > $(own pids)/../cgroup.procs`,
		own + `sleep 30 & p=$!; mkdir $(own pids)/../x; echo $p > $(own pids)/../x/cgroup.procs; s=$?; kill $p; exit $s`,
		own + `echo max > $(own pids)/../pids.max`,
		own + `echo max > $(own pids)/pids.max`,
		own + `echo max > $(own memory)/../memory.max || echo -1 > $(own memory)/../memory.limit_in_bytes`,
		`echo max > /sys/fs/cgroup/agent/pids.max || echo max > /sys/fs/cgroup/pids/agent/pids.max`,
		own + `echo -pids > $(own pids)/../cgroup.subtree_control`,
		own + `echo -memory > /sys/fs/cgroup/cgroup.subtree_control`,
		own + `mkdir $(own pids)/x`,
		own + `rmdir $(own pids)`,
		`mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg`,
		// Commands see the cgroup read-only, and cannot reach the
		// agent's writable handle on it.
		`grep -E ' /sys/fs/cgroup[^ ]* rw' /proc/self/mountinfo`,
		`for f in /proc/[0-9]*/fd/*; do [ -d $f/cmds ] && echo $$ > $f/cmds/cgroup.procs && exit 0; done 2>/dev/null; exit 1`,
		`mkdir -p /tmp/cg && mount -t cgroup -o pids none /tmp/cg`,
	} {
		asRoot(t, script)
	}
	// The limits still hold for uid 0: of 40 background sleeps, no
	// more than the sandbox's 16 processes start. (kill 0 ends them
	// and the shell with them.)
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "( i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); echo $i > /tmp/n; done ) 2>/dev/null; cat /tmp/n; rm /tmp/n; kill 0", User: &execbox.User{UID: 0, GID: 0}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(res.Stdout.Text()))
	if err != nil || n < 1 || n >= 16 {
		t.Errorf("background sleeps started as uid 0 in a sandbox limited to 16 processes: %q (%s), want 1 to 15", res.Stdout.Text(), res.String())
	}
}

// refusedForks counts the forks the pids controller refused in the cgroup
// dir and below it (the "max" lines of pids.events).
func refusedForks(t *testing.T, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // a command's cgroup removed as we walk
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "pids.events"))
		if err != nil {
			return nil
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "max "); ok {
				m, _ := strconv.Atoi(v)
				n += m
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countTasks counts the threads in the cgroup dir and below it: the lines
// of "tasks" (v1) or "cgroup.threads" (v2) of every cgroup of the subtree.
func countTasks(t *testing.T, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // a command's cgroup removed as we walk
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		for _, name := range []string{"tasks", "cgroup.threads"} {
			b, err := os.ReadFile(filepath.Join(path, name))
			if err == nil {
				n += strings.Count(string(b), "\n")
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("count the tasks of %s: %v", dir, err)
	}
	return n
}
