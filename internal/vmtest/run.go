package main

import (
	"bufio"
	"cmp"
	"context"
	_ "embed"
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
	"sync"
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
	CPUs     int // each guest's
	MemMiB   int // each guest's
	// VMs is how many guests run at once, the configurations split
	// among them (plan).
	VMs int
	Tmp string // what /tmp (TMPDIR) is in the guest: ext4 or tmpfs
	// TimeScale stretches the tests' deadlines (EXECBOX_TEST_TIMESCALE):
	// software emulation runs everything several times slower.
	TimeScale float64
}

// config is one host kind: what a guest makes before running its tests
// (guest.sh and configBody).
type config struct {
	cgroups string // "v1" (the hierarchies of this CI host) or "v2" (cgroup2, nsdelegate)
	// cost is the configuration's time in a guest with its selection
	// (seconds, one vCPU, on this 2-core machine under load; v2 runs the
	// tests of the stock kernel once, onceRoot), for plan to balance the
	// guests. A later run measured v2 647, v1 314, v2-delegated 318,
	// rootless 175, rootless-delegated 247: the same proportions, near
	// enough; update them when a selection changes them.
	cost int
	uid  int // the tests run as this uid (and gid)
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
	"v2":       {cgroups: "v2", cost: 700},
	"v1":       {cgroups: "v1", cost: 420},
	"rootless": {cgroups: "v2", cost: 220, uid: 1000, absent: []string{"root", "sandbox-cgroups"}},
	// A systemd service with Delegate=yes: root, in a non-root cgroup that
	// holds its process (v2's no-internal-process rule applies).
	"v2-delegated": {cgroups: "v2", cost: 420, cgroup: "system.slice/execbox-test.service"},
	// A systemd user session: uid 1000 in a delegated scope under
	// user@1000.service (systemd-run --user --scope -p Delegate=yes).
	// With subordinate ids, as a Debian 12 user made by adduser has.
	"rootless-delegated": {cgroups: "v2", cost: 300, uid: 1000, cgroup: "user.slice/user-1000.slice/user@1000.service/app.slice/execbox-test.scope", subids: true, absent: []string{"root"}},
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
	Rel  string // Dir relative to the module root: its key in selection
	Path string // the binary, inside the work directory
	Run  string // its own -test.run, or "" for the options'
}

// runAll builds the test binaries once, then runs o.VMs guests at once,
// which share the configurations out (plan).
// An error that stops every configuration (no qemu, no kernel, a build
// failure) is returned and also recorded in each result.
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
	seen := map[string]bool{}
	for _, r := range results {
		if _, ok := configs[r.Config]; !ok {
			return fail(fmt.Errorf("unknown configuration %q (known: %s)", r.Config, strings.Join(slices.Sorted(maps.Keys(configs)), ", ")))
		}
		if seen[r.Config] {
			return fail(fmt.Errorf("configuration %q given twice", r.Config))
		}
		seen[r.Config] = true
	}
	if o.VMs < 1 {
		return fail(fmt.Errorf("-vms %d: want at least 1", o.VMs))
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
	if err := os.WriteFile(filepath.Join(work, "guest.sh"), guestFuncs, 0o644); err != nil {
		return fail(err)
	}
	start := time.Now()
	bins, err := buildTests(ctx, src, o, work, out)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(out, "vm: kernel %s %s, %d test binaries built in %s\n", kernelPackage, k.Version, len(bins), time.Since(start).Round(time.Second))
	out = &lockedWriter{w: out}
	var wg sync.WaitGroup
	n := 0
	for _, slot := range plan(results, o.VMs) {
		var guests []*guest
		for _, group := range slot {
			n++
			guests = append(guests, &guest{Name: fmt.Sprintf("vm%d", n), Results: group})
		}
		wg.Go(func() {
			for _, g := range guests {
				runGuest(ctx, o, k, work, bins, g, out)
			}
		})
	}
	wg.Wait()
	return results, nil
}

