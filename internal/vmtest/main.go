// Command vmtest runs execbox's sandbox test suites inside a VM booted from
// Debian's stock kernel (`make test-vm`), once per host configuration:
//
//	v2        cgroup2 mounted with nsdelegate on /sys/fs/cgroup, as root
//	v1        cgroup v1 hierarchies (cpu, cpuacct, memory, pids, ...), as root
//	rootless  cgroup2 as in v2, tests run as uid 1000
//	v2-delegated        as v2, tests start in a systemd-like Delegate=yes service cgroup
//	rootless-delegated  as rootless, tests start in a delegated user@1000.service scope
//
// The test binaries are built on the host (go test -c) from -src, the
// host's root is shared read-only into the guest over 9p with tmpfs over
// the writable places, and each binary runs with EXECBOX_TEST_REQUIRE=all.
// Guest output streams to stdout; the exit status is non-zero when any
// configuration failed or could not run (no qemu, no kernel). A guest that
// outlives -timeout is killed. See VM.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.Src, "src", ".", "source tree (module root) whose tests run")
	configs := flag.String("configs", "v2 v1 rootless v2-delegated rootless-delegated", "configurations to run, space or comma separated")
	pkgs := flag.String("pkgs", "", "packages whose tests run, relative to -src (default: those of selection, "+strings.Join(defaultPkgs(), " ")+")")
	flag.StringVar(&o.Run, "run", "", "-test.run pattern passed to every test binary")
	flag.StringVar(&o.Skip, "skip", "", "-test.skip pattern passed to every test binary")
	flag.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound on each configuration (a guest's is this times its configurations), boot included")
	flag.DurationVar(&o.Stall, "stall", 8*time.Minute, "a guest silent that long is killed and booted again, once (0: never)")
	flag.StringVar(&o.CacheDir, "cache", "/var/cache/execbox-vm", "where kernels are cached, by package version")
	flag.BoolVar(&o.Race, "race", false, "build the test binaries with -race (slow under emulation)")
	flag.IntVar(&o.CPUs, "cpus", 1, "each guest's vCPUs (two one-vCPU guests do more than one two-vCPU guest: VM.md)")
	flag.IntVar(&o.VMs, "vms", 2, "guests at once, the configurations split among them, each guest running its share in one boot")
	flag.IntVar(&o.MemMiB, "mem", 4096, "each guest's memory in MiB")
	flag.Float64Var(&o.TimeScale, "timescale", 5, "factor stretching the tests' deadlines in the guest (EXECBOX_TEST_TIMESCALE)")
	flag.StringVar(&o.Tmp, "tmp", "ext4", "the guest's /tmp (TMPDIR): ext4 (a Debian 12 host's, idmappable on 6.1) or tmpfs (idmappable from 6.3)")
	table := flag.Bool("selection", false, "print which tests run on which configurations, as VM.md shows it, and exit")
	flag.Parse()
	if *table {
		fmt.Print(selectionTable())
		return
	}
	o.Configs = fields(*configs)
	o.Pkgs = fields(*pkgs)
	if len(o.Pkgs) == 0 {
		o.Pkgs = defaultPkgs()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := runAll(ctx, o, os.Stdout)
	fmt.Println()
	fmt.Println("vm: results")
	ok := err == nil
	for _, r := range results {
		for _, l := range r.FailureLines() {
			fmt.Println(l)
		}
	}
	for _, r := range results {
		if len(r.Walls) > 0 {
			fmt.Printf("vm: %s: slowest: %s\n", r.Config, r.Slowest(8))
		}
	}
	for _, r := range results {
		fmt.Println(r.Line())
		ok = ok && r.OK()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vm: %v\n", err)
	}
	if !ok {
		os.Exit(1)
	}
}

func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
}
