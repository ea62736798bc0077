package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"

	"golang.org/x/sys/unix"
)

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServe runs "execbox serve args..." until the returned stop is
// called, and returns the URL it serves on.
func startServe(t *testing.T, args ...string) (url string, stop func() int) {
	t.Helper()
	url, _, stop = startServeOut(t, args...)
	return url, stop
}

// startServeOut is startServe also returning what serve printed so far.
func startServeOut(t *testing.T, args ...string) (url string, stderrText func() string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"serve", "--config="}, args...), nil, &bytes.Buffer{}, &stderr)
	}()
	re := regexp.MustCompile(`on (http://\S+|unix:\S+),`)
	testutil.Eventually(t, 10*time.Second, func() bool {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			url = strings.Replace(m[1], "unix:", "unix://", 1)
		}
		return m != nil
	}, "execbox serve to say where it listens")
	var once sync.Once
	code := -1
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(15 * time.Second):
				t.Errorf("execbox serve did not stop; stderr: %s", stderr.String())
			}
			t.Logf("execbox serve stderr:\n%s", stderr.String())
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return url, stderr.String, stop
}

func TestServe(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_SERVE_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, stop := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar)
	ctx := t.Context()
	c, err := client.New(url, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "echo served"})
	if err != nil || string(res.Stdout.Data) != "served\n" {
		t.Fatalf("Exec = %q, %v", res.Stdout.Data, err)
	}
	res, err = sb.Exec(ctx, execbox.ExecRequest{Command: []string{"env"}, EnvPolicy: execbox.EnvInherit})
	if err != nil || strings.Contains(string(res.Stdout.Data), tokenVar) {
		t.Errorf("the token's variable reaches commands under EnvInherit (%v)", err)
	}
	// A started process, and one the command detached from its group:
	// stopping the server must end both.
	pids := t.TempDir()
	if _, err := sb.Start(ctx, execbox.ExecRequest{Shell: "echo $$ > " + pids + "/started; exec sleep 300"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, execbox.ExecRequest{Shell: "setsid sh -c 'echo $$ > " + pids + "/detached; exec sleep 300' &"}); err != nil {
		t.Fatal(err)
	}
	started := testutil.WaitPIDFile(t, filepath.Join(pids, "started"))
	detached := testutil.WaitPIDFile(t, filepath.Join(pids, "detached"))
	noToken, _ := client.New(url)
	if _, err := noToken.Sandboxes(ctx); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("without the token: %v, want ErrPermission", err)
	}
	// SIGTERM (here: the context) closes every sandbox, then exits 0.
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after its context ended, want 0", code)
	}
	if _, err := os.Stat(sb.Workspace()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace %s after serve stopped: %v, want removed", sb.Workspace(), err)
	}
	// Close returns once everything is gone: no polling needed.
	for name, pid := range map[string]int{"started": started, "detached": detached} {
		if testutil.Alive(pid) {
			t.Errorf("the %s process %d survived serve stopping", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestServeUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "execbox.sock")
	url, stop := startServe(t, "--listen", "unix:"+sock)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v, %v; want mode 0600", sock, fi.Mode(), err)
	}
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Version(t.Context()); err != nil || v.Role != "server" {
		t.Errorf("Version = %+v, %v", v, err)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after serve stopped: %v, want removed", err)
	}
}

