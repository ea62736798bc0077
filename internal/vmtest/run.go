package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	Src     string
	Configs []string
	Pkgs    []string
	Run     string
	Skip    string
	Timeout time.Duration
	// Stall gives up a guest that prints nothing that long, and boots
	// it again once (0: never).
	Stall    time.Duration
	CacheDir string
	Race     bool
	CPUs     int
	MemMiB   int
	Tmp      string // what /tmp (TMPDIR) is in the guest: ext4 or tmpfs
	// TimeScale stretches the tests' deadlines (EXECBOX_TEST_TIMESCALE):
	// software emulation runs everything several times slower.
	TimeScale float64
}

// config is what init.sh and run.sh do for one configuration beyond
// mounting its cgroups (init.sh: v1 for "v1", cgroup2 with nsdelegate for
// the rest).
type config struct {
	uid int // the tests run as this uid (and gid)
	// cgroup, if set, is where the tests start, relative to the cgroup2
	// root, made as systemd makes it: controllers enabled on the way down,
	// the last directory delegated to uid (systemd's Delegate=yes).
	cgroup string
	// subids gives uid a range of subordinate ids (/etc/subuid and
	// /etc/subgid, for newuidmap); without, the user has none.
	subids bool
	// absent are the test dependencies this host kind lacks by design
	// (EXECBOX_TEST_REQUIRE=all,-name...): tests needing them skip,
	// counted, instead of failing.
	absent []string
}

// configs are the known configurations, in the order of -configs' help.
var configs = map[string]config{
	"v2":       {},
	"v1":       {},
	"rootless": {uid: 1000, absent: []string{"root", "sandbox-cgroups"}},
	// A systemd service with Delegate=yes: root, in a non-root cgroup that
	// holds its process (v2's no-internal-process rule applies).
	"v2-delegated": {cgroup: "system.slice/execbox-test.service"},
	// A systemd user session: uid 1000 in a delegated scope under
	// user@1000.service (systemd-run --user --scope -p Delegate=yes).
	// With subordinate ids, as a Debian 12 user made by adduser has.
	"rootless-delegated": {uid: 1000, cgroup: "user.slice/user-1000.slice/user@1000.service/app.slice/execbox-test.scope", subids: true, absent: []string{"root"}},
}

// delegatedAt is the directory of a config's cgroup path that systemd
// delegates: the service, or the user's user@.service.
func delegatedAt(path string) string {
	if i := strings.Index(path, ".service"); i >= 0 {
		return path[:i+len(".service")]
	}
	return path
}

// qemu is the emulator binary (Debian's qemu-system-x86).
const qemu = "qemu-system-x86_64"

// testBinary is one package's compiled tests.
type testBinary struct {
	Name string // short name, e.g. sandbox
	Pkg  string // import path
	Dir  string // the package's source directory, where the binary runs
	Path string // the binary, inside the work directory
	Run  string // its own -test.run, or "" for the options'
}

