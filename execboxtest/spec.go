package execboxtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// hostTree lists a host directory as a tree (see listTree).
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = linkEntry(target)
		case info.IsDir():
			out[rel] = dirEntry(info.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fileEntry(info.Mode().Perm(), string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return out
}

// writeHost writes a host file, with its parents.
func writeHost(t *testing.T, p, data string, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
}

func testAssets(t *testing.T, s *suite) {
	src := t.TempDir()
	writeHost(t, filepath.Join(src, "a.txt"), "A", 0o644)
	writeHost(t, filepath.Join(src, "sub", "b.sh"), "#!/bin/sh\necho b\n", 0o755)
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(t.TempDir(), "single.txt")
	writeHost(t, single, "single", 0o640)
	snap, _ := sampleTar(t) // holds a.txt "A\n", replaced by an asset below

	sb := s.create(t, func(sp *execbox.Spec) {
		sp.Snapshot = snap
		sp.Assets = append(sp.Assets,
			execbox.Asset{Source: src, Path: "src"},
			execbox.Asset{Source: single, Path: "one.txt"},
			execbox.Asset{Content: []byte("#!/bin/sh\necho tool\n"), Path: "bin/tool.sh", Mode: 0o755},
			execbox.Asset{Content: []byte("x"), Path: "plain.txt"},
			execbox.Asset{Content: []byte("asset"), Path: "a.txt"},
			execbox.Asset{Content: []byte{}, Path: "empty.txt"},
		)
	})
	// The first thing the sandbox does: the assets are already there.
	got := shOK(t, sb, `cat src/a.txt src/sub/b.sh one.txt plain.txt a.txt empty.txt && ./bin/tool.sh && ./src/sub/b.sh &&
		[ -L src/link ] && [ "$(readlink src/link)" = a.txt ] && echo ok`)
	if want := "A#!/bin/sh\necho b\nsinglexasset" + "tool\nb\nok\n"; got != want {
		t.Errorf("assets as the first command sees them: %q, want %q", got, want)
	}
	diffTrees(t, "directory asset", listTree(t, sb.Files(), "src"), hostTree(t, src))
	for p, perm := range map[string]fs.FileMode{"plain.txt": 0o644, "bin/tool.sh": 0o755, "one.txt": 0o640} {
		fi, err := sb.Files().Stat(t.Context(), p)
		if err != nil || fi.Mode.Perm() != perm {
			t.Errorf("Stat(%s) = %v, %v; want perm %#o", p, fi.Mode, err, perm)
		}
	}
}

func testSetup(t *testing.T, s *suite) {
	sb := s.create(t, func(sp *execbox.Spec) {
		sp.Assets = append(sp.Assets, execbox.Asset{Content: []byte("asset\n"), Path: "asset.txt"})
		sp.Setup = append(sp.Setup,
			execbox.ExecRequest{Shell: "echo one > first"},
			execbox.ExecRequest{Command: sh("cat first asset.txt > second")},
			execbox.ExecRequest{Command: []string{"mkdir", "made"}},
		)
	})
	if got := shOK(t, sb, "cat second && [ -d made ] && echo dir"); got != "one\nasset\ndir\n" {
		t.Errorf("after setup: %q, want the second command to have seen the first's file and the asset", got)
	}
}

func testSetupFailure(t *testing.T, s *suite) {
	t.Run("given-workspace", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeHost(t, filepath.Join(dir, "keep.txt"), "keep", 0o644)
		writeHost(t, filepath.Join(dir, "sub", "deep.txt"), "deep", 0o600)
		before := hostTree(t, dir)
		mark, env := newMark()
		spec := s.baseSpec(t)
		spec.Workspace = dir
		spec.Setup = append(spec.Setup,
			execbox.ExecRequest{Shell: "echo ok"},
			execbox.ExecRequest{Command: sh("echo boom >&2; sleep 300 </dev/null >/dev/null 2>&1 & exit 3"), Env: env},
			execbox.ExecRequest{Shell: "echo never > never.txt"},
		)
		sb, err := s.rt.Create(t.Context(), spec)
		if err == nil {
			sb.Close()
			t.Fatal("Create with a failing setup command succeeded")
		}
		if sb != nil {
			t.Errorf("Create failed but returned a Sandbox too")
		}
		var se *execbox.SetupError
		if !errors.As(err, &se) {
			t.Fatalf("Create: %v, want a *SetupError", err)
		}
		if se.Index != len(spec.Setup)-2 || se.Result.Reason != execbox.ReasonExited || se.Result.ExitCode != 3 {
			t.Errorf("SetupError: index %d, %s; want index %d, exited 3", se.Index, se.Result.String(), len(spec.Setup)-2)
		}
		if !strings.Contains(se.Result.Stderr.Text(), "boom") {
			t.Errorf("SetupError: stderr %q, want the command's (boom)", se.Result.Stderr.Text())
		}
		if len(se.Cmd) == 0 {
			t.Error("SetupError.Cmd is empty")
		}
		wantKind(t, "Create with a failing setup", err, execbox.ErrInvalidArgument)
		// The given workspace is left as it was: not removed, and setup
		// stopped at the failing command.
		diffTrees(t, "given workspace after a failed Create", hostTree(t, dir), before)
		// The daemon the failing command left is killed.
		var left []int
		if !testutil.Poll(t.Context(), s.killWithin(), func() bool { left = hostMarked(mark); return len(left) == 0 }) {
			t.Errorf("host PIDs %v started by the failed setup still run after Create returned", left)
		}
	})
	t.Run("temp-workspace", func(t *testing.T) {
		t.Parallel()
		spec := s.baseSpec(t)
		spec.Setup = append(spec.Setup, execbox.ExecRequest{Command: sh("pwd -P >&2; exit 4")})
		_, err := s.rt.Create(t.Context(), spec)
		var se *execbox.SetupError
		if !errors.As(err, &se) {
			t.Fatalf("Create: %v, want a *SetupError", err)
		}
		if se.Result.ExitCode != 4 {
			t.Errorf("SetupError: %s, want exited 4", se.Result.String())
		}
		ws := strings.TrimSpace(se.Result.Stderr.Text())
		if !s.caps.Isolation && ws != "" {
			if _, err := os.Lstat(ws); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("temporary workspace %s still exists after a failed Create (stat: %v), want removed", ws, err)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		spec := s.baseSpec(t)
		spec.Setup = append(spec.Setup, execbox.ExecRequest{Command: []string{"sleep", "100"}, Timeout: 200 * time.Millisecond})
		start := time.Now()
		_, err := s.rt.Create(t.Context(), spec)
		var se *execbox.SetupError
		if !errors.As(err, &se) {
			t.Fatalf("Create: %v, want a *SetupError", err)
		}
		if se.Result.Reason != execbox.ReasonTimedOut {
			t.Errorf("SetupError: %s, want timed out", se.Result.String())
		}
		if d := time.Since(start); d > 200*time.Millisecond+s.slack+time.Second {
			t.Errorf("Create with a setup timing out after 200ms took %v", d)
		}
	})
	t.Run("missing-workspace", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "does-not-exist")
		spec := s.baseSpec(t)
		spec.Workspace = dir
		sb, err := s.rt.Create(t.Context(), spec)
		if err == nil {
			sb.Close()
			t.Fatal("Create with a Workspace that does not exist succeeded")
		}
		if !errors.Is(err, execbox.ErrNotFound) && !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("Create with a missing Workspace: %v, want ErrNotFound or ErrInvalidArgument", err)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Create made the missing workspace %s", dir)
		}
	})
}