// plan splits the configurations among n guests running at once (slots),
// balancing their estimated costs: the longest first, each to the slot
// with the least so far. A slot boots one guest for its configurations
// of each cgroup version, v1 first: a guest runs several configurations
// in one boot only while they share the cgroup version, because a
// controller used under one version (memory: its dying cgroups, pinned by
// pages still in use) does not come free for the other.
func plan(results []*result, n int) [][][]*result {
	byCost := slices.Clone(results)
	slices.SortStableFunc(byCost, func(a, b *result) int { return cmp.Compare(configs[b.Config].cost, configs[a.Config].cost) })
	slots := make([][]*result, min(n, len(results)))
	load := make([]int, len(slots))
	for _, r := range byCost {
		i := slices.Index(load, slices.Min(load))
		slots[i] = append(slots[i], r)
		load[i] += configs[r.Config].cost
	}
	var out [][][]*result
	for _, slot := range slots {
		var guests [][]*result
		for _, v := range []string{"v1", "v2"} {
			var g []*result
			for _, r := range results { // in the order given
				if slices.Contains(slot, r) && configs[r.Config].cgroups == v {
					g = append(g, r)
				}
			}
			if len(g) > 0 {
				guests = append(guests, g)
			}
		}
		out = append(out, guests)
	}
	return out
}

// guest is one VM and the configurations it runs, in order, in one boot.
type guest struct {
	Name    string
	Results []*result
}

// runGuest boots g and fills its results. A guest that stalls is booted
// again, once, for the configurations that had not ended.
func runGuest(ctx context.Context, o options, k kernel, work string, bins []testBinary, g *guest, out io.Writer) {
	pending := g.Results
	for try := 0; len(pending) > 0; try++ {
		err := boot(ctx, o, k, work, bins, g.Name, pending, out)
		var again []*result
		for _, r := range pending {
			if !r.ended {
				again = append(again, r)
			}
		}
		if errors.Is(err, errStalled) && try == 0 && ctx.Err() == nil && len(again) > 0 {
			// Once: a guest under software emulation has been seen to
			// freeze whole, printing nothing, in a run whose tests pass
			// alone. A second stall fails the configurations.
			fmt.Fprintf(out, "vm: %s: %v; booting it again, once, for %s\n", g.Name, err, names(again))
			for _, r := range again {
				*r = result{Config: r.Config, Stalled: err.Error()}
			}
			pending = again
			continue
		}
		for _, r := range again {
			if r.Err == nil {
				r.Err = cmp.Or(err, errors.New("the guest ended before this configuration did"))
			}
		}
		return
	}
}

func names(rs []*result) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Config)
	}
	return strings.Join(s, " ")
}

// lockedWriter serializes the guests' lines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
		if rel, err := filepath.Rel(src, f[1]); err == nil {
			t.Rel = filepath.ToSlash(rel)
		}
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

// boot runs rs, in order, in one guest: writes its run script, boots
// qemu with the host's root and the work directory shared and a scratch
// disk per configuration, streams the guest's console to out, and fills
// the results of the configurations that ended. The VM is killed when ctx
// ends or o.Timeout per configuration passes.
func boot(ctx context.Context, o options, k kernel, work string, bins []testBinary, name string, rs []*result, out io.Writer) error {
	script := "run-" + name + ".sh"
	for _, r := range rs {
		os.Remove(filepath.Join(work, "status-"+r.Config))
	}
	if err := os.WriteFile(filepath.Join(work, script), []byte(guestScript(o, rs, work, bins)), 0o755); err != nil {
		return err
	}
	timeout := o.Timeout * time.Duration(len(rs))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-smp", strconv.Itoa(o.CPUs), "-m", strconv.Itoa(o.MemMiB),
		"-kernel", k.Vmlinuz, "-initrd", k.Initrd,
		"-append", "console=ttyS0 loglevel=4 panic=-1 execbox.run=" + guestWork + "/" + script,
		"-serial", "stdio",
		"-fsdev", "local,id=host,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=host,mount_tag=host",
		"-fsdev", "local,id=work,path=" + work + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=work,mount_tag=work",
		// The source tree again, mounted at its own path by the run
		// script: the guest's /tmp would hide a tree there (a CI clone in
		// /tmp, say).
		"-fsdev", "local,id=src,path=" + o.Src + ",security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=src,mount_tag=src",
	}
	if o.Tmp == "ext4" {
		// A disk per configuration, /dev/vda, /dev/vdb... in order.
		for _, r := range rs {
			img, err := scratchDisk(ctx, work, r.Config)
			if err != nil {
				return err
			}
			defer os.Remove(img)
			args = append(args, "-drive", "file="+img+",format=raw,if=virtio,cache=unsafe")
		}
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
	fmt.Fprintf(out, "vm: %s: booting for %s (%d vCPUs, timeout %s)\n", name, names(rs), o.CPUs, timeout)
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
	c := console{guest: name, results: rs, start: time.Now()}
	c.scan(&noting{pipe, lastOutput}, out)
	werr := cmd.Wait()
	// A configuration has ended when the guest wrote its status.
	for _, r := range rs {
		if b, err := os.ReadFile(filepath.Join(work, "status-"+r.Config)); err == nil {
			if r.Exit, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				r.Err = fmt.Errorf("the guest's status %q: %w", b, err)
			}
			r.ended = true
		}
	}
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return cause
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("VM killed after the timeout of %s", timeout)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("VM killed: %w", ctx.Err())
	}
	if werr != nil {
		return fmt.Errorf("%s: %w", qemu, werr)
	}
	if !slices.ContainsFunc(rs, func(r *result) bool { return r.ended }) {
		return fmt.Errorf("the guest wrote no exit status (crashed or failed to boot)")
	}
	return nil
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

