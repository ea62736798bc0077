package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// termOutput collects the terminal output of p until it contains want.
func termOutput(t *testing.T, p *Process, want string) string {
	t.Helper()
	var out strings.Builder
	for ev, err := range p.Events(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		out.Write(ev.Data)
		if strings.Contains(out.String(), want) {
			return out.String()
		}
	}
	t.Fatalf("terminal output %q lacks %q", out.String(), want)
	return ""
}

func TestTerminalStdio(t *testing.T) {
	opts := sh(`test -t 0 && test -t 1 && test -t 2 && echo tty; stty size; read -r line; echo "got $line"`)
	opts.Terminal = &Terminal{Rows: 12, Cols: 34, Stdio: true}
	opts.Interactive = true
	opts.EventWindow = 1 << 20
	p := start(t, opts)
	termOutput(t, p, "12 34")
	if _, err := p.WriteStdin(t.Context(), []byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	out := termOutput(t, p, "got typed")
	if !strings.Contains(out, "tty") {
		t.Errorf("output %q: the standard streams are not the terminal", out)
	}
	res, _ := p.Wait(t.Context())
	if !res.Success() {
		t.Errorf("result %s", res.String())
	}
	if err := p.Resize(10, 10); err == nil {
		t.Errorf("Resize after the end: no error")
	}
}

func TestTerminalResize(t *testing.T) {
	opts := sh(`while read -r line; do stty size; done`)
	opts.Terminal = &Terminal{Stdio: true}
	opts.Interactive = true
	opts.EventWindow = 1 << 20
	p := start(t, opts)
	p.WriteStdin(t.Context(), []byte("\n"))
	termOutput(t, p, "24 80") // the default size
	if err := p.Resize(50, 132); err != nil {
		t.Fatal(err)
	}
	p.WriteStdin(t.Context(), []byte("\n"))
	termOutput(t, p, "50 132")
	if err := p.Resize(0, 1); err == nil {
		t.Error("Resize(0, 1): no error")
	}
}

func TestTerminalControlOnly(t *testing.T) {
	// Without Stdio the terminal is only the controlling terminal, on fd
	// 3; the standard streams stay pipes. The process may close fd 3
	// without hanging itself up.
	opts := sh(`test -t 3 && echo fd3; test -t 1 || echo pipe; exec 3>&-; echo on-tty > /dev/tty; sleep 100`)
	opts.Terminal = &Terminal{}
	p := start(t, opts)
	// Interrupt once sleep runs: a SIGINT while the shell forks it can
	// be caught by the child before it resets the shell's handler
	// (dash -c catches SIGINT), and sleep then runs on, a shell's own
	// race that Ctrl-C at a terminal has too.
	testutil.Eventually(t, 10*time.Second, func() bool {
		p.mu.Lock()
		out := strings.Contains(string(p.stdout.buf), "pipe") && p.stderr.total > 0
		p.mu.Unlock()
		p.treeMu.Lock()
		root := p.tree.root
		p.treeMu.Unlock()
		return out && childNamed(root, "sleep")
	})
	if err := p.Interrupt(); err != nil {
		t.Fatal(err)
	}
	res, _ := p.Wait(t.Context())
	if res.Signal != execbox.SIGINT && res.ExitCode != 130 {
		t.Errorf("after Interrupt: %s, want an end by SIGINT", res.String())
	}
	if got := string(res.Stdout.Data); got != "fd3\npipe\n" {
		t.Errorf("stdout %q", got)
	}
	if got := string(res.Stderr.Data); !strings.Contains(got, "on-tty") {
		t.Errorf("what was written to the terminal: %q, want it with stderr", got)
	}
}

func TestKillForeground(t *testing.T) {
	// A shell with job control runs its job in a process group of its
	// own, the terminal's foreground group: KillForeground kills it and
	// leaves the shell.
	testutil.Require(t, testutil.Command("bash"))
	opts := Options{Path: "/bin/bash", Args: []string{"bash", "--norc", "--noprofile", "-i", "-c", `exec 3>&-; set -m; sh -c 'trap "" INT; sleep 100'; echo "job $?"`}}
	opts.Terminal = &Terminal{}
	p := start(t, opts)
	var fg int
	testutil.Eventually(t, 10*time.Second, func() bool {
		p.treeMu.Lock()
		fg = p.foreground()
		p.treeMu.Unlock()
		return fg != p.PID()
	})
	killed, err := p.KillForeground()
	if err != nil || !killed {
		t.Fatalf("KillForeground: %v, %v", killed, err)
	}
	res, _ := p.Wait(t.Context())
	if !strings.Contains(string(res.Stdout.Data), "job 137") {
		t.Errorf("stdout %q, want the job killed by SIGKILL and the shell going on", res.Stdout.Data)
	}
}

// fifoCapture makes a FIFO and captures it.
func fifoCapture(t *testing.T, limit int64) (string, *Capture) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCapture(f, limit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return path, c
}

func runSh(t *testing.T, script string, args ...string) {
	t.Helper()
	if out, err := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", script, err, out)
	}
}

func TestCaptureRounds(t *testing.T) {
	path, c := fifoCapture(t, 1<<20)
	// A FIFO without a writer is not at its end: rounds go on.
	runSh(t, `echo one > "$1"`, path)
	out, idle := c.Finish()
	if string(out.Data) != "one\n" || !idle {
		t.Fatalf("round 1: %q idle %v", out.Data, idle)
	}
	c.Restart(1 << 20)
	runSh(t, `echo two > "$1"; echo three > "$1"`, path)
	out, idle = c.Finish()
	if string(out.Data) != "two\nthree\n" || !idle {
		t.Fatalf("round 2: %q idle %v", out.Data, idle)
	}
	// A background writer outlives its round: its later output is not
	// kept, Finish says the stream is held, and Release drains it until
	// it closes.
	c.Restart(1 << 20)
	runSh(t, `exec > "$1" 2>/dev/null; echo four; (sleep 0.3; echo late) &`, path)
	out, idle = c.Finish()
	if string(out.Data) != "four\n" || idle {
		t.Fatalf("round 3: %q idle %v", out.Data, idle)
	}
	os.Remove(path)
	c.Release()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the capture did not stop after its last writer closed")
	}
}

func TestCaptureLimit(t *testing.T) {
	path, c := fifoCapture(t, 1000)
	runSh(t, `head -c 5000000 /dev/zero > "$1"; printf end > "$1"`, path)
	out, _ := c.Finish()
	if out.Total != 5000003 || !out.Truncated() || len(out.Data) != 1000 || !strings.HasSuffix(string(out.Data), "end") {
		t.Errorf("total %d kept %d truncated %v tail %q", out.Total, len(out.Data), out.Truncated(), out.Data[len(out.Data)-3:])
	}
	os.Remove(path)
	c.Release()
	<-c.Done()
}

// childNamed reports whether a child of pid runs the program name.
func childNamed(pid int, name string) bool {
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return false
	}
	for _, c := range strings.Fields(string(children)) {
		if comm, err := os.ReadFile("/proc/" + c + "/comm"); err == nil && strings.TrimSpace(string(comm)) == name {
			return true
		}
	}
	return false
}