// runAll builds the test binaries once and boots one VM per configuration,
// in order. An error that stops every configuration (no qemu, no kernel, a
// build failure) is returned and also recorded in each result.
func runAll(ctx context.Context, o options, out io.Writer) ([]*result, error) {
	var results []*result
	for _, c := range o.Configs {
		results = append(results, &result{Config: c})
	}
	fail := func(err error) ([]*result, error) {
		for _, r := range results {
			if r.Err == nil {
				r.Err = err
			}
		}
		return results, err
	}
	if o.Tmp != "ext4" && o.Tmp != "tmpfs" {
		return fail(fmt.Errorf("-tmp %q: want ext4 or tmpfs", o.Tmp))
	}
	for _, r := range results {
		if _, ok := configs[r.Config]; !ok {
			return fail(fmt.Errorf("unknown configuration %q (known: %s)", r.Config, strings.Join(slices.Sorted(maps.Keys(configs)), ", ")))
		}
	}
	if _, err := exec.LookPath(qemu); err != nil {
		return fail(fmt.Errorf("%s not found (apt-get install qemu-system-x86): %w", qemu, err))
	}
	src, err := filepath.Abs(o.Src)
	if err != nil {
		return fail(err)
	}
	o.Src = src
	k, err := prepareKernel(ctx, o.CacheDir, out)
	if err != nil {
		return fail(err)
	}
	work, err := os.MkdirTemp("", "execbox-vm-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(work)
	// The rootless configurations' tests run (and re-run themselves, as
	// TestSweep does) as an ordinary user: the shared directory must let
	// them in, as a CI checkout does.
	if err := os.Chmod(work, 0o755); err != nil {
		return fail(err)
	}
	start := time.Now()
	bins, err := buildTests(ctx, src, o, work, out)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(out, "vm: kernel %s %s, %d test binaries built in %s\n", kernelPackage, k.Version, len(bins), time.Since(start).Round(time.Second))
	for _, r := range results {
		if ctx.Err() != nil {
			r.Err = ctx.Err()
			continue
		}
		r.Err = boot(ctx, o, k, work, bins, r, out)
		if errors.Is(r.Err, errStalled) && ctx.Err() == nil {
			// Once: a guest under software emulation has been seen to
			// freeze whole, printing nothing, in a run whose tests pass
			// alone. A second stall fails the configuration.
			fmt.Fprintf(out, "vm: %s: %v; booting it again, once\n", r.Config, r.Err)
			*r = result{Config: r.Config, Stalled: r.Err.Error()}
			r.Err = boot(ctx, o, k, work, bins, r, out)
		}
	}
	return results, nil
}

// errStalled is a guest that printed nothing for options.Stall.
var errStalled = errors.New("the guest stalled")

// buildTests compiles each package's tests on the host into work/bin.
// Packages without test files are left out, with a note. A package
// written DIR=REGEXP runs only the tests REGEXP selects (-test.run), in
// place of -run.
func buildTests(ctx context.Context, src string, o options, work string, out io.Writer) ([]testBinary, error) {
	var pkgs []string
	runs := map[string]string{} // by the package's directory
	for _, p := range o.Pkgs {
		p, re, _ := strings.Cut(p, "=")
		pkgs = append(pkgs, p)
		if re != "" {
			runs[filepath.Join(src, p)] = re
		}
	}
	list := exec.CommandContext(ctx, "go", append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}\t{{len .XTestGoFiles}}"}, pkgs...)...)
	list.Dir = src
	list.Stderr = out
	b, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %w", strings.Join(o.Pkgs, " "), src, err)
	}
	if err := os.Mkdir(filepath.Join(work, "bin"), 0o755); err != nil {
		return nil, err
	}
	var bins []testBinary
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			continue
		}
		if f[2] == "0" && f[3] == "0" {
			fmt.Fprintf(out, "vm: %s has no tests\n", f[0])
			continue
		}
		t := testBinary{Name: filepath.Base(f[0]), Pkg: f[0], Dir: f[1], Run: runs[f[1]]}
		t.Path = filepath.Join(work, "bin", t.Name+".test")
		args := []string{"test", "-c", "-o", t.Path}
		if o.Race {
			args = append(args, "-race")
		}
		build := exec.CommandContext(ctx, "go", append(args, t.Pkg)...)
		build.Dir = src
		build.Stdout, build.Stderr = out, out
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("go test -c %s: %w", t.Pkg, err)
		}
		bins = append(bins, t)
	}
	if len(bins) == 0 {
		return nil, errors.New("no package with tests selected")
	}
	// A static execbox for the sandboxes made from images, whose agent
	// cannot run from a dynamically linked test binary: the guest finds
	// it through EXECBOX_TEST_AGENT_BINARY (testutil.StaticExecbox).
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(work, "bin", staticAgent), "./cmd/execbox")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = out, out
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build a static execbox: %w", err)
	}
	return bins, nil
}

// staticAgent is the static execbox's name in the work directory's bin.
const staticAgent = "execbox-static"

// guestWork is where init.sh mounts the host's work directory.
const guestWork = "/run/vm"