func testWorkspaceGiven(t *testing.T, s *suite) {
	dir := t.TempDir()
	writeHost(t, filepath.Join(dir, "pre.txt"), "pre", 0o644)
	sb := s.create(t, func(sp *execbox.Spec) { sp.Workspace = dir })
	if got := shOK(t, sb, "cat pre.txt && echo made > made.txt"); got != "pre" {
		t.Errorf("cat pre.txt in the given workspace: %q", got)
	}
	if !s.caps.Isolation {
		a, _ := filepath.EvalSymlinks(sb.Workspace())
		b, _ := filepath.EvalSymlinks(dir)
		if a != b {
			t.Errorf("Workspace() = %q, want the given %q", sb.Workspace(), dir)
		}
	}
	s.close(t, sb)
	b, err := os.ReadFile(filepath.Join(dir, "pre.txt"))
	if err != nil || string(b) != "pre" {
		t.Fatalf("given workspace after Close: pre.txt = %q, %v; want it untouched (never removed)", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("given workspace after Close: made.txt = %q, %v; want what the command wrote", b, err)
	}
}

func testWorkspaceTemp(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	ws := sb.Workspace()
	shOK(t, sb, "mkdir -p a/b && echo x > a/b/c && chmod 000 a/b && chmod 500 a")
	if s.caps.Isolation {
		t.Logf("isolated runtime: the temporary workspace %s is inside the boundary; AfterClose checks it", ws)
		return
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		t.Fatalf("Workspace() %s on the host: %v", ws, err)
	}
	s.close(t, sb)
	if _, err := os.Lstat(ws); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary workspace %s still exists after Close (stat: %v), want removed (guarantee 6)", ws, err)
	}
}

func testSandboxesIndependent(t *testing.T, s *suite) {
	a, b := s.create(t, nil), s.create(t, nil)
	if a.ID() == b.ID() {
		t.Errorf("two sandboxes share the ID %q", a.ID())
	}
	if !s.caps.Isolation && a.Workspace() == b.Workspace() {
		t.Errorf("two sandboxes share the workspace %q", a.Workspace())
	}
	if err := a.Files().WriteFile(t.Context(), "only-a", []byte("a"), execbox.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Files().Stat(t.Context(), "only-a")
	wantKind(t, "Stat in sandbox b of a file written in sandbox a", err, execbox.ErrNotFound)
	res := mustExec(t, b, execbox.ExecRequest{Command: []string{"cat", "only-a"}})
	if res.Success() {
		t.Error("sandbox b's command read a file of sandbox a")
	}
}

func testCapabilities(t *testing.T, s *suite) {
	sb, err := s.rt.Create(t.Context(), s.baseSpec(t))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := sb.Capabilities(); got != s.caps {
		t.Errorf("Sandbox.Capabilities() = %+v, want the runtime's %+v", got, s.caps)
	}
	s.close(t, sb)
	if got := sb.Capabilities(); got != s.caps {
		t.Errorf("Sandbox.Capabilities() after Close = %+v, want the runtime's %+v", got, s.caps)
	}
}
