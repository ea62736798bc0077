package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestIsolationEveryHost is what hostile code tries on every host kind,
// rootless included: reach the host's files and network, keep a
// capability, make a set-id file or a device node in a given workspace,
// find or read the agent, dump core. TestIsolation goes further where
// the runtime has root (users, uid ranges, idmapped workspaces).
func TestIsolationEveryHost(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	token := strconv.FormatInt(time.Now().UnixNano(), 36)
	// A secret of the user who runs execbox, outside the workspace.
	home, err := os.MkdirTemp("", "execbox-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	secret := filepath.Join(home, "secret-"+token)
	writeFile(t, secret, "secret-"+token, 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host-" + token))
			c.Close()
		}
	}()
	ws := filepath.Join(home, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	run := func(t *testing.T, user *execbox.User, script string) execbox.Result {
		t.Helper()
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"sh", "-c", script}, User: user, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, user := range []*execbox.User{nil, insideRoot(rt)} {
		t.Run(fmt.Sprintf("user=%v", user), func(t *testing.T) {
			// Nothing of the host outside the workspace.
			port := ln.Addr().(*net.TCPAddr).Port
			res := run(t, user, fmt.Sprintf(`cat %s %s/* 2>/dev/null; ls %s 2>/dev/null
python3 -c 'import socket; s=socket.create_connection(("127.0.0.1", %d), 2); print(s.recv(64).decode())' 2>/dev/null
true`, secret, home, home, port))
			if out := res.Stdout.Text() + res.Stderr.Text(); strings.Contains(out, token) {
				t.Errorf("the command reached the host's files or loopback:\n%s", out)
			}
			// No capability in any set, no_new_privs, seccomp, no core.
			res = run(t, user, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status")
			want := map[string]string{"NoNewPrivs": "1", "Seccomp": "2"}
			for _, line := range strings.Split(strings.TrimSpace(res.Stdout.Text()), "\n") {
				k, v, _ := strings.Cut(line, ":")
				if w, ok := want[k]; ok && strings.TrimSpace(v) != w || !ok && strings.TrimSpace(v) != "0000000000000000" {
					t.Errorf("%s", line)
				}
			}
			if res = run(t, user, "ulimit -H -c"); strings.TrimSpace(res.Stdout.Text()) != "0" {
				t.Errorf("hard RLIMIT_CORE %q, want 0", res.Stdout.Text())
			}
			// The agent and init are invisible, and their environment and
			// descriptors unreadable.
			res = run(t, user, "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); case $c in execbox-sandbox*) echo $p $c; cat $p/environ $p/fd/* 2>/dev/null | head -c 64;; esac; done")
			if out := strings.TrimSpace(res.Stdout.Text()); out != "" {
				t.Errorf("the command found the agent or init:\n%s", out)
			}
			// No set-id file, no device node in the workspace.
			res = run(t, user, "cp /bin/sh s; chmod 6755 s; mknod n c 1 3; mknod b b 8 0; ls -ln")
			for _, name := range []string{"s", "n", "b"} {
				fi, err := os.Lstat(filepath.Join(ws, name))
				if err != nil {
					continue
				}
				if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeDevice|os.ModeCharDevice) != 0 {
					t.Errorf("%s: mode %v on the host", name, fi.Mode())
				}
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
					t.Errorf("%s: uid %d on the host, want the workspace owner's %d", name, st.Uid, os.Geteuid())
				}
				os.Remove(filepath.Join(ws, name))
			}
		})
	}
}

// TestAgentOutlivesKillAll: a command that signals everything it can
// (kill -9 -1, kill -STOP -1) leaves the agent serving, wherever the
// agent has a uid of its own (root, or rootless with subordinate ids).
// With one uid mapped the agent shares the command's uid and dies: the
// sandbox then fails clearly and Close still leaves nothing behind.
func TestAgentOutlivesKillAll(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	for _, user := range []*execbox.User{nil, insideRoot(rt)} {
		_, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "kill -STOP -1; kill -9 -1", User: user, Timeout: 20 * time.Second})
		res, err2 := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "echo alive", Timeout: 20 * time.Second})
		if !rt.Capabilities().User {
			// One uid: the agent is the command's to kill.
			if err2 == nil && res.Stdout.Text() == "alive\n" {
				t.Logf("one uid mapped, and the agent survived kill -9 -1 (%v)", err)
			}
			return
		}
		if err != nil || err2 != nil || res.Stdout.Text() != "alive\n" {
			t.Fatalf("user %v: after kill -9 -1: %v; then %v, %s", user, err, err2, res.String())
		}
	}
}

// TestAgentResumesAfterStop: a command that stops every process it can
// signal (kill -STOP -1, and each job-control stop), which with one uid
// mapped includes the agent, leaves the agent serving: the init, which
// no process inside can signal, resumes it. Before, the next call hung.
func TestAgentResumesAfterStop(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	for _, script := range []string{"kill -STOP -1", "kill -TSTP -1", "kill -TTIN -1", "kill -TTOU -1",
		"i=0; while [ $i -lt 2000 ]; do kill -STOP -1; i=$((i+1)); done"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: script, Timeout: 10 * time.Second})
		if err == nil {
			res, err = sb.Exec(ctx, execbox.ExecRequest{Shell: "echo alive", Timeout: 10 * time.Second})
		}
		cancel()
		if err != nil || res.Stdout.Text() != "alive\n" {
			t.Fatalf("after %s: %v, %s", script, err, res.String())
		}
	}
}