// boot runs one configuration: writes its run.sh, boots qemu with the
// host's root and the work directory shared, streams the guest's console
// to out, and fills r. The VM is killed when ctx ends or o.Timeout passes.
func boot(ctx context.Context, o options, k kernel, work string, bins []testBinary, r *result, out io.Writer) error {
	start := time.Now()
	defer func() { r.Duration = time.Since(start) }()
	status := "status-" + r.Config
	if err := os.WriteFile(filepath.Join(work, "run.sh"), []byte(runScript(o, r.Config, work, bins, status)), 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-smp", strconv.Itoa(o.CPUs), "-m", strconv.Itoa(o.MemMiB),
		"-kernel", k.Vmlinuz, "-initrd", k.Initrd,
		"-append", "console=ttyS0 loglevel=4 panic=-1 execbox.config=" + r.Config + " execbox.tmp=" + o.Tmp,
		"-serial", "stdio",
		"-fsdev", "local,id=host,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=host,mount_tag=host",
		"-fsdev", "local,id=work,path=" + work + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=work,mount_tag=work",
		// The source tree again, mounted at its own path by run.sh: the
		// guest's tmpfs and ext4 over /tmp would hide a tree there (a CI
		// clone in /tmp, say).
		"-fsdev", "local,id=src,path=" + o.Src + ",security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=src,mount_tag=src",
	}
	if o.Tmp == "ext4" {
		img, err := scratchDisk(ctx, work, r.Config)
		if err != nil {
			return err
		}
		defer os.Remove(img)
		args = append(args, "-drive", "file="+img+",format=raw,if=virtio,cache=unsafe")
	}
	ctx, stall := context.WithCancelCause(ctx)
	defer stall(nil)
	cmd := exec.CommandContext(ctx, qemu, args...)
	// The VM dies with this process, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	cmd.Stderr = out
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "vm: %s: booting (timeout %s)\n", r.Config, o.Timeout)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", qemu, err)
	}
	lastOutput := &atomic.Int64{}
	lastOutput.Store(time.Now().UnixNano())
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if o.Stall > 0 && time.Since(time.Unix(0, lastOutput.Load())) > o.Stall {
					stall(fmt.Errorf("%w: no output for %s", errStalled, o.Stall))
					return
				}
			}
		}
	}()
	r.scan(&noting{pipe, lastOutput}, out)
	werr := cmd.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return cause
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("VM killed after the timeout of %s", o.Timeout)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("VM killed: %w", ctx.Err())
	}
	if werr != nil {
		return fmt.Errorf("%s: %w", qemu, werr)
	}
	b, err := os.ReadFile(filepath.Join(work, status))
	if err != nil {
		return fmt.Errorf("the guest wrote no exit status (crashed or failed to boot)")
	}
	r.Exit, err = strconv.Atoi(strings.TrimSpace(string(b)))
	return err
}

// scratchDisk makes a sparse, empty ext4 image for the guest's /tmp.
func scratchDisk(ctx context.Context, work, config string) (string, error) {
	img := filepath.Join(work, "tmp-"+config+".img")
	f, err := os.Create(img)
	if err != nil {
		return "", err
	}
	err = f.Truncate(16 << 30)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", img)
	if b, err := mkfs.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mkfs.ext4 %s (e2fsprogs): %w: %s", img, err, b)
	}
	return img, nil
}

