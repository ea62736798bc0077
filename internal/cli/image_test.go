//go:build linux

package cli

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/imageapi"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// imageLayout writes imgs, by tag, into a new OCI layout and returns its
// path.
func imageLayout(t *testing.T, imgs map[string]v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for tag, img := range imgs {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fileImage is an image of one file holding content.
func fileImage(t *testing.T, content string) v1.Image {
	t.Helper()
	img, err := imagetest.Image(v1.Config{}, imagetest.Tar(
		imagetest.Entry{Header: tar.Header{Name: "id", Typeflag: tar.TypeReg}, Body: content}))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageList decodes what `image ls --json` printed.
func imageList(t *testing.T, o outcome) []api.Image {
	t.Helper()
	var l api.ImageList
	if err := json.Unmarshal([]byte(o.stdout), &l); err != nil {
		t.Fatalf("not an api.ImageList: %v\n%s", err, o.stdout)
	}
	return l.Images
}

func TestImageCommand(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "images")
	image1 := func(args ...string) outcome {
		t.Helper()
		return mainRun(t, nil, nil, append([]string{"image", args[0], "--config=", "--images-dir", store}, args[1:]...)...)
	}
	dir := imageLayout(t, map[string]v1.Image{"a": fileImage(t, "a"), "b": fileImage(t, "bb")})
	refA, refB := dir+":a", dir+":b"

	o := image1("pull", refA, refB)
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("pull: code %d, stderr %q", o.code, o.stderr)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^sha256:[0-9a-f]{64}\s+[0-9.]+K?i?B\s+`+regexp.QuoteMeta(refA)+`$`).MatchString(lines[0]) {
		t.Errorf("pull printed %q, want ID, size and reference per image", o.stdout)
	}

	o = image1("ls", "--json")
	l := imageList(t, o)
	if o.code != 0 || len(l) != 2 || l[0].Ref != refA || l[1].Ref != refB || l[1].Size < 2 || l[0].InUse {
		t.Fatalf("ls --json: code %d, %+v", o.code, l)
	}
	wantKeys(t, "image", decodeObject(t, "ls --json", o.stdout)["images"].([]any)[0],
		"ref", "id", "digest", "chain_id", "size", "last_used_at", "in_use")

	// A sandbox of another process (here: a Use of another Store of the
	// same directory) holds b.
	st, err := image.Open(image.Options{Dir: store})
	if err != nil {
		t.Fatal(err)
	}
	img, err := st.Get(refB)
	if err != nil {
		t.Fatal(err)
	}
	release, err := st.Use(img)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	o = image1("ls")
	table := regexp.MustCompile(`(?m)^REF\s+ID\s+SIZE\s+LAST USED\s+IN USE\n` +
		regexp.QuoteMeta(refA) + `\s+` + l[0].ID[7:19] + `\s+[0-9.]+K?i?B\s+just now\s+no\n` +
		regexp.QuoteMeta(refB) + `\s+[0-9a-f]{12}\s+[0-9.]+K?i?B\s+just now\s+yes\n$`)
	if o.code != 0 || !table.MatchString(o.stdout) {
		t.Errorf("ls: code %d, table\n%s", o.code, o.stdout)
	}
	o = image1("rm", refB)
	if o.code != ExitFailure || !strings.Contains(o.stderr, refB) || !strings.Contains(o.stderr, "in use") {
		t.Errorf("rm of an image in use: code %d, stderr %q; want %d naming it, in use", o.code, o.stderr, ExitFailure)
	}

	o = image1("prune")
	if o.code != 0 || !regexp.MustCompile(`^removed\s+`+regexp.QuoteMeta(refA)+`\s+[0-9a-f]{12}\s+[0-9.]+K?i?B\nfreed [0-9.]+K?i?B\n$`).MatchString(o.stdout) {
		t.Errorf("prune: code %d, stdout %q; want a removed, b kept (in use)", o.code, o.stdout)
	}
	release()
	// The lock a Use holds is shared, until it execs, by a child this
	// test process forks meanwhile (other tests run in parallel, and
	// O_CLOEXEC acts at exec): wait for b to be free, as a caller would.
	testutil.Eventually(t, 10*time.Second, func() bool {
		l := imageList(t, image1("ls", "--json"))
		return len(l) == 1 && !l[0].InUse
	}, "the released image to be no longer in use")
	if o = image1("rm", refB); o.code != 0 || o.stdout != refB+"\n" {
		t.Errorf("rm: code %d, stdout %q", o.code, o.stdout)
	}
	if l := imageList(t, image1("ls", "--json")); len(l) != 0 {
		t.Errorf("ls after rm and prune: %+v", l)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want []string // on stderr
	}{
		{"rm of a ref not in the store", []string{"rm", refA}, ExitFailure, []string{refA, "not found"}},
		{"pull of a missing tag", []string{"pull", dir + ":c"}, ExitFailure, []string{dir + ":c", "not found"}},
		{"pull of a bad reference", []string{"pull", "Bad/Ref:x y"}, ExitUsage, []string{"execbox: ref: "}},
		{"pull without a reference", []string{"pull"}, ExitUsage, []string{"execbox: ref: "}},
		{"rm without a reference", []string{"rm"}, ExitUsage, []string{"execbox: ref: "}},
		{"prune with a bad size", []string{"prune", "--max-size", "lots"}, ExitUsage, []string{"execbox: --max-size: "}},
		{"ls with an argument", []string{"ls", "x"}, ExitUsage, []string{"too many arguments"}},
		{"unknown flag", []string{"ls", "--all"}, ExitUsage, []string{"unknown flag --all"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := image1(tt.args...)
			if o.code != tt.code {
				t.Errorf("exit code %d, want %d", o.code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("stderr %q lacks %q", o.stderr, w)
				}
			}
		})
	}
	for _, args := range [][]string{{"image"}, {"image", "tag"}} {
		if o := mainRun(t, nil, nil, args...); o.code != ExitUsage {
			t.Errorf("execbox %q: code %d, want %d", args, o.code, ExitUsage)
		}
	}
	if o := mainRun(t, nil, nil, "image", "-h"); o.code != 0 || !strings.Contains(o.stdout, "prune") {
		t.Errorf("image -h: code %d, stdout %q", o.code, o.stdout)
	}
}

// TestImageCommandRemote runs execbox image against execbox serve: the
// server's store is the one that changes.
func TestImageCommandRemote(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_IMAGE_TOKEN"
	t.Setenv(tokenVar, "tok")
	serverStore := filepath.Join(t.TempDir(), "server-images")
	// serve blanks $tokenVar in this process: the client's token is in
	// the configuration.
	url, _ := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar, "--images-dir", serverStore, "--allow-host-paths")
	cfgFile := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(cfgFile, []byte("runtimes:\n  remote:\n    url: "+url+"\n    token: tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	localStore := filepath.Join(t.TempDir(), "local-images")
	remote1 := func(args ...string) outcome {
		t.Helper()
		return mainRun(t, nil, nil, append([]string{"image", args[0], "--config", cfgFile, "--runtime", "remote", "--images-dir", localStore}, args[1:]...)...)
	}
	dir := imageLayout(t, map[string]v1.Image{"a": fileImage(t, "remote")})
	ref := dir + ":a"
	if o := remote1("pull", ref); o.code != 0 || !strings.HasSuffix(o.stdout, "B  "+ref+"\n") {
		t.Fatalf("pull: code %d, stdout %q", o.code, o.stdout)
	}
	st, err := image.Open(image.Options{Dir: serverStore})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ref); err != nil {
		t.Errorf("the server's store lacks the image pulled: %v", err)
	}
	if _, err := os.Stat(localStore); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a remote pull made the local store %s (%v)", localStore, err)
	}
	if l := imageList(t, remote1("ls", "--json")); len(l) != 1 || l[0].Ref != ref {
		t.Errorf("ls --json: %+v", l)
	}
	var pruned api.PruneImagesResponse
	o := remote1("prune", "--json", "--max-size", "1GiB")
	if err := json.Unmarshal([]byte(o.stdout), &pruned); o.code != 0 || err != nil || len(pruned.Removed) != 0 {
		t.Errorf("prune under the size: code %d, %q", o.code, o.stdout)
	}
	if o := remote1("rm", "--json", ref); o.code != 0 || !slices.Equal(refsOf(imageList(t, o)), []string{ref}) {
		t.Errorf("rm --json: code %d, %q", o.code, o.stdout)
	}
	if o := remote1("rm", ref); o.code != ExitFailure || !strings.Contains(o.stderr, ref) {
		t.Errorf("rm again: code %d, stderr %q; want %d naming it", o.code, o.stderr, ExitFailure)
	}
	if o := remote1("pull", "./relative:a"); o.code != ExitUsage || !strings.Contains(o.stderr, "ref: ") {
		t.Errorf("pull of a relative path: code %d, stderr %q", o.code, o.stderr)
	}
}

func refsOf(imgs []api.Image) []string {
	var out []string
	for _, img := range imgs {
		out = append(out, img.Ref)
	}
	return out
}

// TestImageFlag checks that exec's and run's --image reach Spec.Image:
// the local runtime refuses it, naming the flag.
func TestImageFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"exec", "--config=", "--temp-workspace", "--image", "busybox", "--", "true"},
		{"run", "--config=", "--image", "busybox", "--lang", "python", "-c", "print(1)"},
	} {
		o := mainRun(t, nil, nil, args...)
		if o.code != ExitFailure || !strings.Contains(o.stderr, "execbox: --image: ") {
			t.Errorf("execbox %q: code %d, stderr %q; want %d naming --image", args, o.code, o.stderr, ExitFailure)
		}
	}
}

// TestServeImagesShared serves the sandbox runtime: a sandbox made from
// an image marks it in use in the store the server manages, so removing
// it through the API is refused until the sandbox is closed. exec
// --image runs a command in the same image.
func TestServeImagesShared(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.StaticAgent,
		testutil.NewDep("busybox-static", func() error { _, err := imagetest.BusyboxImage(); return err }))
	bb, err := imagetest.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := staticAgent()
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(cfgFile, []byte("runtimes:\n  sandbox:\n    agent_binary: "+agent+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "images")
	ref := imageLayout(t, map[string]v1.Image{"busybox": bb}) + ":busybox"

	o := mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", "sandbox", "--images-dir", store, "--temp-workspace",
		"--image", ref, "--", "cat", "/etc/passwd")
	if o.code != 0 || !strings.Contains(o.stdout, "user:x:1000:1000") {
		t.Fatalf("exec --image: code %d, stdout %q", o.code, o.stdout)
	}
	// --commit: the changes of the root become an image the next exec
	// starts from; a failed command commits nothing.
	prepared := filepath.Join(t.TempDir(), "prepared") + ":v1"
	o = mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", "sandbox", "--images-dir", store, "--temp-workspace",
		"--image", ref, "--commit", prepared, "--", "sh", "-c", "mkdir -p /opt/env && echo ready > /opt/env/state")
	if o.code != 0 || !strings.Contains(o.stderr, "committed "+prepared) {
		t.Fatalf("exec --commit: code %d, stderr %q", o.code, o.stderr)
	}
	o = mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", "sandbox", "--images-dir", store, "--temp-workspace",
		"--image", prepared, "--", "cat", "/opt/env/state")
	if o.code != 0 || o.stdout != "ready\n" {
		t.Fatalf("exec --image of the committed image: code %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", "sandbox", "--images-dir", store, "--temp-workspace",
		"--image", ref, "--commit", prepared+"2", "--", "false")
	if o.code != 1 || !strings.Contains(o.stderr, "not committed") {
		t.Errorf("exec --commit of a failing command: code %d, stderr %q", o.code, o.stderr)
	}
	// The committed images are in the store too: remove them, so the
	// listing below sees the first image alone.
	for _, r := range []string{prepared} {
		if o := mainRun(t, nil, nil, "image", "rm", "--config", cfgFile, "--images-dir", store, r); o.code != 0 {
			t.Fatalf("image rm %s: %d %q", r, o.code, o.stderr)
		}
	}

	url, _ := startServe(t, "--config", cfgFile, "--runtime", "sandbox", "--listen", "127.0.0.1:0", "--no-auth",
		"--images-dir", store, "--allow-host-paths")
	ctx := t.Context()
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := c.Images(ctx); err != nil || len(l) != 1 || l[0].Ref != ref || l[0].InUse {
		t.Fatalf("Images = %+v, %v; want what exec pulled, not in use", l, err)
	}
	sb, err := c.Create(ctx, execbox.Spec{Image: ref}, client.CreateOptions{})
	if err != nil {
		t.Fatalf("Create from %s: %v", ref, err)
	}
	if l, err := c.Images(ctx); err != nil || len(l) != 1 || !l[0].InUse {
		t.Errorf("Images with a sandbox of the image = %+v, %v; want in use", l, err)
	}
	if _, err := c.RemoveImage(ctx, ref); !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("RemoveImage of the sandbox's image: %v, want ErrUnavailable", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveImage(ctx, ref); err != nil {
		t.Errorf("RemoveImage once the sandbox is closed: %v", err)
	}

	// Commit over HTTP: the server saves the changes as a new image,
	// which the next sandbox starts from.
	sb, err = c.Create(ctx, execbox.Spec{Image: ref}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "echo remote > /etc/motd"}); err != nil || !res.Success() {
		t.Fatalf("exec: %v %s", err, res.String())
	}
	if _, err := sb.CommitImage(ctx, "./relative/dir"); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("CommitImage to a relative path: %v, want invalid_argument", err)
	}
	dest := filepath.Join(t.TempDir(), "remote") + ":v2"
	cm, err := sb.CommitImage(ctx, dest)
	if err != nil || cm.Ref != dest || !strings.HasPrefix(cm.Digest, "sha256:") {
		t.Fatalf("CommitImage over HTTP: %+v, %v", cm, err)
	}
	next, err := c.Create(ctx, execbox.Spec{Image: dest}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if res, err := next.Exec(ctx, execbox.ExecRequest{Command: []string{"cat", "/etc/motd"}}); err != nil || res.Stdout.String() != "remote\n" {
		t.Errorf("sandbox of the committed image: %v %q %q", err, res.Stdout.String(), res.Stderr.String())
	}
}

// TestServeImagesStore checks what serve gives the server and its
// runtime: the sandbox runtime made again around the store the server
// manages (opened at once), any other runtime left alone, its store
// opened only when a request needs it.
func TestServeImagesStore(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sandbox", "local"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var cf config.Flags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cf.Register(fs, "runtime", "images.dir")
			dir := filepath.Join(t.TempDir(), "images")
			if err := fs.Parse([]string{"--config=", "--runtime", name, "--images-dir", dir}); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(config.LoadOptions{Flags: &cf})
			if err != nil {
				t.Fatal(err)
			}
			logger := testutil.Logger(t)
			rt, err := cfg.OpenRuntime(t.Context(), logger, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			s := &stdio{out: io.Discard, err: io.Discard}
			served, images, err := serveImages(s, cfg, logger, rt)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := images.(*imageapi.Store)
			if !ok {
				t.Fatalf("the server's images are a %T", images)
			}
			_, statErr := os.Stat(dir)
			switch name {
			case "sandbox":
				if _, ok := served.(*sandbox.Runtime); !ok || served == rt || statErr != nil {
					t.Errorf("served %T (the one opened: %v), store directory: %v; want a new sandbox runtime, the store open", served, served == rt, statErr)
				}
			default:
				if served != rt || !errors.Is(statErr, os.ErrNotExist) {
					t.Errorf("served another runtime (%v), or the store is open before a request (%v)", served != rt, statErr)
				}
			}
			if got, err := st.Image(); err != nil || got.Dir() != dir {
				t.Errorf("the server's store: %v, %v; want one in %s", got, err, dir)
			}
		})
	}
}
