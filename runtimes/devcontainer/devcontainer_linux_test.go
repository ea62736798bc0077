package devcontainer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/devcontainer"
	"github.com/execbox/execbox/runtimes/docker"
)

// shared is what the tests share for the life of the test binary: a
// directory (the static agent), the tools image loaded into the engine
// (tag: root by default, with a user "dev" 4321:4322 in its passwd), and
// the images the runtime built. TestMain removes them all.
var shared struct {
	once  sync.Once
	dir   string
	agent string
	tag   string
	err   error
}

// testLabel marks every container and image the tests make, so that
// TestMain finds what a failed test left.
const testLabel = "dev.execbox.test"

func TestMain(m *testing.M) {
	code := testutil.LeakCheck(m.Run())
	ctx := context.Background()
	if dc, err := client.New(client.FromEnv); err == nil {
		owner := ""
		if d, err := docker.New(docker.Options{}); err == nil {
			owner = d.Owner()
		}
		if list, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "dev.execbox.runtime=devcontainer")}); err == nil {
			for _, c := range list.Items {
				if shared.dir != "" && strings.HasPrefix(c.Labels["devcontainer.local_folder"], shared.dir) || c.Labels["dev.execbox.owner"] == owner {
					dc.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
				}
			}
		}
		if list, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", testLabel)}); err == nil {
			for _, c := range list.Items {
				dc.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
		// Volumes the tests made, and those the runtime made for their
		// folders.
		if list, err := dc.VolumeList(ctx, client.VolumeListOptions{}); err == nil {
			for _, v := range list.Items {
				if v.Labels[testLabel] != "" || shared.dir != "" && strings.HasPrefix(v.Labels["dev.execbox.devcontainer.folder"], shared.dir+"/") {
					dc.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
				}
			}
		}
		if list, err := dc.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", testLabel)}); err == nil {
			for _, img := range list.Items {
				dc.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			}
		}
		dc.Close()
	}
	if shared.tag != "" {
		_ = imagetest.DockerRemove(ctx, shared.tag)
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// setup builds the static agent and loads the image, once.
func setup(t testing.TB) {
	t.Helper()
	testutil.Require(t, testutil.Root, testutil.Docker, testutil.StaticAgent)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "execbox-devcontainer-test-"); shared.err != nil {
			return
		}
		if shared.agent, shared.err = testutil.StaticExecbox(shared.dir); shared.err != nil {
			return
		}
		img, err := toolsImage()
		if err != nil {
			shared.err = err
			return
		}
		d, err := img.Digest()
		if err != nil {
			shared.err = err
			return
		}
		tag := "execbox-test/devcontainer-tools:" + d.Hex[:12]
		if shared.err = imagetest.DockerLoad(context.Background(), img, tag); shared.err == nil {
			shared.tag = tag
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
}

// toolsImage is the tools image with a user dev (4321:4322) in its
// passwd, root by default, and the test's label (so that what is built
// from it carries it too).
func toolsImage() (v1.Image, error) {
	img, err := imagetest.ToolImage()
	if err != nil {
		return nil, err
	}
	if img, err = imagetest.WithUser(img, "dev", 4321, 4322); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.User = ""
	cf.Config.Labels = map[string]string{testLabel: "1"}
	return mutate.ConfigFile(img, cf)
}

// newRuntime is a devcontainer runtime with the test's agent.
func newRuntime(t testing.TB, opts devcontainer.Options) *devcontainer.Runtime {
	t.Helper()
	setup(t)
	if opts.AgentBinary == "" {
		opts.AgentBinary = shared.agent
	}
	if opts.Pull == "" {
		opts.Pull = "never" // no registry is reachable
	}
	rt, err := devcontainer.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("devcontainer runtime unavailable: %s", h.Detail)
	}
	return rt
}

func engine(t *testing.T) *client.Client {
	t.Helper()
	dc, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	return dc
}

// project makes a folder with .devcontainer/devcontainer.json (and more
// files, by relative name), under the shared directory.
func project(t testing.TB, devcontainerJSON string, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp(shared.dir, "project-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if devcontainerJSON != "" {
		files[".devcontainer/devcontainer.json"] = devcontainerJSON
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A developer's folder: theirs, and their uid is the image's user's
	// (as the reference tools arrange with updateRemoteUserUID).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4321, 4322); err != nil {
		t.Fatal(err)
	}
	return dir
}

