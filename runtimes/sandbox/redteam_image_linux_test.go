package sandbox_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/runtimes/sandbox"
	"github.com/execbox/execbox/runtimes/sandbox/sandboximage"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// redteamHostDir makes a directory on the host that the sandbox's init
// (an unprivileged host uid) could write to, as /tmp is: mode 0777 under
// testDir() (0755). It is removed at the end of the test.
func redteamHostDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(testDir(), "redteam-host-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// busyboxPlus is BusyboxImage with one more layer of entries.
func busyboxPlus(entries ...imagetest.Entry) func() (v1.Image, error) {
	return func() (v1.Image, error) {
		bb, err := imagetest.BusyboxImage()
		if err != nil {
			return nil, err
		}
		return mutate.AppendLayers(bb, imagetest.Layer(imagetest.Tar(entries...)))
	}
}

func symlinkEntry(name, target string) imagetest.Entry {
	return imagetest.Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}}
}

// TestRedTeamEtcTempSymlink: writeEtc, in the init, writes the sandbox's
// /etc files to ROOT/.etc-NAME with os.WriteFile before pivot_root, while
// the init still sees the host's tree. An image whose root holds
// .etc-hosts (etc.) as a symlink to a host path makes the init create or
// truncate that host file. Nothing may be written on the host.
func TestRedTeamEtcTempSymlink(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	host := redteamHostDir(t)
	// Layout directories are cached per name: the host path is in the
	// image, so the name must be unique per run.
	name := "redteam-etc-" + filepath.Base(host)
	var entries []imagetest.Entry
	for _, n := range []string{"passwd", "group", "hostname", "hosts"} {
		// Relative as well as absolute targets escape: the init resolves
		// them in the host's tree.
		entries = append(entries, symlinkEntry(".etc-"+n, "../../../../../../../../.."+filepath.Join(host, "pwned-"+n)))
	}
	ref := layoutOf(t, name, busyboxPlus(entries...))
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: ref})
	if err == nil {
		sb.Close()
	}
	ents, _ := os.ReadDir(host)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(host, e.Name()))
		fi, _ := os.Lstat(filepath.Join(host, e.Name()))
		t.Errorf("the image's /.etc-* symlink made the sandbox's init write the host file %s (mode %v, content %q); Create: %v",
			filepath.Join(host, e.Name()), fi.Mode(), b, err)
	}
}

// sparseEntry returns the tar stream of one regular file name of size
// bytes, all holes (PAX GNU sparse 0.1): a few hundred bytes of tar.
func sparseEntry(name string, size int64) []byte {
	var pax bytes.Buffer
	for _, kv := range [][2]string{{"GNU.sparse.major", "0"}, {"GNU.sparse.minor", "1"}, {"GNU.sparse.size", strconv.FormatInt(size, 10)},
		{"GNU.sparse.numblocks", "1"}, {"GNU.sparse.map", "0,0"}} {
		pax.WriteString(paxRecord(kv[0], kv[1]))
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "PaxHeader", Typeflag: tar.TypeReg, Size: int64(pax.Len()), Mode: 0o644, Format: tar.FormatUSTAR})
	tw.Write(pax.Bytes())
	tw.Flush()
	hdr := b.Bytes()[:512]
	hdr[156] = tar.TypeXHeader
	for i := 148; i < 156; i++ {
		hdr[i] = ' '
	}
	var sum int
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:], fmt.Sprintf("%06o\x00 ", sum))
	tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: 0, Mode: 0o644, Format: tar.FormatUSTAR})
	tw.Close()
	return b.Bytes()
}

// paxRecord formats one PAX record, "%d %s=%s\n" with its own length.
func paxRecord(k, v string) string {
	s := " " + k + "=" + v + "\n"
	n := len(s) + 1
	for len(strconv.Itoa(n))+len(s) != n {
		n++
	}
	return strconv.Itoa(n) + s
}

// TestRedTeamHugePasswd: the host process reads the image's /etc/passwd
// whole (imageUser: root.ReadFile, then a 16 MiB check) to resolve the
// image's User. A sparse /etc/passwd of many GiB costs a few hundred
// bytes of layer and no disk, and makes execbox allocate its size: the
// process dies ("fatal error: runtime: out of memory"), here under a
// 2.5 GiB address-space limit so as to spare the machine (without one, a
// passwd larger than RAM does the same). Create must fail cleanly or
// succeed, never crash the host process.
func TestRedTeamHugePasswd(t *testing.T) {
	if os.Getenv("EXECBOX_REDTEAM_CHILD") == "huge-passwd" {
		redteamHugePasswdChild(t)
		return
	}
	rt := imageRuntime(t, sandbox.Options{}) // the dependencies, and the static agent
	_ = rt
	bin, err := testutil.StaticExecbox(testDir())
	if err != nil {
		t.Fatal(err)
	}
	ref := layoutOf(t, "redteam-huge-passwd-2", func() (v1.Image, error) {
		bb, err := imagetest.BusyboxImage()
		if err != nil {
			return nil, err
		}
		img, err := mutate.AppendLayers(bb, imagetest.Layer(sparseEntry("etc/passwd", 7<<29)))
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Config.User = "user"
		return mutate.ConfigFile(img, cf)
	})
	tmp := t.TempDir()
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedTeamHugePasswd$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "EXECBOX_REDTEAM_CHILD=huge-passwd", "EXECBOX_REDTEAM_REF="+ref,
		"EXECBOX_REDTEAM_STORE="+filepath.Join(tmp, "store"), "EXECBOX_TEST_AGENT_BINARY="+bin, "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("out of memory")) {
		t.Errorf("Create of an image with a sparse 3.5 GiB /etc/passwd killed the host process (%v):\n%s", err, crashSummary(out))
	}
}

// crashSummary is the fatal error of a crashed Go program's output and
// the stack of its running goroutine.
func crashSummary(out []byte) string {
	s := string(out)
	if i := strings.Index(s, "fatal error"); i >= 0 {
		s = s[i:]
	}
	if i := strings.Index(s, "\n\ngoroutine "); i >= 0 {
		if j := strings.Index(s[i+2:], "\n\n"); j >= 0 {
			s = s[:i+2+j]
		}
	}
	if len(s) > 3000 {
		s = s[:3000]
	}
	return s
}

func redteamHugePasswdChild(t *testing.T) {
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: 5 << 29, Max: 5 << 29}); err != nil {
		t.Fatal(err)
	}
	st, err := image.Open(image.Options{Dir: os.Getenv("EXECBOX_REDTEAM_STORE")})
	if err != nil {
		t.Fatal(err)
	}
	rt := imageRuntime(t, sandbox.Options{Images: sandboximage.New(st)})
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: os.Getenv("EXECBOX_REDTEAM_REF")})
	t.Logf("Create: %v", err)
	if err == nil {
		sb.Close()
	}
}