// guestFuncs are the run scripts' functions: each configuration's host
// made and taken down (guest.sh).
//
//go:embed guest.sh
var guestFuncs []byte

// guestScript is stage 2 in the guest (run after switch_root by busybox
// sh): the environment of a CI shell, then, for each configuration in
// turn, its host made (configBody), its test binaries, and its host taken
// down (guest.sh's config_begin and config_end).
func guestScript(o options, rs []*result, work string, bins []testBinary) string {
	var s strings.Builder
	fmt.Fprintf(&s, ". %s\n", guestWork+"/guest.sh")
	fmt.Fprintf(&s, "export PATH=%s\n", quote(os.Getenv("PATH")))
	fmt.Fprintf(&s, "export HOME=/home/vm TMPDIR=/tmp LANG=C.UTF-8 EXECBOX_TEST_TIMESCALE=%g\n", max(o.TimeScale, 1))
	fmt.Fprintf(&s, "export EXECBOX_TEST_AGENT_BINARY=%s\n", quote(guestWork+"/bin/"+staticAgent))
	// Loopback, for the tests' servers (the image tests' registry).
	fmt.Fprintf(&s, "$B ip link set lo up\n")
	if o.Src != "" {
		fmt.Fprintf(&s, "mkdir -p %[1]s 2>/dev/null; mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro,cache=loose src %[1]s || exit 1\n", quote(o.Src))
	}
	fmt.Fprintf(&s, "echo \"vm: $(uname -r), $(nproc) cpus, $(cut -d' ' -f1 /proc/uptime)s of uptime\"\n")
	// Which toolchains the tests can see (the host's PATH, through 9p).
	fmt.Fprintf(&s, "echo \"vm: in PATH: $(for c in go python3 node gcc g++ mono mcs bun esbuild; do command -v $c >/dev/null 2>&1 && printf '%%s ' $c; done)\"\n")
	for i, r := range rs {
		c := configs[r.Config]
		dev := fmt.Sprintf("/dev/vd%c", 'a'+i)
		fmt.Fprintf(&s, "if config_begin %s %s %s %s; then\n", r.Config, c.cgroups, o.Tmp, dev)
		fmt.Fprintf(&s, "\t(\n%s\t)\n\trc=$?\nelse\n\trc=125\nfi\n", configBody(o, r.Config, bins))
		fmt.Fprintf(&s, "config_end %s %s $rc %s\n", r.Config, c.cgroups, quote(c.cgroup))
	}
	fmt.Fprintf(&s, "$B poweroff -f\n")
	return s.String()
}

