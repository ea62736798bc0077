// Package testutil holds the helpers execbox's own tests share: Require,
// which skips a test when a dependency of the machine is missing (or fails
// it, in CI), a logger writing to the test's output, and Eventually, which
// polls instead of sleeping.
//
// Dependencies are probed at most once per test binary; the result is
// cached, so Require is cheap to call from every test.
//
// The environment variable EXECBOX_TEST_REQUIRE turns skips into failures:
// "all" for every dependency, or a comma-separated list of dependency names
// ("root,docker,command:python3"), from which "-name" removes one
// ("all,-root"). CI sets it to "all" so that a missing
// dependency fails loudly instead of silently shrinking the test suite.
package testutil

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the environment variable naming the dependencies whose
// absence fails a test instead of skipping it: "all", or a comma-separated
// list of Dep names.
const RequireEnv = "EXECBOX_TEST_REQUIRE"

// Dep is a dependency of a test on the machine: root, a Docker engine, an
// interpreter. Its probe runs at most once; Deps are comparable values and
// safe for concurrent use.
type Dep struct {
	name string
	st   *depState
}

type depState struct {
	once  sync.Once
	probe func() error
	err   error
}

// NewDep returns a dependency called name. probe returns nil when the
// dependency is present, or an error saying what is missing; it runs at
// most once, on first use.
func NewDep(name string, probe func() error) Dep {
	return Dep{name: name, st: &depState{probe: probe}}
}

// Name is the dependency's name, as used in EXECBOX_TEST_REQUIRE.
func (d Dep) Name() string { return d.name }

// Check probes the dependency (once) and returns nil if it is present, or
// why it is not.
func (d Dep) Check() error {
	if d.st == nil {
		return fmt.Errorf("testutil: zero Dep")
	}
	d.st.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				d.st.err = fmt.Errorf("probe panicked: %v", r)
			}
		}()
		d.st.err = d.st.probe()
	})
	return d.st.err
}

// Available reports whether the dependency is present.
func (d Dep) Available() bool { return d.Check() == nil }

// Require skips t unless every dependency is present, naming each missing
// one and why. A missing dependency selected by EXECBOX_TEST_REQUIRE fails
// t instead.
func Require(t testing.TB, deps ...Dep) {
	t.Helper()
	var skip, fail []string
	for _, d := range deps {
		err := d.Check()
		if err == nil {
			continue
		}
		msg := fmt.Sprintf("%s (%v)", d.name, err)
		if required(d.name) {
			fail = append(fail, msg)
		} else {
			skip = append(skip, msg)
		}
	}
	if len(fail) > 0 {
		all := append(fail, skip...)
		t.Fatalf("missing required test dependencies (%s=%q): %s", RequireEnv, os.Getenv(RequireEnv), strings.Join(all, "; "))
	}
	if len(skip) > 0 {
		t.Skipf("missing test dependencies: %s (set %s=all to fail instead)", strings.Join(skip, "; "), RequireEnv)
	}
}

// required reports whether EXECBOX_TEST_REQUIRE selects the dependency
// name: "all" or its name selects it, and "-name" takes it back out, for
// a host kind that lacks it by design ("all,-root" for the rootless
// configurations of the VM matrix: root-only tests skip, counted).
func required(name string) bool {
	sel := false
	for f := range strings.SplitSeq(os.Getenv(RequireEnv), ",") {
		f = strings.TrimSpace(f)
		if f == "-"+name {
			return false
		}
		if f == "all" || f == name {
			sel = true
		}
	}
	return sel
}

// Root is the dependency on an effective user ID of 0.
var Root = NewDep("root", func() error {
	if id := os.Geteuid(); id != 0 {
		return fmt.Errorf("euid is %d, not 0", id)
	}
	return nil
})

// Docker is the dependency on a Docker engine answering GET /_ping on its
// Unix socket: $DOCKER_HOST when it is a unix:// address, else
// /var/run/docker.sock. It talks HTTP directly, without the Docker SDK.
var Docker = NewDep("docker", probeDocker)

