package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
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
	return url, stop
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
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = p
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
		{"no token off loopback", []string{"serve", "--config=", "--listen", "0.0.0.0:0", "--token-env", "EXECBOX_TEST_UNSET_TOKEN"}, "without a token"},
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