// configBody runs in a subshell of its own (its variables and cgroup are
// the configuration's): the configuration's user and cgroup, then each
// test binary in its package's source directory, as the configuration's
// uid. It exits 0 when every binary passed, 125 when the configuration
// could not be made.
func configBody(o options, config string, bins []testBinary) string {
	var s strings.Builder
	c := configs[config]
	require := "all"
	for _, d := range c.absent {
		require += ",-" + d
	}
	fmt.Fprintf(&s, "export EXECBOX_TEST_REQUIRE=%s\n", require)
	if c.cgroup != "" {
		s.WriteString(cgroupScript(c))
	}
	as := ""
	if uid := c.uid; uid != 0 {
		fmt.Fprintf(&s, "export XDG_RUNTIME_DIR=/run/user/%d\n", uid)
		fmt.Fprintf(&s, "mkdir -p $XDG_RUNTIME_DIR && chown %d:%d $HOME $XDG_RUNTIME_DIR && chmod 700 $XDG_RUNTIME_DIR || exit 125\n", uid, uid)
		if c.subids {
			fmt.Fprintf(&s, "echo '%d:200000:65536' > /etc/subuid; echo '%d:200000:65536' > /etc/subgid\n", uid, uid)
		}
		// util-linux's setpriv, by path: busybox sh prefers its own applet,
		// which cannot change uids.
		as = fmt.Sprintf("/usr/bin/setpriv --reuid=%d --regid=%d --clear-groups -- ", uid, uid)
	}
	fmt.Fprintf(&s, "echo \"vm: %s: uid $(%sid -u), cgroup $(cat /proc/self/cgroup | tr '\\n' ' ')\"\n", config, as)
	fmt.Fprintf(&s, "rc=0\n")
	for _, b := range bins {
		// Below the VM's bound, so that a hung test panics with its stacks
		// before the VM is killed.
		args := []string{guestWork + "/bin/" + filepath.Base(b.Path), "-test.v", "-test.count=1", "-test.timeout=" + (o.Timeout * 9 / 10).String()}
		// The tests of the host kind (selection), unless a -run pattern
		// chooses others.
		run, skip, any := selected(b.Rel, config)
		if b.Run != "" || o.Run != "" {
			run, skip, any = cmp.Or(b.Run, o.Run), "", true
		}
		if !any {
			fmt.Fprintf(&s, "echo %s\n", quote(pkgMarker+b.Pkg+": no test of this host kind"))
			continue
		}
		if run != "" {
			args = append(args, "-test.run="+run)
		}
		if skip = strings.Trim(skip+"|"+o.Skip, "|"); skip != "" {
			args = append(args, "-test.skip="+skip)
		}
		for i := range args {
			args[i] = quote(args[i])
		}
		fmt.Fprintf(&s, "echo %s\n", quote(pkgMarker+b.Pkg))
		fmt.Fprintf(&s, "(cd %s && exec %s%s) </dev/null 2>&1\n", quote(b.Dir), as, strings.Join(args, " "))
		fmt.Fprintf(&s, "r=$?; echo \"%s%s exit $r\"; [ $r -eq 0 ] || rc=1\n", pkgEndMarker, b.Pkg)
	}
	fmt.Fprintf(&s, "exit $rc\n")
	return s.String()
}

