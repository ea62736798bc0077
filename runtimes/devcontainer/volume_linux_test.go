package devcontainer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/devcontainer"
)

// testVolume makes a named volume in the engine as another project or
// service would (not execbox's, not labelled for any folder), with a
// file in it, and removes it at the end of the test.
func testVolume(t *testing.T, name, file string) {
	t.Helper()
	dc := engine(t)
	ctx := t.Context()
	if _, err := dc.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: map[string]string{testLabel: "1"}}); err != nil {
		t.Fatal(err)
	}
	removeVolumeAtEnd(t, name)
	res, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: shared.tag, Entrypoint: []string{"/bin/sh", "-c", "echo secret > /v/" + file}, Labels: map[string]string{testLabel: "1"}},
		HostConfig: &container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: "/v"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := dc.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	wait := dc.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{})
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			t.Fatalf("writing into volume %s: exit %d", name, r.StatusCode)
		}
	case err := <-wait.Error:
		t.Fatal(err)
	}
}

// removeVolumeAtEnd removes the named volume when the test ends.
func removeVolumeAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		engine(t).VolumeRemove(context.Background(), name, client.VolumeRemoveOptions{Force: true})
	})
}

// refused creates a sandbox of dir that should be refused, closing it if
// it was not, and returns Create's error.
func refused(t *testing.T, rt *devcontainer.Runtime, dir string) error {
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err == nil {
		sb.Close()
	}
	return err
}

// TestVolumeMountsBounded is the red team's finding of issue 22: a
// command could edit devcontainer.json to mount any named volume of the
// engine read-write into the folder's next container (mounts or
// workspaceMount of type volume). Only volumes execbox made for the
// folder, or named in allowed_volumes, may be mounted.
func TestVolumeMountsBounded(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{})
	uniq := strconv.FormatInt(time.Now().UnixNano(), 36)
	victim := "execbox-test-victim-" + uniq
	testVolume(t, victim, "db")
	ctx := t.Context()

	// Another project's and another service's volumes: refused, nothing
	// started.
	for _, tc := range []struct{ name, json, field string }{
		{"mounts", fmt.Sprintf(`{"image": %q, "mounts": ["source=%s,target=/loot,type=volume"]}`, shared.tag, victim), "devcontainer.mounts[0]"},
		{"mounts object", fmt.Sprintf(`{"image": %q, "mounts": [{"type": "volume", "source": %q, "target": "/loot"}]}`, shared.tag, victim), "devcontainer.mounts[0]"},
		{"mounts default type", fmt.Sprintf(`{"image": %q, "mounts": ["source=%s,target=/loot"]}`, shared.tag, victim), "devcontainer.mounts[0]"},
		{"workspaceMount", fmt.Sprintf(`{"image": %q, "workspaceMount": "source=%s,target=/workspaces/w,type=volume", "workspaceFolder": "/workspaces/w"}`, shared.tag, victim), "devcontainer.workspaceMount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := project(t, tc.json, map[string]string{})
			sb, err := rt.Create(ctx, execbox.Spec{Workspace: dir})
			if err == nil {
				out := shOut(t, sb, "cat /loot/db /workspaces/w/db 2>&1; true")
				sb.Close()
				t.Fatalf("Create mounted volume %s (read %q)", victim, out)
			}
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, execbox.ErrPermission) || !strings.Contains(err.Error(), victim) {
				t.Errorf("Create: %v\nwant ErrPermission naming %s and the volume", err, tc.field)
			}
			if left := containersOf(t, dir); len(left) != 0 {
				t.Errorf("a refused Create left %d containers", len(left))
			}
		})
	}

	// A volume the file names first is made for its folder, and the
	// folder's next container finds it with what the last one wrote.
	// Another folder naming it is refused.
	own := "execbox-test-own-" + uniq
	removeVolumeAtEnd(t, own)
	ownJSON := fmt.Sprintf(`{"image": %q, "mounts": ["source=%s,target=/cache,type=volume"]}`, shared.tag, own)
	dir := project(t, ownJSON, map[string]string{})
	for i, script := range []string{"echo kept > /cache/f", "cat /cache/f"} {
		sb, err := rt.Create(ctx, execbox.Spec{Workspace: dir})
		if err != nil {
			t.Fatalf("Create %d with its own volume: %v", i, err)
		}
		out := shOut(t, sb, script)
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 1 && out != "kept\n" {
			t.Errorf("the folder's volume holds %q, want what its last container wrote", out)
		}
	}
	v, err := engine(t).VolumeInspect(ctx, own, client.VolumeInspectOptions{})
	if err != nil || v.Volume.Labels["dev.execbox.devcontainer.folder"] != dir {
		t.Errorf("volume %s: %v, labels %v; want it labelled for %s", own, err, v.Volume.Labels, dir)
	}
	other := project(t, ownJSON, map[string]string{})
	if err := refused(t, rt, other); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("another folder mounting %s's volume: %v, want ErrPermission", dir, err)
	}

	// A refused mount makes no volume of the others.
	fresh := "execbox-test-fresh-" + uniq
	removeVolumeAtEnd(t, fresh)
	both := project(t, fmt.Sprintf(`{"image": %q, "mounts": ["source=%s,target=/a,type=volume", "source=%s,target=/b,type=volume"]}`, shared.tag, fresh, victim), map[string]string{})
	if err := refused(t, rt, both); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("Create with an allowed and a refused volume: %v, want ErrPermission", err)
	}
	if _, err := engine(t).VolumeInspect(ctx, fresh, client.VolumeInspectOptions{}); err == nil {
		t.Errorf("a refused Create made volume %s", fresh)
	}

	// The operator's devcontainer.json (runtimes.devcontainer.config,
	// outside the workspace) names the volumes it wants: temporary
	// workspaces, a new folder each, share them.
	opFile := filepath.Join(shared.dir, "volumes-"+uniq+".json")
	if err := os.WriteFile(opFile, []byte(fmt.Sprintf(`{"image": %q, "mounts": ["source=%s,target=/data,type=volume"]}`, shared.tag, victim)), 0o644); err != nil {
		t.Fatal(err)
	}
	operator := newRuntime(t, devcontainer.Options{Config: opFile})
	for i := range 2 {
		sb, err := operator.Create(ctx, execbox.Spec{})
		if err != nil {
			t.Fatalf("Create %d with the operator's devcontainer.json: %v", i, err)
		}
		if out := shOut(t, sb, "cat /data/db"); out != "secret\n" {
			t.Errorf("the operator's volume holds %q", out)
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// runtimes.devcontainer.allowed_volumes lets the file name one.
	allowed := newRuntime(t, devcontainer.Options{AllowedVolumes: []string{victim}})
	dir = project(t, fmt.Sprintf(`{"image": %q, "mounts": ["source=%s,target=/data,type=volume"]}`, shared.tag, victim), map[string]string{})
	sb, err := allowed.Create(ctx, execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatalf("Create with an allowed volume: %v", err)
	}
	if out := shOut(t, sb, "cat /data/db"); out != "secret\n" {
		t.Errorf("allowed volume holds %q", out)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}
