//go:build linux

package docker_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/docker"
	"github.com/moby/moby/client"
)

// TestCreateOnFullStateDir runs Create with the state directory on a
// full tmpfs, at each step that writes there (the sandbox's directory,
// then the agent's configuration): it must fail with
// ErrResourceExhausted, leave the tmpfs as it was and make no container.
func TestCreateOnFullStateDir(t *testing.T) {
	setup(t)
	mnt := testutil.SmallTmpfs(t, 1<<20, 64)
	fill := filepath.Join(mnt, "fill")
	rt := newRuntime(t, docker.Options{StateDir: mnt})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	if err := os.Mkdir(fill, 0o700); err != nil {
		t.Fatal(err)
	}
	before := testutil.Tree(t, mnt)
	dc := engine(t)
	for _, kind := range []testutil.Filling{testutil.Inodes, testutil.Blocks} {
		filler := testutil.FillTmpfs(t, mnt, fill, kind, 0)
		sb, err := rt.Create(t.Context(), execbox.Spec{Labels: map[string]string{"fulldisk": string(kind)}})
		filler()
		if err == nil {
			sb.Close()
			t.Fatalf("Create succeeded with no %s free in its state directory", kind)
		}
		t.Logf("no %s free: %v", kind, err)
		if !errors.Is(err, execbox.ErrResourceExhausted) {
			t.Errorf("no %s free: Create = %v; want ErrResourceExhausted", kind, err)
		}
		testutil.SameTree(t, fmt.Sprintf("after a Create failed with no %s free", kind), before, testutil.Tree(t, mnt))
		list, err := dc.ContainerList(t.Context(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "dev.execbox.state")})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Items {
			if strings.HasPrefix(c.Labels["dev.execbox.state"], mnt+"/") {
				t.Errorf("no %s free: Create left container %.12s", kind, c.ID)
			}
		}
	}
}
