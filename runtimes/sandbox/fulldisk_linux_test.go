//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// privateUIDBase is the first host uid of the ranges of
// TestCreateOnFullDisk's sandboxes: above every range of the default
// base, so that its slot registry of its own never hands another
// process's sandbox's uids out.
const privateUIDBase = 1 << 31

// TestCreateOnFullDisk is the regression test of two live sandboxes
// given the same uid range, and of the leftovers of creates failing on a
// full disk. With the state directory, the uid slots and TempDir on one
// small tmpfs, it fills the tmpfs so that Create runs out of inodes, then
// of blocks, one step further each time, until Create succeeds. Every
// failure must be ErrResourceExhausted and leave the tmpfs as it was: the
// live sandbox's slot still its own, no state directory, slot,
// workspace or init root left, and no init process.
func TestCreateOnFullDisk(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2)
	mnt := testutil.SmallTmpfs(t, 4<<20, 512)
	opts := sandbox.Options{
		StateDir: filepath.Join(mnt, "state"),
		TempDir:  filepath.Join(mnt, "tmp"),
		UIDBase:  privateUIDBase,
		Logger:   testutil.Logger(t),
	}
	if err := os.Mkdir(opts.TempDir, 0o711); err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(mnt, "fill")
	if err := os.Mkdir(fill, 0o700); err != nil {
		t.Fatal(err)
	}
	rt := sandbox.NewWithSlots(opts, filepath.Join(opts.StateDir, ".slots"))
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with root, user namespaces and cgroups: %s", h.Detail)
	}
	live, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	before := testutil.Tree(t, mnt)
	children := childPIDs(t)

	for _, kind := range []testutil.Filling{testutil.Inodes, testutil.Blocks} {
		t.Run(string(kind), func(t *testing.T) {
			for free := 0; ; free++ {
				if free > 64 {
					t.Fatalf("Create still fails with %d %s free", free, kind)
				}
				filler := testutil.FillTmpfs(t, mnt, fill, kind, free)
				sb, err := rt.Create(t.Context(), execbox.Spec{})
				filler()
				if err == nil {
					if free == 0 {
						t.Fatalf("Create succeeded with no %s free: the tmpfs is not where it writes", kind)
					}
					t.Logf("Create succeeded with %d %s free", free, kind)
					if err := sb.Close(); err != nil {
						t.Error(err)
					}
					testutil.SameTree(t, "after Close", before, testutil.Tree(t, mnt))
					return
				}
				t.Logf("%d %s free: %v", free, kind, err)
				if !errors.Is(err, execbox.ErrResourceExhausted) {
					t.Errorf("%d %s free: Create = %v; want ErrResourceExhausted", free, kind, err)
				}
				testutil.SameTree(t, fmt.Sprintf("after a Create failed with %d %s free", free, kind), before, testutil.Tree(t, mnt))
				if got := childPIDs(t); !slices.Equal(got, children) {
					t.Errorf("%d %s free: processes %v left by a failed Create (had %v)", free, kind, got, children)
				}
				if res, err := live.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
					t.Fatalf("the live sandbox broke: %v, %v", res, err)
				}
			}
		})
	}
}

// childPIDs are the PIDs of this process's children (the inits of its
// sandboxes), sorted.
func childPIDs(t *testing.T) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, _ := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "children"))
		out = append(out, strings.Fields(string(b))...)
	}
	slices.Sort(out)
	return out
}