// runScript is stage 2 in the guest (run after switch_root by busybox sh):
// the environment of a CI shell, then each test binary in its package's
// source directory, as the configuration's uid.
func runScript(o options, config, work string, bins []testBinary, status string) string {
	var s strings.Builder
	g := func(p string) string { return filepath.Join(guestWork, strings.TrimPrefix(p, work)) }
	fmt.Fprintf(&s, "B=/run/busybox\n")
	fmt.Fprintf(&s, "export PATH=%s\n", quote(os.Getenv("PATH")))
	require := "all"
	for _, d := range configs[config].absent {
		require += ",-" + d
	}
	fmt.Fprintf(&s, "export HOME=/home/vm TMPDIR=/tmp EXECBOX_TEST_REQUIRE=%s LANG=C.UTF-8 EXECBOX_TEST_TIMESCALE=%g\n", require, max(o.TimeScale, 1))
	fmt.Fprintf(&s, "export EXECBOX_TEST_AGENT_BINARY=%s\n", quote(g(filepath.Join(work, "bin", staticAgent))))
	fmt.Fprintf(&s, "mkdir -p $HOME\n")
	// Loopback, for the tests' servers (the image tests' registry).
	fmt.Fprintf(&s, "$B ip link set lo up\n")
	if o.Src != "" {
		fmt.Fprintf(&s, "mkdir -p %[1]s 2>/dev/null; mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro,cache=loose src %[1]s || exit 1\n", quote(o.Src))
	}
	as := ""
	c := configs[config]
	if c.cgroup != "" {
		s.WriteString(cgroupScript(c))
	}
	if uid := c.uid; uid != 0 {
		fmt.Fprintf(&s, "export XDG_RUNTIME_DIR=/run/user/%d\n", uid)
		fmt.Fprintf(&s, "mkdir -p $XDG_RUNTIME_DIR && chown %d:%d $HOME $XDG_RUNTIME_DIR && chmod 700 $XDG_RUNTIME_DIR\n", uid, uid)
		ids := ""
		if c.subids {
			ids = fmt.Sprintf("%d:200000:65536", uid)
		}
		fmt.Fprintf(&s, "echo '%s' > /etc/subuid; echo '%s' > /etc/subgid\n", ids, ids)
		// util-linux's setpriv, by path: busybox sh prefers its own applet,
		// which cannot change uids.
		as = fmt.Sprintf("/usr/bin/setpriv --reuid=%d --regid=%d --clear-groups -- ", uid, uid)
	}
	fmt.Fprintf(&s, "echo \"vm: $(uname -r), config %s, uid $(%sid -u), $(nproc) cpus\"\n", config, as)
	// Which toolchains the tests can see (the host's PATH, through 9p).
	fmt.Fprintf(&s, "echo \"vm: in PATH: $(for c in go python3 node gcc g++ mono mcs bun esbuild; do %scommand -v $c >/dev/null 2>&1 && printf '%%s ' $c; done)\"\n", "")
	fmt.Fprintf(&s, "rc=0\n")
	for _, b := range bins {
		// Below the VM's bound, so that a hung test panics with its stacks
		// before the VM is killed.
		args := []string{g(b.Path), "-test.v", "-test.count=1", "-test.timeout=" + (o.Timeout * 9 / 10).String()}
		if run := cmp.Or(b.Run, o.Run); run != "" {
			args = append(args, "-test.run="+run)
		}
		if o.Skip != "" {
			args = append(args, "-test.skip="+o.Skip)
		}
		for i := range args {
			args[i] = quote(args[i])
		}
		fmt.Fprintf(&s, "echo %s\n", quote(pkgMarker+b.Pkg))
		fmt.Fprintf(&s, "(cd %s && exec %s%s) </dev/null 2>&1\n", quote(b.Dir), as, strings.Join(args, " "))
		fmt.Fprintf(&s, "r=$?; echo \"%s%s exit $r\"; [ $r -eq 0 ] || rc=1\n", pkgEndMarker, b.Pkg)
	}
	fmt.Fprintf(&s, "echo $rc > %s; sync\n", quote(filepath.Join(guestWork, status)))
	fmt.Fprintf(&s, "$B poweroff -f\n")
	return s.String()
}

// cgroupScript makes c's cgroup as systemd would and moves the script's
// shell (so the tests) into it.
func cgroupScript(c config) string {
	var s strings.Builder
	fmt.Fprintf(&s, "cg=/sys/fs/cgroup\n")
	deleg := delegatedAt(c.cgroup)
	dir := "/sys/fs/cgroup"
	for _, d := range strings.Split(c.cgroup, "/") {
		// On the way down to a unit with Delegate=yes (a service, or the
		// scope of `systemd-run --user --scope -p Delegate=yes`), systemd
		// (the user's manager below user@UID.service) enables the
		// controllers for the directory below.
		fmt.Fprintf(&s, "echo '+memory +pids +cpu' > %s/cgroup.subtree_control || exit 125\n", dir)
		dir += "/" + d
		fmt.Fprintf(&s, "mkdir -p %s\n", dir)
	}
	top := "/sys/fs/cgroup/" + deleg
	if c.uid != 0 {
		// systemd chowns the delegated directory and the files listed in
		// /sys/kernel/cgroup/delegate; what the user made below it is the
		// user's own.
		fmt.Fprintf(&s, "chown %d:%d %s; for f in $(cat /sys/kernel/cgroup/delegate); do chown %d:%d %s/$f; done\n", c.uid, c.uid, top, c.uid, c.uid, top)
		if rest := strings.TrimPrefix(c.cgroup, deleg+"/"); rest != c.cgroup {
			first, _, _ := strings.Cut(rest, "/")
			fmt.Fprintf(&s, "chown -R %d:%d %s/%s\n", c.uid, c.uid, top, first)
		}
	}
	fmt.Fprintf(&s, "echo $$ > %s/cgroup.procs || exit 125\n", dir)
	fmt.Fprintf(&s, "echo \"vm: tests start in cgroup $(cat /proc/self/cgroup)\"\n")
	return s.String()
}

