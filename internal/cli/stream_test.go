package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/streams"
)

// streamSize is the bytes of each stream TestExecEveryByte writes: 32 MiB
// in the test suite (CI), any size by EXECBOX_TEST_STREAM_SIZE (1 GiB,
// 1073741824, measured by hand).
func streamSize(t *testing.T) int64 {
	v := os.Getenv("EXECBOX_TEST_STREAM_SIZE")
	if v == "" {
		return 32 << 20
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("EXECBOX_TEST_STREAM_SIZE=%q: want a positive number of bytes", v)
	}
	return n
}

// slowChecker checks what execbox writes against a known stream, taking
// a pause now and then: a reader slower than the command, which must
// then wait for it rather than lose output.
type slowChecker struct {
	mu     sync.Mutex
	c      *streams.Checker
	writes int
}

func (w *slowChecker) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes++; w.writes%32 == 0 {
		time.Sleep(time.Millisecond)
	}
	return w.c.Write(p)
}

// TestExecEveryByte: execbox exec writes every byte of a known
// pseudo-random stream on stdout and another on stderr, in order, with a
// slow reader and an output limit far below the streams' size, on every
// runtime. (On the sandbox runtime it used to show a fraction of them
// and exit 0.)
func TestExecEveryByte(t *testing.T) {
	size := streamSize(t)
	testutil.Require(t, testutil.Command("go"))
	gen := testutil.StreamGen(t)
	run := func(t *testing.T, args ...string) {
		out := &slowChecker{c: streams.NewChecker(31)}
		errw := &slowChecker{c: streams.NewChecker(32)}
		debug.FreeOSMemory()
		testutil.ResetPeakRSS(t, os.Getpid())
		start := time.Now()
		args = append(append([]string{"exec", "--output-limit", "1MiB", "--timeout", "30m"}, args...),
			"--", "./streamgen", "31", strconv.FormatInt(size, 10), "32", strconv.FormatInt(size, 10))
		code := Main(t.Context(), args, nil, out, errw)
		t.Logf("%d MiB on each stream in %s; peak RSS of the test process %d MiB", size>>20, time.Since(start), testutil.PeakRSS(t, os.Getpid())>>20)
		if code != 0 {
			t.Errorf("execbox %q: exit %d", args, code)
		}
		if err := out.c.Check(size); err != nil {
			t.Errorf("stdout: %v", err)
		}
		if err := errw.c.Check(size); err != nil {
			t.Errorf("stderr: %v", err)
		}
	}
	// workspace is a directory with the generator in it.
	workspace := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(gen)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "streamgen"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	config := func(t *testing.T, yaml string) string {
		f := filepath.Join(t.TempDir(), "execbox.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Run("local", func(t *testing.T) {
		run(t, "--config=", "--runtime", "local", "--workspace", workspace(t))
	})
	t.Run("sandbox", func(t *testing.T) {
		testutil.Require(t, testutil.Root, testutil.StaticAgent)
		agent, err := staticAgent()
		if err != nil {
			t.Fatal(err)
		}
		cfg := config(t, "runtimes:\n  sandbox:\n    agent_binary: "+agent+"\n")
		run(t, "--config", cfg, "--runtime", "sandbox", "--workspace", workspace(t))
	})
	t.Run("docker", func(t *testing.T) {
		testutil.Require(t, testutil.Root, testutil.Docker, testutil.StaticAgent, testutil.Command("docker"))
		cfg := config(t, "runtimes:\n  docker:\n"+dockerSettings(t))
		run(t, "--config", cfg, "--runtime", "docker", "--workspace", workspace(t))
	})
	t.Run("remote", func(t *testing.T) {
		// execbox serve over the local runtime, whose sandboxes see the
		// host: the generator runs from the workspace given by path.
		ws := workspace(t)
		const tokenVar = "EXECBOX_TEST_STREAM_TOKEN"
		t.Setenv(tokenVar, "tok")
		url, _ := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar, "--runtime", "local", "--allow-host-paths")
		cfg := config(t, fmt.Sprintf("runtimes:\n  remote:\n    url: %s\n    token: tok\n", url))
		run(t, "--config", cfg, "--runtime", "remote", "--workspace", ws)
	})
}

// lineCounter counts the lines of seq's output through a terminal
// (\r\n), checking that they follow one another, slowly.
type lineCounter struct {
	slowChecker
	partial []byte
	next    int
	bad     string
}