func probeDocker() error {
	sock := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok && h != "" {
		sock = h
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("no engine at %s: %w", sock, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("engine at %s answered /_ping with %s", sock, resp.Status)
	}
	return nil
}

// UserNamespaces is the dependency on being able to create a user
// namespace. The probe really creates one (running /bin/true in it), so
// sysctls, AppArmor and seccomp restrictions are all accounted for.
var UserNamespaces = NewDep("userns", func() error {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return errors.New("user.max_user_namespaces is 0")
	}
	bin, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("cannot probe: %w", err)
	}
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot create a user namespace: %w", err)
	}
	return nil
})

// CgroupV1orV2 is the dependency on at least one cgroup controller being
// mounted, in a cgroup v2 hierarchy or as v1 hierarchies.
var CgroupV1orV2 = NewDep("cgroup", func() error {
	c, err := CgroupControllers()
	if err != nil {
		return err
	}
	if len(c) == 0 {
		return errors.New("no cgroup controller is mounted")
	}
	return nil
})

// CgroupControllers lists the cgroup controllers mounted on this machine
// (v2 controllers available at the root of the unified hierarchy, and v1
// controllers with a hierarchy of their own), sorted and deduplicated.
func CgroupControllers() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			b, err := os.ReadFile(filepath.Join(unescapeMount(pf[4]), "cgroup.controllers"))
			if err == nil {
				out = append(out, strings.Fields(string(b))...)
			}
		case "cgroup":
			for o := range strings.SplitSeq(qf[2], ",") {
				switch {
				case o == "rw" || o == "ro" || strings.Contains(o, "=") || o == "clone_children" || o == "noprefix" || o == "xattr" || o == "cpuset_v2_mode":
				default:
					out = append(out, o)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo (\040 for
// a space, ...).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

var (
	commandsMu sync.Mutex
	commands   = map[string]Dep{}
)

// Command is the dependency on an executable called name in PATH (python3,
// node, git, ...), named "command:NAME". Calls with the same name share one
// probe.
func Command(name string) Dep {
	commandsMu.Lock()
	defer commandsMu.Unlock()
	if d, ok := commands[name]; ok {
		return d
	}
	d := NewDep("command:"+name, func() error {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("not in PATH: %w", err)
		}
		return nil
	})
	commands[name] = d
	return d
}

// Logger returns a logger writing every level, as text, to t's output, so
// that logs interleave with the test's own and show only when it fails or
// runs with -v.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Eventually polls cond until it returns true, and fails t (FailNow) if it
// has not by timeout. Polling starts fast and backs off to 50ms, so a
// condition met at once costs nothing and no test sleeps for a fixed time.
// msgAndArgs, if given, is a format and its arguments describing what was
// awaited.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	if Poll(t.Context(), timeout, cond) {
		return
	}
	what := "condition"
	if len(msgAndArgs) > 0 {
		if f, ok := msgAndArgs[0].(string); ok {
			what = fmt.Sprintf(f, msgAndArgs[1:]...)
		}
	}
	t.Fatalf("%s not met within %v", what, timeout)
}

// Poll calls cond until it returns true (Poll reports true), timeout passes
// or ctx ends (Poll reports false). It does not fail anything: use it where
// a test wants to act on the outcome itself.
func Poll(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(Scale(timeout))
	wait := time.Millisecond
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return cond()
		}
		tm := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			tm.Stop()
			return false
		case <-tm.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// TimeScaleEnv names the environment variable that stretches the
// deadlines of tests (a factor, e.g. "5"): a machine under software
// emulation, as in the VM matrix, runs everything several times slower,
// and a deadline that is generous on real hardware is not there. It
// never shortens one.
const TimeScaleEnv = "EXECBOX_TEST_TIMESCALE"

var timeScale = sync.OnceValue(func() float64 {
	f, err := strconv.ParseFloat(os.Getenv(TimeScaleEnv), 64)
	if err != nil || f < 1 || f > 100 {
		return 1
	}
	return f
})

// Scale returns d stretched by EXECBOX_TEST_TIMESCALE. Poll and
// Eventually apply it; tests apply it to deadlines of their own.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * timeScale())
}