// quote single-quotes s for sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

const (
	pkgMarker    = "vm: package "
	pkgEndMarker = "vm: end of "
)

// result is one configuration's outcome.
type result struct {
	Config   string
	Duration time.Duration
	Err      error // the configuration could not run to the end
	Exit     int   // the guest's status: 0 when every binary passed

	Passed, Failed, Skipped int
	Failures                []failure // failing tests, in order
	// Stalled says why a first boot was given up (errStalled), if it was.
	Stalled  string
	pkgExits []string // "pkg exit N" per binary

	first map[string]string // test -> its first log line
	cur   string
}

// failure is a failing test and the first line it logged.
type failure struct{ Test, First string }

var (
	verdictRE = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	currentRE = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	logRE     = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)
)

// noting is a reader that notes the time of its last read with data.
type noting struct {
	r    io.Reader
	last *atomic.Int64
}

func (n *noting) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if k > 0 {
		n.last.Store(time.Now().UnixNano())
	}
	return k, err
}

// scan copies the guest's console to out, line by line with the
// configuration as prefix, counting verdicts as it goes.
func (r *result) scan(in io.Reader, out io.Writer) {
	r.first = map[string]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		fmt.Fprintf(out, "[%s] %s\n", r.Config, line)
		r.line(line)
	}
}

func (r *result) line(line string) {
	if m := currentRE.FindStringSubmatch(line); m != nil {
		r.cur = m[1]
		return
	}
	if m := verdictRE.FindStringSubmatch(line); m != nil {
		switch m[1] {
		case "PASS":
			r.Passed++
		case "SKIP":
			r.Skipped++
		case "FAIL":
			r.Failed++
			r.Failures = append(r.Failures, failure{m[2], r.first[m[2]]})
		}
		return
	}
	if rest, ok := strings.CutPrefix(line, pkgEndMarker); ok {
		r.pkgExits = append(r.pkgExits, rest)
		return
	}
	if r.cur != "" && logRE.MatchString(line) {
		if _, ok := r.first[r.cur]; !ok {
			r.first[r.cur] = strings.TrimSpace(line)
		}
	}
}

// OK reports whether the configuration ran to the end and every test
// binary exited 0.
func (r *result) OK() bool { return r.Err == nil && r.Exit == 0 && r.Failed == 0 }

// Line is the configuration's one-line summary.
func (r *result) Line() string {
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("vm: %-18s %s  %7s  tests: %d passed, %d failed, %d skipped (subtests included)",
		r.Config, verdict, r.Duration.Round(time.Second), r.Passed, r.Failed, r.Skipped)
	if r.Stalled != "" {
		s += "; booted twice (the first " + r.Stalled + ")"
	}
	if r.Err != nil {
		s += "; " + r.Err.Error()
	} else if r.Exit != 0 && r.Failed == 0 {
		s += "; a test binary failed: " + strings.Join(r.pkgExits, ", ")
	}
	return s
}

// FailureLines lists the failing tests that have no failing subtest (the
// leaves, where the cause is), with their first log line.
func (r *result) FailureLines() []string {
	var out []string
	for _, f := range r.Failures {
		if slices.ContainsFunc(r.Failures, func(g failure) bool { return strings.HasPrefix(g.Test, f.Test+"/") }) {
			continue
		}
		out = append(out, fmt.Sprintf("vm: %s: FAIL %s: %s", r.Config, f.Test, f.First))
	}
	return out
}