func (w *lineCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.writes++; w.writes%4 == 0 {
		time.Sleep(time.Millisecond)
	}
	w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSuffix(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		if w.bad == "" && line != strconv.Itoa(w.next+1) {
			w.bad = fmt.Sprintf("line %d is %q, want %d", w.next+1, line, w.next+1)
		}
		w.next++
	}
}

// TestShellEveryByte: execbox shell shows every line a program prints on
// its terminal, far past the events window, to a slow reader.
func TestShellEveryByte(t *testing.T) {
	const lines = 1500000 // about 12 MiB through the terminal
	w := &lineCounter{}
	var errb bytes.Buffer
	code := Main(t.Context(), []string{"shell", "--config=", "--temp-workspace", "--", "seq", strconv.Itoa(lines)}, nil, w, &errb)
	if code != 0 || w.next != lines || w.bad != "" {
		t.Errorf("execbox shell -- seq %d: exit %d, %d lines, %s; stderr %q", lines, code, w.next, w.bad, errb.String())
	}
}

// TestServeRelayMemory: execbox serve relaying the events of 50 started
// processes (400 MiB of output, from the sandbox runtime's agent) to
// readers that keep up holds little: flow-controlled streams hold one
// event per stream in flight, whatever the output's size. (It peaked at
// 1.28 GiB relaying the same through the window.) The bound checked is
// generous for a loaded machine; the log says the peak measured.
func TestServeRelayMemory(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.StaticAgent, testutil.Command("go"))
	agent, err := staticAgent()
	if err != nil {
		t.Fatal(err)
	}
	gen := testutil.StreamGen(t)
	cfgFile := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(cfgFile, []byte("runtimes:\n  sandbox:\n    agent_binary: "+agent+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tokenVar = "EXECBOX_TEST_RELAY_TOKEN"
	cmd, url := startServeMeasured(t, []string{tokenVar + "=tok"}, "--config", cfgFile, "--listen", "127.0.0.1:0", "--token-env", tokenVar, "--runtime", "sandbox")
	c, err := client.New(url, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	b, err := os.ReadFile(gen)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Files().WriteFile(t.Context(), "streamgen", b, execbox.WriteOptions{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	const n, size = 50, 8 << 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			seed := uint64(500 + i)
			p, err := sb.Start(t.Context(), execbox.ExecRequest{
				Command:     []string{"./streamgen", strconv.FormatUint(seed, 10), strconv.Itoa(size)},
				OutputLimit: 64 << 10, // the agent's memory is another matter
				EventWindow: 256 << 10,
				FlowControl: true,
				Timeout:     10 * time.Minute,
			})
			if err != nil {
				t.Errorf("start %d: %v", i, err)
				return
			}
			ck := streams.NewChecker(seed)
			for ev, err := range p.Events(t.Context(), 1) {
				if err != nil {
					t.Errorf("events %d: %v", i, err)
					return
				}
				if ev.Kind == execbox.EventDropped {
					t.Errorf("events %d: dropped %d bytes", i, ev.Dropped)
				}
				ck.Write(ev.Data)
			}
			if err := ck.Check(size); err != nil {
				t.Errorf("events %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	peak := testutil.PeakRSS(t, cmd.Process.Pid)
	t.Logf("execbox serve relayed %d MiB of events from %d processes with a peak RSS of %d MiB", n*size>>20, n, peak>>20)
	if peak > 256<<20 {
		t.Errorf("peak RSS of execbox serve %d MiB, want under 256 MiB", peak>>20)
	}
}

// TestRunEveryByte: execbox run streams every line a program prints, far
// past --output-limit, to a slow reader. (It printed the Result's head
// and tail when the program ended.)
func TestRunEveryByte(t *testing.T) {
	const lines = 1000000 // 6.9 MB
	w := &lineCounter{}
	var errb bytes.Buffer
	code := Main(t.Context(), []string{"run", "--config=", "--output-limit", "64KiB", "--lang", "sh", "-c", "seq " + strconv.Itoa(lines)}, nil, w, &errb)
	if code != 0 || w.next != lines || w.bad != "" {
		t.Errorf("execbox run -c 'seq %d': exit %d, %d lines, %s; stderr %q", lines, code, w.next, w.bad, errb.String())
	}
}
