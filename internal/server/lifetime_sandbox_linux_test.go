package server_test

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestAgentDiedMarksFailed: a sandbox of the sandbox runtime whose agent
// is killed from outside is marked failed with the cause and closed,
// whether a call finds it (the call fails unavailable, which triggers
// the check) or the reaper's liveness check does; its ID then answers
// closed, saying it failed, and nothing of it remains on the host.
func TestAgentDiedMarksFailed(t *testing.T) {
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2)
	state, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	rt := sandbox.New(sandbox.Options{Logger: testutil.Logger(t), StateDir: filepath.Join(state, "state")})
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with user namespaces and cgroups: %s", h.Detail)
	}
	for _, tt := range []struct {
		name  string
		probe time.Duration // the reaper's liveness checks
		call  bool          // a call finds the agent dead
	}{
		{"call", -1, true},
		{"probe", 100 * time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var reasons []string
			srv, err := server.New([]execbox.Runtime{rt}, server.Options{
				Logger:    testutil.Logger(t),
				Lifetimes: server.Lifetimes{ReapInterval: 20 * time.Millisecond, ProbeInterval: tt.probe},
				Observer: &server.Observer{Closed: func(s server.ClosedStats) {
					mu.Lock()
					reasons = append(reasons, s.Runtime+":"+s.Reason)
					mu.Unlock()
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			t.Cleanup(func() {
				ts.Close()
				if err := srv.Close(); err != nil {
					t.Errorf("server Close: %v", err)
				}
			})
			c, _ := client.New(ts.URL)
			sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
			agent, cgroups := agentOf(t, sb.ID())
			for _, dir := range cgroups {
				if _, err := os.Stat(dir); err != nil {
					t.Fatalf("cgroup of the live sandbox: %v", err)
				}
			}
			if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tt.call {
				_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}})
				if !errors.Is(err, execbox.ErrClosed) && (!errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "agent is gone")) {
					t.Errorf("exec after the agent died: %v, want ErrUnavailable saying the agent is gone (or ErrClosed)", err)
				}
			}
			var info api.SandboxInfo
			testutil.Eventually(t, 30*time.Second, func() bool {
				info, err = c.SandboxInfo(t.Context(), sb.ID())
				return err == nil && info.State != api.StateRunning
			}, "the sandbox to be marked failed")
			if info.State != api.StateFailed || info.EndReason != api.EndFailed || !strings.Contains(info.EndDetail, "boundary is lost") ||
				!strings.Contains(info.EndDetail, "agent is gone, killed by signal 9") {
				t.Errorf("after the agent died: %+v", info)
			}
			_, err = sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}})
			if !errors.Is(err, execbox.ErrClosed) || !strings.Contains(err.Error(), "failed at") {
				t.Errorf("exec in the failed sandbox: %v, want ErrClosed saying it failed", err)
			}
			testutil.Eventually(t, 30*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(reasons) == 1 && reasons[0] == "sandbox:failed"
			}, "Observer.Closed with reason failed")
			// Closed: its cgroups (with every process in them) are gone.
			for _, dir := range cgroups {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("cgroup %s of the failed sandbox: %v, want removed", dir, err)
				}
			}
		})
	}
}

// agentOf finds the host PID of the agent of the sandbox runtime's
// sandbox id, the process named execbox-sandbox-agent in the sandbox's
// cgroup (named after its ID), and the sandbox's cgroup directories.
func agentOf(t *testing.T, id string) (int, []string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, err := os.ReadFile(p + "/cmdline")
		if err != nil || !bytes.HasPrefix(cmd, []byte("execbox-sandbox-agent\x00")) {
			continue
		}
		cg, err := os.ReadFile(p + "/cgroup")
		if err != nil || !strings.Contains(string(cg), "/"+id+"/") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(p))
		return pid, cgroupDirs(string(cg), id)
	}
	t.Fatalf("no agent of sandbox %s found in /proc", id)
	return 0, nil
}

// cgroupDirs are the directories of the cgroups named id in a
// /proc/PID/cgroup listing.
func cgroupDirs(listing, id string) []string {
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		i := strings.Index(f[2], "/"+id+"/")
		if i < 0 {
			continue
		}
		path := f[2][:i+1+len(id)]
		if f[1] == "" {
			dirs = append(dirs, "/sys/fs/cgroup"+path) // v2
		} else {
			dirs = append(dirs, "/sys/fs/cgroup/"+strings.TrimPrefix(f[1], "name=")+path)
		}
	}
	return dirs
}

// TestAgentDiedEveryCallClosed: once a sandbox's agent has died, the
// call that finds it dead and every call after it answer closed (410),
// saying the sandbox failed and why; none answers unavailable (503).
// Before, the calls in the second or so until the background check ended
// the sandbox got unavailable, which a client retries rather than
// giving up on the sandbox.
func TestAgentDiedEveryCallClosed(t *testing.T) {
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2)
	state, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	rt := sandbox.New(sandbox.Options{Logger: testutil.Logger(t), StateDir: filepath.Join(state, "state")})
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{
		Logger:    testutil.Logger(t),
		Lifetimes: server.Lifetimes{ProbeInterval: -1}, // calls alone find it
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	// No retries: every answer as the server gave it.
	c, _ := client.New(ts.URL, client.WithRetry(client.Retry{Attempts: 1}))
	sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	agent, _ := agentOf(t, sb.ID())
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		do   func() error
	}{
		{"exec", func() error {
			_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}})
			return err
		}},
		{"stat", func() error { _, err := sb.Files().Stat(t.Context(), "."); return err }},
		{"write", func() error {
			return sb.Files().WriteFile(t.Context(), "f", []byte("x"), execbox.WriteOptions{})
		}},
	}
	// The first calls at once, together, then each again in turn.
	var wg sync.WaitGroup
	errs := make([]error, len(calls))
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = call.do()
		}()
	}
	wg.Wait()
	for round := range 3 {
		for i, call := range calls {
			err := errs[i]
			if round > 0 {
				err = call.do()
			}
			if !errors.Is(err, execbox.ErrClosed) || errors.Is(err, execbox.ErrUnavailable) ||
				!strings.Contains(err.Error(), "failed at") || !strings.Contains(err.Error(), "agent is gone") {
				t.Errorf("%s (round %d) after the agent died: %v, want ErrClosed saying the sandbox failed because its agent is gone", call.name, round, err)
			}
		}
	}
}