func TestServeUsage(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"argument", []string{"serve", "--config=", "extra"}, "serve: takes no arguments"},
		{"negative maximum", []string{"serve", "--config=", "--max-sandboxes", "-1"}, "--max-sandboxes: must not be negative"},
		{"unknown runtime", []string{"serve", "--config=", "--runtime", "nope"}, `unknown runtime "nope"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := mainRun(t, nil, nil, tt.args...)
			if o.code != ExitUsage || !strings.Contains(o.stderr, tt.want) {
				t.Errorf("code %d, stderr %q; want %d and %q", o.code, o.stderr, ExitUsage, tt.want)
			}
		})
	}
}

// mainEnv makes a re-executed test binary run Main with its arguments,
// so a test can watch a real execbox process from outside (its
// /proc/PID/environ).
const mainEnv = "EXECBOX_TEST_AS_MAIN"

func runMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// startServeProcess runs "execbox serve args..." as its own process with
// env added to its environment, and returns it and the URL it serves on.
// The process is stopped with SIGTERM at the end of the test.
func startServeProcess(t *testing.T, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	return startServeFrom(t, "", env, args...)
}

// startServeMeasured is startServeProcess for tests that measure the
// server's memory: it runs a real execbox binary (the static one the
// tests build, without -race), not the test binary, whose race detector
// multiplies the memory it uses several times.
func startServeMeasured(t *testing.T, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	bin, err := staticAgent()
	if err != nil {
		t.Fatal(err)
	}
	return startServeFrom(t, bin, env, args...)
}

// startServeFrom runs "execbox serve args..." from bin, or from this
// test binary when bin is "".
func startServeFrom(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	if bin == "" {
		bin, env = os.Args[0], append([]string{mainEnv + "=1"}, env...)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--config="}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		t.Logf("execbox serve stderr:\n%s", stderr.String())
	})
	re := regexp.MustCompile(`on (http://\S+|unix:\S+),`)
	var url string
	testutil.Eventually(t, 20*time.Second, func() bool {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, "execbox serve to say where it listens")
	return cmd, url
}

// TestServeTokenNotInEnviron: the token given in a variable is not
// readable from the server's /proc/PID/environ (as every process of the
// same user could), nor reaches commands.
func TestServeTokenNotInEnviron(t *testing.T) {
	const tokenVar, token = "EXECBOX_TEST_ENVIRON_TOKEN", "tok-5b1f0c9a-in-environ"
	cmd, url := startServeProcess(t, []string{tokenVar + "=" + token}, "--listen", "127.0.0.1:0", "--token-env", tokenVar)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(environ, []byte(mainEnv+"=1")) {
		t.Fatalf("/proc/%d/environ is not the server's environment: %q", cmd.Process.Pid, environ)
	}
	if bytes.Contains(environ, []byte(token)) {
		t.Errorf("the token is readable in /proc/%d/environ", cmd.Process.Pid)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes(t.Context()); err != nil {
		t.Errorf("with the token: %v", err)
	}
}

// generatedToken finds the token execbox serve printed.
func generatedToken(t *testing.T, stderr string) string {
	t.Helper()
	m := regexp.MustCompile(`Authorization: Bearer ([0-9a-f]{64})\n`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("execbox serve printed no generated token: %q", stderr)
	}
	return m[1]
}

// TestServeTokenRequiredOnLoopback: without a configured token, serve on
// loopback generates one, prints it, and refuses requests without it.
func TestServeTokenRequiredOnLoopback(t *testing.T) {
	url, stderr, _ := startServeOut(t, "--listen", "127.0.0.1:0", "--token-env", "EXECBOX_TEST_UNSET_TOKEN")
	resp, err := http.Get(url + "/v1/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/sandboxes without a token: %s, want 401", resp.Status)
	}
	noToken, _ := client.New(url)
	if _, err := noToken.Create(t.Context(), execbox.Spec{}, client.CreateOptions{}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("Create without the token: %v, want ErrPermission", err)
	}
	c, _ := client.New(url, client.WithToken(generatedToken(t, stderr())))
	if _, err := c.Sandboxes(t.Context()); err != nil {
		t.Errorf("with the printed token: %v", err)
	}
}

// rawRequest sends one request to the server with a token and returns the
// response's status.
func rawRequest(t *testing.T, method, url, token, body string, header ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestServeRefusesBrowserAttacks: a request naming another host (DNS
// rebinding: a web page whose name resolves to 127.0.0.1) and a POST a
// cross-site form or simple fetch can send are refused, token or not.
func TestServeRefusesBrowserAttacks(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_SERVE_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, stop := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar, "--allowed-host", "execbox.internal")
	defer stop()
	for _, tt := range []struct {
		name   string
		method string
		body   string
		header []string
		want   int
	}{
		{"rebound host", "GET", "", []string{"Host", "attacker.example:7070"}, http.StatusForbidden},
		{"rebound host POST", "POST", "{}", []string{"Host", "attacker.example", "Content-Type", "application/json"}, http.StatusForbidden},
		{"allowed host", "GET", "", []string{"Host", "execbox.internal:7070"}, http.StatusOK},
		{"loopback name", "GET", "", []string{"Host", "localhost"}, http.StatusOK},
		{"text/plain POST", "POST", `{}`, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"form POST", "POST", "a=b", []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"multipart form POST", "POST", "", []string{"Content-Type", "multipart/form-data; boundary=x"}, http.StatusUnsupportedMediaType},
		{"POST without a type", "POST", "", nil, http.StatusUnsupportedMediaType},
		{"JSON POST", "POST", `{}`, []string{"Content-Type", "application/json"}, http.StatusCreated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rawRequest(t, tt.method, url+"/v1/sandboxes", "tok", tt.body, tt.header...); got != tt.want {
				t.Errorf("%s /v1/sandboxes %v: status %d, want %d", tt.method, tt.header, got, tt.want)
			}
		})
	}
}

// TestServeMaximums: requests over the server's maximums are refused,
// sizes as invalid_argument naming the field, counts as
// resource_exhausted.
func TestServeMaximums(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_SERVE_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, stop := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar,
		"--max-sandboxes", "2", "--max-processes", "1", "--max-timeout", "1m", "--max-output-limit", "1MiB",
		"--max-read-size", "1KiB", "--max-upload-size", "1KiB", "--max-cpu-time", "10s")
	defer stop()
	ctx := t.Context()
	c, _ := client.New(url, client.WithToken("tok"))
	var fe *execbox.FieldError
	_, err := c.Create(ctx, execbox.Spec{Limits: execbox.Limits{CPUTime: time.Minute}}, client.CreateOptions{})
	if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "limits.cpu_time" {
		t.Errorf("Create over max cpu time: %v, want ErrInvalidArgument naming limits.cpu_time", err)
	}
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		req   execbox.ExecRequest
		field string
	}{
		{"timeout", execbox.ExecRequest{Command: []string{"true"}, Timeout: time.Hour}, "timeout"},
		{"output limit", execbox.ExecRequest{Command: []string{"true"}, OutputLimit: 2 << 20}, "output_limit"},
	} {
		_, err := sb.Exec(ctx, tt.req)
		if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s over the maximum: %v, want ErrInvalidArgument naming %s", tt.name, err, tt.field)
		}
	}
	if err := sb.Files().WriteFile(ctx, "big", bytes.Repeat([]byte("x"), 4096), execbox.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Files().ReadFile(ctx, "big", execbox.ReadOptions{Limit: 4096}); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("read over the maximum: %v, want ErrInvalidArgument", err)
	}
	if _, err := sb.Files().ReadFile(ctx, "big", execbox.ReadOptions{}); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("read of a file over the maximum: %v, want ErrResourceExhausted (the default limit is the maximum)", err)
	}
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	_ = tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: 4096, Typeflag: tar.TypeReg})
	_, _ = tw.Write(make([]byte, 4096))
	_ = tw.Close()
	if err := sb.Files().Upload(ctx, "up", &tarball); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("upload over the maximum: %v, want ErrResourceExhausted", err)
	}
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"true"}}); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("a second process over --max-processes 1: %v, want ErrResourceExhausted", err)
	}
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		_, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}})
		return err == nil
	}, "a process to be allowed once the first ended")

	if _, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{}); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("a third sandbox over --max-sandboxes 2: %v, want ErrResourceExhausted", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{}); err != nil {
		t.Errorf("a sandbox after one closed: %v", err)
	}
}

// TestServeSocketNeverOpen: the unix socket appears at its path already
// 0600 (renamed into place), never created there with the umask's mode
// for a moment, whatever the umask.
func TestServeSocketNeverOpen(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	old := unix.Umask(0)
	ln, err := listenOn("unix", filepath.Join(dir, "execbox.sock"))
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
		if name == "execbox.sock" {
			if ev.Mask&unix.IN_CREATE != 0 {
				t.Errorf("the socket was created at its path (mode from the umask until a chmod)")
			}
			moved = moved || ev.Mask&unix.IN_MOVED_TO != 0
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if !moved {
		t.Errorf("the socket was not renamed into place")
	}
}