// cgroupScript makes c's cgroup as systemd would and moves the shell that
// runs it (so the tests) into it; guest.sh's config_end removes it.
func cgroupScript(c config) string {
	var s strings.Builder
	deleg := delegatedAt(c.cgroup)
	dir := "/sys/fs/cgroup"
	var made []string
	for _, d := range strings.Split(c.cgroup, "/") {
		// On the way down to a unit with Delegate=yes (a service, or the
		// scope of `systemd-run --user --scope -p Delegate=yes`), systemd
		// (the user's manager below user@UID.service) enables the
		// controllers for the directory below.
		fmt.Fprintf(&s, "echo '+memory +pids +cpu' > %s/cgroup.subtree_control || exit 125\n", dir)
		dir += "/" + d
		made = append(made, dir)
		fmt.Fprintf(&s, "mkdir -p %s || exit 125\n", dir)
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
	// "0": the writing process, this subshell (its $$ is the script's).
	fmt.Fprintf(&s, "echo 0 > %s/cgroup.procs || exit 125\n", dir)
	return s.String()
}

// quote single-quotes s for sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

const (
	pkgMarker    = "vm: package "
	pkgEndMarker = "vm: end of "
	// configMarker starts guest.sh's lines "vm: config NAME begin" and
	// "vm: config NAME end RC".
	configMarker = "vm: config "
)

// result is one configuration's outcome.
type result struct {
	Config   string
	Duration time.Duration // from its start in the guest to its end
	Err      error         // the configuration could not run to the end
	Exit     int           // the guest's status: 0 when every binary passed

	Passed, Failed, Skipped int
	Failures                []failure // failing tests, in order
	// Host are the problems of the configuration's host, outside the
	// tests (guest.sh's "problem"): what its tests left behind, a
	// cgroup hierarchy that would not mount.
	Host []string
	// Stalled says why a first boot was given up (errStalled), if it was.
	Stalled  string
	pkgExits []string // "pkg exit N" per binary

	// Walls are the top-level tests' wall times, as the host saw them
	// (go test's own count a parent's parallel subtests out).
	Walls   []wall
	started time.Time // of the top-level test running

	ended bool              // the guest wrote its status
	begun time.Time         // when the guest said it began
	first map[string]string // test -> its first log line
	cur   string
}

// wall is a top-level test's wall time.
type wall struct {
	Test string
	D    time.Duration
}

// Slowest lists the configuration's n slowest top-level tests.
func (r *result) Slowest(n int) string {
	w := slices.Clone(r.Walls)
	slices.SortStableFunc(w, func(a, b wall) int { return cmp.Compare(b.D, a.D) })
	var s []string
	for _, x := range w[:min(n, len(w))] {
		s = append(s, fmt.Sprintf("%s %s", x.Test, x.D.Round(time.Second)))
	}
	return strings.Join(s, ", ")
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

// console reads a guest's console: each line goes to out prefixed with
// the configuration running (the guest's name between configurations),
// and to that configuration's result.
type console struct {
	guest   string
	results []*result
	start   time.Time
	cur     *result
	booted  bool
}

// scan copies the console to out, line by line, counting verdicts and
// timing the configurations as it goes.
func (c *console) scan(in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		prefix := c.guest
		if c.cur != nil {
			prefix = c.cur.Config
		}
		fmt.Fprintf(out, "[%s] %s\n", prefix, line)
		c.line(line, out)
	}
	if c.cur != nil {
		c.cur.Duration = time.Since(c.cur.begun)
	}
	fmt.Fprintf(out, "vm: %s: %s in all, boot included\n", c.guest, time.Since(c.start).Round(time.Second))
}

func (c *console) line(line string, out io.Writer) {
	if rest, ok := strings.CutPrefix(line, configMarker); ok {
		f := strings.Fields(rest)
		i := slices.IndexFunc(c.results, func(r *result) bool { return len(f) > 1 && r.Config == f[0] })
		if i >= 0 {
			r := c.results[i]
			switch f[1] {
			case "begin":
				if !c.booted {
					c.booted = true
					fmt.Fprintf(out, "vm: %s: booted in %s\n", c.guest, time.Since(c.start).Round(time.Second))
				}
				r.begun = time.Now()
				r.first = map[string]string{}
				c.cur = r
			case "end":
				r.Duration = time.Since(r.begun)
				c.cur = nil
			}
			return
		}
	}
	if c.cur != nil {
		c.cur.line(line, time.Now())
	}
}

func (r *result) line(line string, now time.Time) {
	if m := currentRE.FindStringSubmatch(line); m != nil {
		r.cur = m[1]
		if strings.HasPrefix(line, "=== RUN") && !strings.Contains(m[1], "/") {
			r.started = now
		}
		return
	}
	if m := verdictRE.FindStringSubmatch(line); m != nil {
		if line[0] == '-' && !r.started.IsZero() { // a top-level test
			r.Walls = append(r.Walls, wall{m[2], now.Sub(r.started)})
			r.started = time.Time{}
		}
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
	if rest, ok := strings.CutPrefix(line, "vm: "+r.Config+": host: "); ok {
		r.Host = append(r.Host, rest)
		return
	}
	if r.cur != "" && r.first != nil && logRE.MatchString(line) {
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
	} else if len(r.Host) > 0 {
		s += fmt.Sprintf("; its host: %s (%d problems in all)", r.Host[0], len(r.Host))
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
	for _, h := range r.Host {
		out = append(out, fmt.Sprintf("vm: %s: host: %s", r.Config, h))
	}
	return out
}