// containersOf lists the containers (running or not) labelled with the
// folder.
func containersOf(t *testing.T, dir string) []container.Summary {
	t.Helper()
	list, err := engine(t).ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "devcontainer.local_folder="+dir)})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

type containerIDer interface{ ContainerID() string }

// checkGone checks that a closed sandbox's container is gone, and so
// are its temporary workspace.
func checkGone(t *testing.T, sb execbox.Sandbox) {
	t.Helper()
	cid := sb.(containerIDer).ContainerID()
	if _, err := engine(t).ContainerInspect(context.Background(), cid, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("container %.12s still exists after Close", cid)
	}
}

func shOut(t *testing.T, sb execbox.Sandbox, script string) string {
	t.Helper()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if !res.Success() {
		t.Fatalf("%s: %s: %s", script, res.String(), res.Stderr.Text())
	}
	return res.Stdout.String()
}

// TestConformance: the conformance and session suites, on containers the
// runtime starts from an image (runtimes.devcontainer.config, so that
// the suite's workspaces, given or temporary, need no file of their
// own).
func TestConformance(t *testing.T) {
	setup(t)
	cfg := filepath.Join(shared.dir, "conformance.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"image": %q}`, shared.tag)), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, devcontainer.Options{Config: cfg})
	t.Run("conformance", func(t *testing.T) {
		execboxtest.Run(t, execboxtest.Config{Runtime: rt, Slack: 3 * time.Second, AfterClose: checkGone})
	})
	t.Run("sessions", func(t *testing.T) {
		execboxtest.RunSessions(t, execboxtest.Config{Runtime: rt, Slack: 3 * time.Second, AfterClose: checkGone})
	})
}

// TestStartFromDockerfile: a devcontainer.json in JSONC (comments,
// trailing commas) whose image is built from a Dockerfile; commands run
// as remoteUser in workspaceFolder with containerEnv and remoteEnv (and
// their variables), the mounts are there, the lifecycle commands ran
// once, in order, as remoteUser; the built image is reused; Close
// removes the container.
func TestStartFromDockerfile(t *testing.T) {
	t.Setenv("EXECBOX_DC_TEST", "from-host")
	rt := newRuntime(t, devcontainer.Options{AllowedEnv: []string{"EXECBOX_DC_TEST"}})
	dir := project(t, `{
	// The reference tools' JSONC: comments and trailing commas.
	"name": "test",
	"build": {
		"dockerfile": "Dockerfile", /* relative to this file */
		"args": {"GREETING": "built-with-arg",},
	},
	"workspaceMount": "type=bind,source=${localWorkspaceFolder},target=/src",
	"workspaceFolder": "/src",
	"remoteUser": "dev",
	"containerEnv": {
		"CE": "${localWorkspaceFolderBasename}",
		"LOCAL": "${localEnv:EXECBOX_DC_TEST}",
		"WS": "${containerWorkspaceFolder}",
	},
	"remoteEnv": {"RE": "${containerEnv:CE}-remote"},
	"mounts": [
		"type=volume,target=/cache",
		{"type": "tmpfs", "target": "/scratch"},
	],
	"onCreateCommand": ["sh", "-c", "echo oncreate-$(id -un) >> lifecycle.txt"],
	"postCreateCommand": "echo postcreate-$(id -un)-$(pwd) >> lifecycle.txt",
	"postStartCommand": {"one": ["touch", "started-one"], "two": "touch started-two"},
	"forwardPorts": [8080],
}`, map[string]string{
		".devcontainer/Dockerfile":    "FROM " + shared.tag + "\nARG GREETING\nRUN echo $GREETING > /built\nENV FROM_IMAGE=1\nCOPY . /ctx\n",
		".devcontainer/.dockerignore": "secret*\n",
		".devcontainer/secret.txt":    "not for the image",
		".devcontainer/kept.txt":      "in the image",
	})
	start := time.Now()
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Create with a build took %v", time.Since(start))
	defer checkGone(t, sb)
	defer sb.Close()
	base := filepath.Base(dir)
	got := shOut(t, sb, `id -un; pwd; echo "$CE $LOCAL $WS $RE $FROM_IMAGE"; cat /built; ls /ctx; mount | grep -c -e ' /cache ' -e ' /scratch '; cat lifecycle.txt; ls started-*`)
	want := fmt.Sprintf("dev\n/src\n%s from-host /src %s-remote 1\nbuilt-with-arg\nDockerfile\ndevcontainer.json\nkept.txt\n2\noncreate-dev\npostcreate-dev-/src\nstarted-one\nstarted-two\n", base, base)
	if got != want {
		t.Errorf("in the container:\n%s\nwant\n%s", got, want)
	}
	if sb.Workspace() != "/src" {
		t.Errorf("Workspace() = %q, want /src", sb.Workspace())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "lifecycle.txt")); err != nil || !strings.Contains(string(b), "postcreate-dev") {
		t.Errorf("the workspace on the host: lifecycle.txt = %q, %v", b, err)
	}
	cid := sb.(containerIDer).ContainerID()
	ins, err := engine(t).ContainerInspect(t.Context(), cid, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := ins.Container.Config.Labels
	if labels["devcontainer.local_folder"] != dir || labels["devcontainer.config_file"] != filepath.Join(dir, ".devcontainer/devcontainer.json") {
		t.Errorf("labels %v", labels)
	}
	if img := ins.Container.Config.Image; !strings.HasPrefix(img, "sha256:") {
		t.Errorf("image %q", img)
	}

	// Another sandbox of the folder, while this one is open: the first
	// one's container is its own (removed at its Close), so a second
	// starts, from the image built before (no build).
	start = time.Now()
	sb2, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Create with the image built before took %v", time.Since(start))
	defer checkGone(t, sb2)
	defer sb2.Close()
	if sb2.(containerIDer).ContainerID() == cid {
		t.Error("the second sandbox shares the first one's container")
	}
	imgs, err := engine(t).ImageList(t.Context(), client.ImageListOptions{Filters: make(client.Filters).Add("reference", "execbox-devcontainer").Add("label", testLabel)})
	if err != nil || len(imgs.Items) != 1 {
		t.Errorf("images built for the folder: %d, %v; want 1, reused", len(imgs.Items), err)
	}
	if n := strings.Count(shOut(t, sb2, "cat lifecycle.txt"), "postcreate"); n != 2 {
		t.Errorf("postCreateCommand ran %d times for two containers", n)
	}
}

// TestKeep: with keep, Close leaves the container running and the next
// Create (another runtime, as the next execbox exec would) finds it:
// the lifecycle commands do not run again; the container's Close of a
// found container leaves it running with no agent.
func TestKeep(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{Keep: true})
	dir := project(t, fmt.Sprintf(`{"image": %q, "postCreateCommand": ["sh", "-c", "echo x >> created"], "remoteUser": "dev"}`, shared.tag), map[string]string{})
	dc := engine(t)
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	cid := sb.(containerIDer).ContainerID()
	t.Cleanup(func() {
		dc.ContainerRemove(context.Background(), cid, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	rt2 := newRuntime(t, devcontainer.Options{})
	start := time.Now()
	sb2, err := rt2.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Create in the kept container took %v", time.Since(start))
	if got := sb2.(containerIDer).ContainerID(); got != cid {
		t.Errorf("the second Create is in container %.12s, want the kept %.12s", got, cid)
	}
	if got := shOut(t, sb2, "id -un; cat created"); got != "dev\nx\n" {
		t.Errorf("in the kept container: %q, want the user dev and postCreateCommand run once", got)
	}
	if err := sb2.Close(); err != nil {
		t.Fatal(err)
	}
	checkRunningWithoutAgent(t, dc, cid, 2)
}

// checkRunningWithoutAgent checks that the container runs, with n
// processes (its init and its own process: no agent, nothing a sandbox
// started), and nothing of the sandboxes in /.execbox but the agent
// program.
func checkRunningWithoutAgent(t *testing.T, dc *client.Client, cid string, n int) {
	t.Helper()
	ins, err := dc.ContainerInspect(t.Context(), cid, client.ContainerInspectOptions{})
	if err != nil || !ins.Container.State.Running {
		t.Fatalf("the container after Close: %v %+v", err, ins.Container.State)
	}
	top, err := dc.ContainerTop(t.Context(), cid, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
	if err != nil {
		t.Fatal(err)
	}
	var procs []string
	for _, p := range top.Processes {
		procs = append(procs, strings.Join(p, " "))
	}
	// The keep-alive's sleep comes and goes.
	var left []string
	for _, p := range procs {
		if !strings.HasSuffix(p, "sleep 1") {
			left = append(left, p)
		}
	}
	if len(left) != n {
		t.Errorf("processes in the container after Close: %q, want %d (no agent, nothing a sandbox started)", procs, n)
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(ins.Container.State.Pid) + "/root/.execbox")
	if err != nil || len(ents) != 1 || ents[0].Name() != "agent" {
		t.Errorf("/.execbox after Close: %v, %v; want the agent program only", ents, err)
	}
}

// TestFound: a running container labelled with the folder, made the way
// the reference CLI makes one (its labels and metadata, the folder bound
// at /workspaces/NAME, its own process), is where commands run: as the
// metadata's remoteUser, in the folder's mount, with the container's
// environment; its lifecycle commands are not run again; Close leaves it
// running with no agent.
func TestFound(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{})
	dir := project(t, `{"image": "execbox-test/not-pulled:never", "postCreateCommand": "touch should-not-exist", "features": {"ghcr.io/devcontainers/features/go:1": {}}}`, map[string]string{})
	dc := engine(t)
	target := "/workspaces/" + filepath.Base(dir)
	init := true
	res, err := dc.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config: &container.Config{Image: shared.tag, Entrypoint: []string{"/bin/sh"},
			Cmd: []string{"-c", "echo Container started\ntrap \"exit 0\" 15\nexec \"$@\"\nwhile sleep 1 & wait $!; do :; done", "-"},
			Env: []string{"FROM_CONTAINER=yes"},
			Labels: map[string]string{
				"devcontainer.local_folder": dir,
				"devcontainer.config_file":  filepath.Join(dir, ".devcontainer/devcontainer.json"),
				"devcontainer.metadata":     `[{"remoteUser":"dev","remoteEnv":{"RE":"${containerEnv:FROM_CONTAINER}!"}}]`,
				testLabel:                   "1",
			}},
		HostConfig: &container.HostConfig{Init: &init, NetworkMode: "none",
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: target}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true}) })
	if _, err := dc.ContainerStart(t.Context(), res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Create in a found container took %v", time.Since(start))
	defer sb.Close()
	if got := sb.(containerIDer).ContainerID(); got != res.ID {
		t.Fatalf("the sandbox is in container %.12s, want the found %.12s", got, res.ID)
	}
	want := fmt.Sprintf("dev\n%s\nyes yes!\n", target)
	if got := shOut(t, sb, `id -un; pwd; echo "$FROM_CONTAINER $RE"; test ! -e should-not-exist`); got != want {
		t.Errorf("in the found container: %q, want %q", got, want)
	}
	if _, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	checkRunningWithoutAgent(t, dc, res.ID, 2)

	// A Create that finds the container and then fails returns a nil
	// Sandbox with its error (it returned a nil *Sandbox in a non-nil
	// execbox.Sandbox), and leaves the found container running.
	if err := os.WriteFile(filepath.Join(dir, ".devcontainer/devcontainer.json"), []byte(`{"image": "execbox-test/not-pulled:never", "remoteUser": "no-such-user"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err == nil || bad != nil {
		t.Fatalf("Create with an unknown remoteUser = %#v, %v; want nil and an error", bad, err)
	}
	checkRunningWithoutAgent(t, dc, res.ID, 2)
}

// TestBadConfig: what is wrong with a devcontainer.json, or not
// supported, is a *FieldError naming its key, with the kind of problem;
// nothing is left behind.
func TestBadConfig(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{})
	img := fmt.Sprintf("%q", shared.tag)
	for _, tc := range []struct {
		name, json string
		field      string
		kind       error
	}{
		{"syntax", `{"image": ` + img + ` "x": 1}`, "devcontainer", execbox.ErrInvalidArgument},
		{"type", `{"image": 5}`, "devcontainer.image", execbox.ErrInvalidArgument},
		{"typo", `{"image": ` + img + `, "postCreatCommand": "true"}`, "devcontainer.postCreatCommand", execbox.ErrInvalidArgument},
		{"features", `{"image": ` + img + `, "features": {"ghcr.io/devcontainers/features/go:1": {}}}`, "devcontainer.features", execbox.ErrUnsupported},
		{"compose", `{"dockerComposeFile": "compose.yml", "service": "app", "workspaceFolder": "/w"}`, "devcontainer.dockerComposeFile", execbox.ErrUnsupported},
		{"privileged", `{"image": ` + img + `, "privileged": true}`, "devcontainer.privileged", execbox.ErrUnsupported},
		{"no image", `{"name": "x"}`, "devcontainer.image", execbox.ErrInvalidArgument},
		{"bind outside", `{"image": ` + img + `, "mounts": ["type=bind,source=/etc,target=/hostetc"]}`, "devcontainer.mounts[0]", execbox.ErrPermission},
		{"mount option", `{"image": ` + img + `, "mounts": ["type=bind,source=${localWorkspaceFolder},target=/x,bind-propagation=shared"]}`, "devcontainer.mounts[0]", execbox.ErrInvalidArgument},
		{"host env", `{"image": ` + img + `, "containerEnv": {"K": "${localEnv:HOME}"}}`, "devcontainer.containerEnv.K", execbox.ErrInvalidArgument},
		{"context outside", `{"build": {"dockerfile": "Dockerfile", "context": "../.."}}`, "devcontainer.build.context", execbox.ErrPermission},
		{"no user", `{"image": ` + img + `, "remoteUser": "nobody-here"}`, "devcontainer.remoteUser", execbox.ErrInvalidArgument},
		{"no workspace folder", `{"image": ` + img + `, "workspaceFolder": "/nonexistent"}`, "devcontainer.workspaceFolder", execbox.ErrInvalidArgument},
		{"missing image", `{"image": "execbox-test/no-such-image:1"}`, "devcontainer.image", execbox.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := project(t, tc.json, map[string]string{".devcontainer/Dockerfile": "FROM " + shared.tag + "\n"})
			sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
			if err == nil {
				sb.Close()
				t.Fatal("Create succeeded")
			}
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tc.kind) {
				t.Errorf("Create: %v\nwant a %v naming %s", err, tc.kind, tc.field)
			}
			if left := containersOf(t, dir); len(left) != 0 {
				t.Errorf("a failed Create left %d containers", len(left))
			}
		})
	}
	t.Run("no devcontainer.json", func(t *testing.T) {
		dir := project(t, "", map[string]string{"README": "x"})
		_, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
		var fe *execbox.FieldError
		if !errors.As(err, &fe) || fe.Field != "workspace" || !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("Create without devcontainer.json: %v, want an invalid argument naming workspace", err)
		}
		_, err = rt.Create(t.Context(), execbox.Spec{})
		if !errors.As(err, &fe) || fe.Field != "workspace" {
			t.Errorf("Create without a workspace: %v, want an invalid argument naming workspace", err)
		}
	})
	t.Run("failing postCreateCommand", func(t *testing.T) {
		dir := project(t, `{"image": `+img+`, "postCreateCommand": ["sh", "-c", "echo broken >&2; exit 3"]}`, map[string]string{})
		_, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
		var le *devcontainer.LifecycleError
		if !errors.As(err, &le) || le.Key != "postCreateCommand" || le.Result.ExitCode != 3 || !strings.Contains(err.Error(), "broken") || !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("Create with a failing postCreateCommand: %v", err)
		}
		if left := containersOf(t, dir); len(left) != 0 {
			t.Errorf("a failed Create left %d containers", len(left))
		}
	})
}

// TestSweep: a container the runtime started for a sandbox of a process
// that died without closing it is removed by a sweep, with its temporary
// workspace; a kept one (no owner) and another process's are not.
func TestSweep(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{})
	dc := engine(t)
	d, err := docker.New(docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := d.Owner()
	f := strings.Split(live, "/")
	dead := strings.Join(append(f[:len(f)-2], "999999999", "1"), "/")
	temp, err := os.MkdirTemp("", "execbox-devcontainer-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(temp)
	newContainer := func(owner string) string {
		labels := map[string]string{"dev.execbox.runtime": "devcontainer", testLabel: "1"}
		if owner != "" {
			labels["dev.execbox.owner"] = owner
		}
		if owner == dead {
			labels["dev.execbox.temp"] = temp
		}
		res, err := dc.ContainerCreate(t.Context(), client.ContainerCreateOptions{
			Config: &container.Config{Image: shared.tag, Entrypoint: []string{"true"}, Labels: labels}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dc.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true}) })
		return res.ID
	}
	orphan, kept, mine := newContainer(dead), newContainer(""), newContainer(live)
	n, err := rt.Sweep(t.Context())
	if err != nil || n < 1 {
		t.Errorf("Sweep = %d, %v", n, err)
	}
	for id, want := range map[string]bool{orphan: false, kept: true, mine: true} {
		_, err := dc.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if (err == nil) != want {
			t.Errorf("container %.12s exists after the sweep: %v, want %v", id, err == nil, want)
		}
	}
	if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the orphan's temporary workspace: %v, want removed", err)
	}
}

// TestCLI: execbox exec --runtime devcontainer --workspace DIR -- CMD, as
// the README shows it: the command runs in the folder's container, as
// remoteUser in workspaceFolder, its output streamed and its exit code
// returned; with keep, the next exec finds the container.
func TestCLI(t *testing.T) {
	setup(t)
	dir := project(t, fmt.Sprintf(`{"image": %q, "remoteUser": "dev", "containerEnv": {"GREETING": "hi"}}`, shared.tag), map[string]string{})
	conf := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(conf, []byte("runtimes:\n  devcontainer:\n    keep: true\n    pull: never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.CommandContext(t.Context(), shared.agent, append([]string{"exec", "--runtime", "devcontainer", "--workspace", dir, "--"}, args...)...)
		cmd.Env = append(os.Environ(), "EXECBOX_CONFIG="+conf)
		cmd.Dir = t.TempDir()
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	t.Cleanup(func() {
		for _, c := range containersOf(t, dir) {
			engine(t).ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		}
	})
	want := fmt.Sprintf("dev /workspaces/%s hi\n", filepath.Base(dir))
	for i := range 2 {
		start := time.Now()
		out, code := run("sh", "-c", `echo "$(id -un) $(pwd) $GREETING"; exit 3`)
		t.Logf("execbox exec %d took %v", i, time.Since(start))
		if out != want || code != 3 {
			t.Errorf("execbox exec: %q, exit %d; want %q, exit 3", out, code, want)
		}
	}
	if n := len(containersOf(t, dir)); n != 1 {
		t.Errorf("%d containers for the folder after two execs with keep, want 1", n)
	}
}

// TestNoSetIDFiles: root in a started devcontainer is root on the
// folder's files on the host, but cannot leave a set-id program there
// (the docker runtime's seccomp profile), which would be host root.
func TestNoSetIDFiles(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{})
	dir := project(t, fmt.Sprintf(`{"image": %q}`, shared.tag), map[string]string{})
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "id -u; cp /bin/busybox rootshell; chmod 4755 rootshell; chmod 2755 rootshell; echo done"})
	if err != nil || !strings.HasPrefix(res.Stdout.String(), "0\n") {
		t.Fatalf("as root: %q %v", res.Stdout.String(), err)
	}
	fi, err := os.Stat(filepath.Join(dir, "rootshell"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("a command in the devcontainer made %s/rootshell with mode %v on the host", dir, fi.Mode())
	}
}

// TestBuildFetchesNothingOfTheHost: a red team's finding. A command can
// write devcontainer.json and a Dockerfile in its workspace; the classic
// builder fetched an ADD URL from the host's own network (the build's
// network mode applies to RUN only), so the next sandbox for the folder
// got a service on the host's loopback into its image. Such a build is
// refused before the daemon is asked, naming build.dockerfile.
func TestBuildFetchesNothingOfTheHost(t *testing.T) {
	rt := newRuntime(t, devcontainer.Options{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, "host-only secret")
	}))
	defer srv.Close()
	dir := project(t, `{"build": {"dockerfile": "Dockerfile"}}`, map[string]string{
		".devcontainer/Dockerfile": "FROM " + shared.tag + "\nADD " + srv.URL + "/secret /loot\n",
	})
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
	if err == nil {
		res, _ := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"cat", "/loot"}})
		sb.Close()
		t.Fatalf("Create succeeded; /loot: %q", res.Stdout.Data)
	}
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "devcontainer.build.dockerfile" || !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("Create: %v\nwant a permission error naming devcontainer.build.dockerfile", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's loopback service was asked %d times", n)
	}
	if left := containersOf(t, dir); len(left) != 0 {
		t.Errorf("a refused Create left %d containers", len(left))
	}
}
