package testutil

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Registry is the dependency on the CNCF distribution registry (Debian's
// docker-registry package: /usr/bin/docker-registry), which StartRegistry
// runs.
var Registry = NewDep("registry", func() error {
	if _, err := exec.LookPath("docker-registry"); err != nil {
		return fmt.Errorf("docker-registry (the distribution registry) not in PATH: %w", err)
	}
	return nil
})

// RegistryOptions configure StartRegistry.
type RegistryOptions struct {
	// User and Password, when User is set, require HTTP basic auth
	// (htpasswd, bcrypt), which the registry accepts over plain HTTP.
	User, Password string
}

// RegistryServer is a running registry.
type RegistryServer struct {
	Host string // "127.0.0.1:PORT": prefix of references to it
	Dir  string // its storage: docker/registry/v2/... (tests may corrupt blobs there)
}

// StartRegistry starts a real registry on a free port of 127.0.0.1, its
// storage in a temporary directory, and waits until GET /v2/ answers (401
// counts, with auth). It is killed and waited for at t's cleanup. It
// requires Registry.
func StartRegistry(t testing.TB, opts RegistryOptions) *RegistryServer {
	t.Helper()
	Require(t, Registry)
	dir := t.TempDir()
	var auth string
	if opts.User != "" {
		auth = writeHtpasswd(t, dir, opts.User, opts.Password)
	}
	// A port taken between probing and listening fails the start: retry.
	var last error
	for range 5 {
		host, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		srv := &RegistryServer{Host: host, Dir: filepath.Join(dir, "storage")}
		if last = srv.start(t, dir, auth); last == nil {
			return srv
		}
	}
	t.Fatalf("registry did not start: %v", last)
	return nil
}

// registryConfig is the registry's configuration (version 0.1 format).
const registryConfig = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`

// start runs the registry once; an error if it does not come up.
func (r *RegistryServer) start(t testing.TB, dir, auth string) error {
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, registryConfig, r.Dir, r.Host, auth), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command("docker-registry", "serve", cfg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	up := Poll(t.Context(), 10*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		return r.answers()
	})
	select {
	case <-exited:
		return fmt.Errorf("exited: %s", out.String())
	default:
	}
	if !up {
		stop()
		return fmt.Errorf("no answer on %s within %s: %s", r.Host, Scale(10*time.Second), out.String())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("registry log:\n%s", out.String())
		}
	})
	return nil
}

// answers reports whether GET /v2/ gets 200, or 401 (auth required).
func (r *RegistryServer) answers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Host+"/v2/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

// writeHtpasswd writes an htpasswd file for user and returns the auth
// section of the configuration using it.
func writeHtpasswd(t testing.TB, dir, user, password string) string {
	if strings.ContainsAny(user, ":\n") {
		t.Fatalf("registry user %q has a colon or a newline", user)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(file, fmt.Appendf(nil, "%s:%s\n", user, hash), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("auth:\n  htpasswd:\n    realm: execbox-test\n    path: %s\n", file)
}

// freePort returns "127.0.0.1:PORT" for a port free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// syncBuffer is a bytes.Buffer safe for a process's output and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
