package main

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// The tests a guest runs are those whose behaviour depends on the host
// kind: its cgroups (v1, v2, a delegated subtree, none), its user
// namespaces (a uid range, subordinate ids, one uid), the mounts and
// idmaps they allow, and the stock kernel's features. The conformance
// suite is the core: every sandbox operation through each kind's
// cgroups and user namespace. A test that touches none of these (a
// parser, a race in the host's own code, an image suite whose kernel
// parts other tests cover) runs once, in make test on the host, not five
// times under emulation.
//
// selection lists every test function of the packages the VM runs by
// default, each with where it runs and why; TestSelectionCoversEveryTest
// fails on a test added to those packages without an entry, so that the
// choice is made, and written down, for each new test. VM.md repeats the
// list for readers.
var selection = map[string]map[string]where{
	"runtimes/sandbox": {
		// The core.
		"TestConformance": {everyKind, "every operation of the runtime through each kind's cgroups and user namespace"},
		"TestSessions":    {everyKind, "sessions' processes in each kind's cgroups and user namespace"},

		// cgroups: layout, limits, cleanup.
		"TestIsolationCgroups":          {everyKind, "escaping the cgroup on each layout"},
		"TestAgentSurvivesBinaryOutput": {everyKind, "the agent's own memory-limited cgroup, where there is one"},
		"TestSweep":                     {everyKind, "a new runtime removes a dead one's cgroups and state"},
		"TestIsolation":                 {everyKind, "fork bomb and OOM against each layout's limits (root only: skips rootless)"},

		// user namespaces and what the kind's uid can do.
		"TestIsolationEveryHost":                    {everyKind, "capabilities, host files and network, set-id files, under each kind's uid mapping"},
		"TestAgentOutlivesKillAll":                  {everyKind, "the agent's own uid exists only with a uid range or subordinate ids"},
		"TestAgentResumesAfterStop":                 {everyKind, "rootless with one uid, the command can stop the agent; the init resumes it"},
		"TestIsolationInheritedDescriptor":          {everyKind, "the init's start differs rootless (newuidmap)"},
		"TestFilesOnlyTheUsersPermissions":          {everyKind, "the agent's capabilities under each uid mapping"},
		"TestCheckPrivateDir":                       {everyKind, "its checks differ for root and an ordinary user"},
		"TestImageRootless":                         {everyKind, "rootless refuses images; root kinds have them"},
		"TestInotifyInstancesNotHostRoots":          {everyKind, "who owns the user namespace (root only: skips rootless)"},
		"TestMqueueBytesNotHostRoots":               {everyKind, "who owns the user namespace (root only: skips rootless)"},
		"TestUIDRangesMachineWide":                  {everyKind, "uid ranges (root only: skips rootless)"},
		"TestTempWorkspaceUnprivileged":             {everyKind, "owners of a temporary workspace under each uid mapping (root only)"},
		"TestGivenWorkspaceOwner":                   {everyKind, "idmapped given workspaces (root only)"},
		"TestSystemWorkspaceRefused":                {everyKind, "root's system directories (root only)"},
		"TestHostStateFiles":                        {everyKind, "the state directory: /run as root, $XDG_RUNTIME_DIR rootless"},
		"TestWorkspaceQuota":                        {everyKind, "the workspace's tmpfs, mounted in each kind's user namespace"},
		"TestWorkspaceSnapshotSparse":               {everyKind, "the agent reads the workspace as the command user of each mapping"},
		"TestWorkspaceSnapshotIncomplete":           {everyKind, "the agent reads the workspace as the command user of each mapping"},
		"TestGivenWorkspaceSymlinkRace":             {everyKind, "open_tree and idmapped mounts of a given workspace (root only)"},
		"TestIsolationSeccomp":                      {everyKind, "the filter depends on the cgroup version (clone3: v2 and delegated rootless), the users inside on the mapping"},
		"TestIsolationSeccomp/ordinary-programs/go": {onceRoot, "a cold go build (minutes under emulation): the filter's variants differ in clone3 alone, which Go's toolchain never calls (os/exec uses clone unless it places the child in a cgroup); refused-calls and the python and gcc programs (glibc's clone3) check both variants on every kind"},

		// Kernel features (the stock 6.1 kernel, root): once.
		"TestImageRoot":             {onceRoot, "overlayfs over idmapped image layers, on the stock kernel"},
		"TestImageShellWithoutBash": {onceRoot, "an image's root on the stock kernel"},
		"TestImageEnv":              {onceRoot, "an image's root on the stock kernel"},
		"TestImageUser":             {onceRoot, "an image's root on the stock kernel"},
		"TestImageHostileLinks":     {onceRoot, "mounts over an image's symlinks, on the stock kernel"},
		"TestImageRootSize":         {onceRoot, "the size of the root's upper tmpfs, on the stock kernel"},
		"TestImageNotFound":         {onceRoot, "Create's cleanup with images"},
		"TestRedTeamEtcTempSymlink": {onceRoot, "the init's /etc writes before pivot_root, on the stock kernel"},

		// The host's own code: make test.
		"TestParseCgroupMounts":        {hostOnly, "a parser"},
		"TestLookupSubIDs":             {hostOnly, "a parser of /etc/subuid"},
		"TestSubIDMap":                 {hostOnly, "arithmetic"},
		"TestAssetSourceSymlinkRace":   {hostOnly, "a race in the host's reading of assets (minutes under emulation); the sandbox only writes"},
		"TestToolchainInStandardPlace": {hostOnly, "PATH inside, the same on every kind; its probe starts every toolchain (slow under emulation)"},
		"TestImageConformance":         {hostOnly, "minutes in a guest (its image built from the host's Python over 9p); the image tests above cover the kernel"},
		"TestImageCommit":              {hostOnly, "the image store's commit, host code"},
		"TestImageFromRegistry":        {hostOnly, "a pull from a registry on loopback, host code"},
		"TestRedTeamHugePasswd":        {hostOnly, "the host process's reading of an image's passwd"},
		"TestStreams":                  {hostOnly, "the agent's output path (pipes, flow control, windows), the same code on every kind; 50 writers on busy CPUs take minutes under emulation"},
		"TestCreateOnFullDisk":         {hostOnly, "Create's undo steps on a full disk, host code (a tmpfs it mounts as root)"},
		"TestSweepUnrecorded":          {hostOnly, "the sweep's removal of unrecorded temporary directories, host code"},
	},
	"runtimes/sandbox/internal/cgroups": {
		"TestSandboxLimits": {everyKind, "the cgroup package on each layout"},
		"TestChild":         {everyKind, "the cgroup package on each layout"},
	},
}

