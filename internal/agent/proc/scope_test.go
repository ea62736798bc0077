package proc

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// fakeScope records how proc drives a Scope.
type fakeScope struct {
	mu       sync.Mutex
	started  int
	signals  []syscall.Signal
	finished []*execbox.Result
}

func (s *fakeScope) Start(cmd *exec.Cmd) error {
	s.mu.Lock()
	s.started++
	s.mu.Unlock()
	return cmd.Start()
}

func (s *fakeScope) Signal(sig syscall.Signal) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signals = append(s.signals, sig)
	return 0
}

func (s *fakeScope) Finish(res *execbox.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if res != nil {
		res.Detail = "amended"
	}
	s.finished = append(s.finished, res)
}

func TestScope(t *testing.T) {
	sc := &fakeScope{}
	opts := sh("exit 3")
	opts.Scope = sc
	p := start(t, opts)
	res, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Detail != "amended" {
		t.Errorf("result %+v, want exit 3 amended by Finish", res)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.started != 1 || len(sc.finished) != 1 || sc.finished[0] == nil {
		t.Errorf("Start called %d times, Finish %v; want once each with a result", sc.started, sc.finished)
	}

	// A process that cannot start still gets Finish(nil).
	sc2 := &fakeScope{}
	_, err = Start(Options{Path: "/nonexistent", Args: []string{"x"}, Dir: t.TempDir(), Timeout: 1, GracePeriod: 1, OutputLimit: 1, Scope: sc2, Marker: "scope-test/p"})
	if err == nil {
		t.Fatal("Start of a missing program succeeded")
	}
	if len(sc2.finished) != 1 || sc2.finished[0] != nil {
		t.Errorf("Finish after a failed start: %v, want one nil", sc2.finished)
	}
}

func TestScopeSignalledOnTimeout(t *testing.T) {
	sc := &fakeScope{}
	opts := sh("sleep 30")
	opts.Scope = sc
	opts.Timeout = 100 * 1e6
	p := start(t, opts)
	res, _ := p.Wait(t.Context())
	if res.Reason != execbox.ReasonTimedOut {
		t.Fatalf("reason %s, want timed out", res.Reason)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.signals) == 0 || sc.signals[0] != syscall.SIGTERM {
		t.Errorf("scope signals %v, want SIGTERM first", sc.signals)
	}
}

// TestDropCapabilities checks that a root command, run through the shim,
// has no capability left, the bounding set included, and that one run as
// another user has none it could use (its bounding set is the caller's:
// without setuid binaries or file capabilities it grants nothing).
func TestDropCapabilities(t *testing.T) {
	testutil.Require(t, testutil.Root)
	for _, cred := range []*syscall.Credential{nil, {Uid: 0, Gid: 0, Groups: []uint32{}}, {Uid: 65534, Gid: 65534, Groups: []uint32{}}} {
		opts := sh("grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|Uid|Gid|NoNewPrivs):' /proc/self/status")
		opts.DropCapabilities = true
		opts.Credential = cred
		opts.Dir = os.TempDir()
		p := start(t, opts)
		res, _ := p.Wait(t.Context())
		out := string(res.Stdout.Data)
		if !res.Success() {
			t.Fatalf("cred %v: %s: %s", cred, res.String(), res.Stderr.Text())
		}
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			root := cred == nil || cred.Uid == 0
			if strings.HasPrefix(k, "Cap") && (root || k != "CapBnd") && strings.Trim(v, "0") != "" {
				t.Errorf("cred %v: %s = %s, want no capability", cred, k, v)
			}
		}
		if cred != nil && !strings.Contains(out, "Uid:\t65534") && cred.Uid == 65534 {
			t.Errorf("cred %v: not switched: %s", cred, out)
		}
	}
}
