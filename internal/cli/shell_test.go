package cli

import (
	"bytes"
	"context"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

func TestShellPipedInput(t *testing.T) {
	testutil.Require(t, testutil.Command("bash"))
	for _, tt := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		out   string
	}{
		{"program exit code", []string{"--", "sh", "-c", "echo hi; exit 3"}, "", 3, "hi"},
		{"input typed into the terminal", []string{"--", "sh"}, "echo $((6*7))\nexit 4\n", 4, "42"},
		{"end of input ends the shell", []string{"--", "sh"}, "echo last\n", 0, "last"},
		{"signal", []string{"--", "sh", "-c", "kill -TERM $$"}, "", 128 + 15, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mainRun(t, nil, strings.NewReader(tt.stdin), append([]string{"shell", "--config=", "--temp-workspace"}, tt.args...)...)
			if o.code != tt.code {
				t.Errorf("exit code %d, want %d", o.code, tt.code)
			}
			if !strings.Contains(o.stdout, tt.out) {
				t.Errorf("stdout %q lacks %q", o.stdout, tt.out)
			}
		})
	}
}

func TestShellUsage(t *testing.T) {
	o := mainRun(t, nil, nil, "shell", "--config=", "--temp-workspace", "--", "execbox-no-such-program")
	if o.code != ExitNotFound || !strings.Contains(o.stderr, "execbox-no-such-program") {
		t.Errorf("missing program: code %d, stderr %q", o.code, o.stderr)
	}
	o = mainRun(t, nil, nil, "shell", "--config=", "--temp-workspace", "--workdir", "../..")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "--workdir") {
		t.Errorf("workdir outside: code %d, stderr %q", o.code, o.stderr)
	}
	o = mainRun(t, nil, nil, "help", "shell")
	if o.code != 0 || !strings.Contains(o.stdout, "raw mode") || !strings.Contains(o.stdout, "--runtime") {
		t.Errorf("help shell: code %d, stdout %q", o.code, o.stdout)
	}
}

// ptys is the dependency on pseudo-terminals (/dev/ptmx).
var ptys = testutil.NewDep("pty", func() error {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	return m.Close()
})

// openTestPTY returns a pseudo-terminal pair: the master (the test's
// side, as a terminal emulator) and the slave (execbox's stdin/stdout).
func openTestPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	testutil.Require(t, ptys)
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Through SyscallConn, not Fd, which would make the master blocking:
	// a reader of it then outlives its Close.
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	if cerr := rc.Control(func(fd uintptr) {
		if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
			n, err = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
		}
	}); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 111}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// screen is what a terminal emulator shows: safe for one writer and one
// reader.
type screen struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *screen) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *screen) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestShellTerminal(t *testing.T) {
	testutil.Require(t, testutil.Command("bash"))
	master, slave := openTestPTY(t)
	// What the program prints reaches execbox's stdout, the slave: the
	// test reads it on the master, as a terminal emulator would.
	var scr screen
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			scr.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(s string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() bool { return strings.Contains(scr.String(), s) }, "%q on the screen (screen: %q)", s, scr.String())
	}
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		done <- Main(context.Background(), []string{"shell", "--config=", "--temp-workspace", "--", "bash", "--norc", "--noprofile", "-i"}, slave, slave, &errb)
	}()
	// The size of execbox's terminal is the session's.
	master.Write([]byte("stty size; echo ma''rk\r"))
	waitFor("33 111")
	waitFor("mark")
	// execbox's terminal is raw while attached: Ctrl-C is a byte for the
	// program's terminal, which interrupts its foreground job.
	st, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil || st.Lflag&unix.ICANON != 0 || st.Lflag&unix.ECHO != 0 {
		t.Errorf("execbox's terminal is not in raw mode while attached: %+v %v", st, err)
	}
	// The job says it runs once it has the terminal (bash gives it
	// before the exec), so Ctrl-C reaches it and not bash, which would
	// drop the typed line after it.
	master.Write([]byte("sh -c 'echo sleep-''started; exec sleep 100'; echo not-''interrupted\r"))
	waitFor("sleep-started")
	master.Write([]byte("\x03echo after-$((1+1))\r"))
	waitFor("after-2")
	if strings.Contains(scr.String(), "not-interrupted") {
		t.Errorf("Ctrl-C did not interrupt: %q", scr.String())
	}
	// A window size change follows.
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	unix.Kill(os.Getpid(), unix.SIGWINCH)
	testutil.Eventually(t, 20*time.Second, func() bool {
		master.Write([]byte("stty size\r"))
		time.Sleep(50 * time.Millisecond)
		return strings.Contains(scr.String(), "40 120")
	}, "the new size in the session")
	master.Write([]byte("exit 7\r"))
	select {
	case code := <-done:
		if code != 7 {
			t.Errorf("exit code %d, want 7; stderr %q", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("execbox shell did not return after the shell exited")
	}
	if !term.IsTerminal(int(slave.Fd())) {
		t.Fatal("slave is not a terminal")
	}
	if st, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS); err != nil || st.Lflag&unix.ICANON == 0 {
		t.Errorf("execbox's terminal was not restored: %+v %v", st, err)
	}
}

// TestShellLeavesNoHistoryAndNoHostUser: the default shell wrote
// .bash_history into the workspace (the user's directory), and its
// prompt, from the host's /etc/bash.bashrc, showed the host's user
// name; help listed the server's flags too.
func TestShellLeavesNoHistoryAndNoHostUser(t *testing.T) {
	testutil.Require(t, testutil.Command("bash"))
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	o := mainRun(t, nil, strings.NewReader("echo one\necho two\nexit 5\n"), "shell", "--config=", "--runtime", "local", "--workspace", ws)
	if o.code != 5 || !strings.Contains(o.stdout, "two") {
		t.Fatalf("shell: code %d, stdout %q", o.code, o.stdout)
	}
	if !strings.Contains(o.stdout, "execbox:~") || strings.Contains(o.stdout, me.Username+"@") {
		t.Errorf("prompt in %q: want execbox:~, not the host user %s", o.stdout, me.Username)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("the shell left %v in the workspace", entries)
	}
	// What --env sets wins.
	o = mainRun(t, nil, strings.NewReader("echo \"[$PS1]\"\nexit\n"), "shell", "--config=", "--runtime", "local", "--temp-workspace", "--env", "PS1=mine> ")
	if !strings.Contains(o.stdout, "[mine> ]") {
		t.Errorf("--env PS1: stdout %q", o.stdout)
	}

	o = mainRun(t, nil, nil, "help", "shell")
	for _, flag := range []string{"--runtime", "--workspace", "--temp-workspace", "--env", "--memory"} {
		if !strings.Contains(o.stdout, "  "+flag+" ") && !strings.Contains(o.stdout, "  "+flag+"\n") {
			t.Errorf("help shell lacks %s", flag)
		}
	}
	for _, flag := range []string{"--keys-file", "--max-sandboxes", "--allowed-host", "--policy-url", "--state-dir"} {
		if strings.Contains(o.stdout, flag) {
			t.Errorf("help shell lists the server's %s", flag)
		}
	}
}