// defaultPkgs are the packages the VM runs unless -pkgs names others:
// those with a selection.
func defaultPkgs() []string {
	var p []string
	for _, dir := range slices.Sorted(maps.Keys(selection)) {
		p = append(p, "./"+dir)
	}
	return p
}

// where is a test's place in the VM matrix.
type where struct {
	on  []string // configurations it runs on; none: make test only
	why string
}

var (
	everyKind = []string{"v2", "v1", "v2-delegated", "rootless", "rootless-delegated"}
	// onceRoot is a root kind: what depends on the kernel but not on the
	// cgroup layout runs there.
	onceRoot = []string{"v2"}
	hostOnly []string
)

// selected returns the -test.run and -test.skip patterns of pkg (a
// directory relative to the module root) on config, and false when none
// of its tests runs there. A package without a selection runs whole.
func selected(pkg, config string) (run, skip string, any bool) {
	tests, ok := selection[pkg]
	if !ok {
		return "", "", true
	}
	var runs, skips []string
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		on := slices.Contains(tests[name].on, config)
		top, sub, nested := strings.Cut(name, "/")
		switch {
		case !nested && on:
			runs = append(runs, regexp.QuoteMeta(top))
		case nested && !on:
			// One alternative of -test.skip per subtest: ^A$/^b$|^C$/^d$.
			var elems []string
			for _, e := range append([]string{top}, strings.Split(sub, "/")...) {
				elems = append(elems, "^"+regexp.QuoteMeta(e)+"$")
			}
			skips = append(skips, strings.Join(elems, "/"))
		}
	}
	if len(runs) == 0 {
		return "", "", false
	}
	return "^(" + strings.Join(runs, "|") + ")$", strings.Join(skips, "|"), true
}

// selectionTable is the selection as VM.md shows it (go run
// ./internal/vmtest -selection prints it): a Markdown table per package.
func selectionTable() string {
	var b strings.Builder
	for i, pkg := range slices.Sorted(maps.Keys(selection)) {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "`%s`:\n\n| test | runs on | why |\n|---|---|---|\n", pkg)
		tests := selection[pkg]
		names := slices.Sorted(maps.Keys(tests))
		// Those on every kind first, then fewer, then the host's.
		slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(len(tests[b].on), len(tests[a].on)) })
		for _, name := range names {
			w := tests[name]
			on := strings.Join(w.on, ", ")
			switch {
			case len(w.on) == 0:
				on = "make test only"
			case slices.Equal(w.on, everyKind):
				on = "every kind"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, on, w.why)
		}
	}
	return b.String()
}
