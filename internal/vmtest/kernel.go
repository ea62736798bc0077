package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// initScript is PID 1 of the initramfs.
//
//go:embed init.sh
var initScript []byte

// kernelPackage is Debian's metapackage for its current stock kernel.
const kernelPackage = "linux-image-amd64"

// modules are loaded by init in this order; those built into the kernel
// (listed in modules.builtin) are left out.
var modules = []string{
	"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
	"netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "overlay",
	// ext4 on a virtio disk for /tmp: tmpfs has idmapped mounts only from
	// Linux 6.3, ext4 (Debian 12's /tmp) has them in 6.1.
	"crc16", "crc32c_generic", "mbcache", "jbd2", "ext4", "virtio_blk",
}

// busyboxPath is the static busybox of Debian's busybox-static.
const busyboxPath = "/bin/busybox"

// kernel is a cached stock kernel and the initramfs that boots it.
type kernel struct {
	Version string // the package version, e.g. 6.1.192-2
	Vmlinuz string
	Initrd  string
}

// prepareKernel returns the kernel of the candidate version of
// linux-image-amd64, fetched (apt-get download, dpkg -x, never installed)
// into cacheDir/<version> on first use and reused afterwards. The initramfs
// is rebuilt whenever init.sh or busybox change (its name holds their hash).
func prepareKernel(ctx context.Context, cacheDir string, log io.Writer) (kernel, error) {
	ver, err := candidateVersion(ctx, log)
	if err != nil {
		return kernel{}, err
	}
	// The directory is keyed by the version and the modules staged, and
	// never changed once made: runs of other versions of this harness (a
	// colleague's, concurrently) keep using theirs.
	sum := sha256.Sum256([]byte(strings.Join(modules, " ")))
	dir := filepath.Join(cacheDir, ver+"-"+hex.EncodeToString(sum[:])[:8])
	k := kernel{Version: ver, Vmlinuz: filepath.Join(dir, "vmlinuz")}
	if _, err := os.Stat(filepath.Join(dir, "ok")); err != nil {
		if err := fetchKernel(ctx, dir, log); err != nil {
			return kernel{}, fmt.Errorf("kernel %s %s: %w", kernelPackage, ver, err)
		}
	}
	// The kernel unpacked once on the host: the guest then skips
	// decompressing its xz payload, which takes it tens of seconds under
	// emulation. Without xz, or a PVH entry, the guest boots vmlinuz.
	if elf, err := unpackedKernel(ctx, k.Vmlinuz, filepath.Join(dir, "vmlinux")); err == nil {
		k.Vmlinuz = elf
	} else {
		fmt.Fprintf(log, "vm: booting the compressed kernel: %v\n", err)
	}
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return kernel{}, fmt.Errorf("busybox (install busybox-static): %w", err)
	}
	h := sha256.New()
	h.Write(initScript)
	h.Write(bb)
	k.Initrd = filepath.Join(dir, "initrd-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if _, err := os.Stat(k.Initrd); err == nil {
		return k, nil
	}
	return k, buildInitrd(k.Initrd, filepath.Join(dir, "modules"), bb)
}

// unpackedKernel returns dst, the ELF kernel inside the bzImage vmlinuz
// (its xz payload, decompressed), made on first use. qemu boots such a
// kernel through its PVH entry point (the Xen note Debian's kernels
// carry).
func unpackedKernel(ctx context.Context, vmlinuz, dst string) (string, error) {
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	b, err := os.ReadFile(vmlinuz)
	if err != nil {
		return "", err
	}
	i := bytes.Index(b, []byte("\xfd7zXZ\x00"))
	if i < 0 {
		return "", fmt.Errorf("%s: no xz payload", vmlinuz)
	}
	// The payload is followed by the bzImage's trailer.
	cmd := exec.CommandContext(ctx, "xz", "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(b[i:])
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("xz -dc of %s's payload: %w", vmlinuz, err)
	}
	if !hasPVHEntry(out) {
		return "", fmt.Errorf("%s: its payload is no ELF kernel with a PVH entry", vmlinuz)
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".vmlinux-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(out)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	return dst, err
}

// hasPVHEntry reports whether kernel is an ELF file with the Xen note
// XEN_ELFNOTE_PHYS32_ENTRY (18), where qemu starts it.
func hasPVHEntry(kernel []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(kernel))
	if err != nil {
		return false
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return false
		}
		for len(b) >= 12 {
			namesz, descsz, typ := f.ByteOrder.Uint32(b), f.ByteOrder.Uint32(b[4:]), f.ByteOrder.Uint32(b[8:])
			name := 12 + (int(namesz)+3)&^3
			end := name + (int(descsz)+3)&^3
			if end > len(b) || end < name {
				break
			}
			if typ == 18 && string(bytes.TrimRight(b[12:12+namesz], "\x00")) == "Xen" {
				return true
			}
			b = b[end:]
		}
	}
	return false
}

// candidateVersion asks apt which version of the kernel metapackage it
// would fetch, updating the package lists once if it knows none.
func candidateVersion(ctx context.Context, log io.Writer) (string, error) {
	for try := 0; ; try++ {
		out, err := exec.CommandContext(ctx, "apt-cache", "policy", kernelPackage).Output()
		if err != nil {
			return "", fmt.Errorf("apt-cache policy %s: %w", kernelPackage, err)
		}
		for l := range strings.SplitSeq(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Candidate:"); ok {
				if v = strings.TrimSpace(v); v != "" && v != "(none)" {
					return v, nil
				}
			}
		}
		if try > 0 {
			return "", fmt.Errorf("apt knows no candidate for %s", kernelPackage)
		}
		fmt.Fprintln(log, "vm: apt-get update")
		if err := run(ctx, log, "", "apt-get", "update", "-qq"); err != nil {
			return "", err
		}
	}
}

// fetchKernel downloads the metapackage and the versioned image it depends
// on, unpacks them, and keeps vmlinuz and the modules init loads.
func fetchKernel(ctx context.Context, dir string, log io.Writer) error {
	fmt.Fprintf(log, "vm: fetching %s into %s\n", kernelPackage, dir)
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), ".fetch-"); err != nil {
			return err
		}
	}
	defer os.RemoveAll(tmp)
	if err := run(ctx, log, tmp, "apt-get", "download", kernelPackage); err != nil {
		return err
	}
	meta, _ := filepath.Glob(filepath.Join(tmp, kernelPackage+"_*.deb"))
	if len(meta) != 1 {
		return fmt.Errorf("apt-get download left %d packages", len(meta))
	}
	dep, err := exec.CommandContext(ctx, "dpkg-deb", "-f", meta[0], "Depends").Output()
	if err != nil {
		return fmt.Errorf("dpkg-deb -f Depends: %w", err)
	}
	image, _, _ := strings.Cut(strings.TrimSpace(string(dep)), " ")
	image = strings.TrimSuffix(image, ",")
	if !strings.HasPrefix(image, "linux-image-") {
		return fmt.Errorf("%s depends on %q, not a linux-image", kernelPackage, dep)
	}
	if err := run(ctx, log, tmp, "apt-get", "download", image); err != nil {
		return err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, image+"_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s left %d packages", image, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if err := run(ctx, log, "", "dpkg", "-x", debs[0], root); err != nil {
		return err
	}
	staged := filepath.Join(tmp, "kernel")
	if err := stageKernel(root, staged); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staged, "ok"), nil, 0o644); err != nil {
		return err
	}
	if err := os.Rename(staged, dir); err != nil {
		// Another run staged it first.
		if _, serr := os.Stat(filepath.Join(dir, "ok")); serr == nil {
			return nil
		}
		return err
	}
	return nil
}

// stageKernel copies vmlinuz and the needed modules from an unpacked image
// package into dst, writing dst/modules/order for init.
func stageKernel(root, dst string) error {
	vmlinuz, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	mods, _ := filepath.Glob(filepath.Join(root, "lib", "modules", "*"))
	if len(vmlinuz) != 1 || len(mods) != 1 {
		return fmt.Errorf("unpacked image has %d vmlinuz and %d module trees", len(vmlinuz), len(mods))
	}
	if err := os.MkdirAll(filepath.Join(dst, "modules"), 0o755); err != nil {
		return err
	}
	if err := copyFile(vmlinuz[0], filepath.Join(dst, "vmlinuz")); err != nil {
		return err
	}
	builtin, _ := os.ReadFile(filepath.Join(mods[0], "modules.builtin"))
	files := map[string]string{}
	filepath.WalkDir(filepath.Join(mods[0], "kernel"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ko") {
			files[strings.TrimSuffix(d.Name(), ".ko")] = p
		}
		return nil
	})
	var order []string
	for _, m := range modules {
		p, ok := files[m]
		switch {
		case ok:
			if err := copyFile(p, filepath.Join(dst, "modules", m+".ko")); err != nil {
				return err
			}
			order = append(order, m)
		case bytes.Contains(builtin, []byte("/"+m+".ko")):
		default:
			return fmt.Errorf("module %s is neither in the package nor built in", m)
		}
	}
	return os.WriteFile(filepath.Join(dst, "modules", "order"), []byte(strings.Join(order, "\n")+"\n"), 0o644)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// buildInitrd writes an uncompressed newc cpio archive holding busybox,
// init.sh as /init, and the modules, atomically at path.
func buildInitrd(path, modDir string, busybox []byte) error {
	var a cpioWriter
	for _, d := range []string{"bin", "dev", "proc", "sys", "modules"} {
		a.dir(d)
	}
	a.file("bin/busybox", 0o755, busybox)
	a.file("init", 0o755, initScript)
	ents, err := os.ReadDir(modDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(modDir, e.Name()))
		if err != nil {
			return err
		}
		a.file("modules/"+e.Name(), 0o644, b)
	}
	a.file("TRAILER!!!", 0, nil)
	f, err := os.CreateTemp(filepath.Dir(path), ".initrd-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(a.buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// cpioWriter builds a newc ("070701") archive in memory.
type cpioWriter struct {
	buf bytes.Buffer
	ino int
}

func (a *cpioWriter) dir(name string) { a.entry(name, 0o040755, nil) }

func (a *cpioWriter) file(name string, perm uint32, data []byte) {
	mode := 0o100000 | perm
	if name == "TRAILER!!!" {
		mode = 0
	}
	a.entry(name, mode, data)
}

func (a *cpioWriter) entry(name string, mode uint32, data []byte) {
	a.ino++
	nlink := 1
	if mode&0o040000 != 0 {
		nlink = 2
	}
	fmt.Fprintf(&a.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		a.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	a.buf.WriteString(name)
	a.buf.WriteByte(0)
	a.pad()
	a.buf.Write(data)
	a.pad()
}

func (a *cpioWriter) pad() {
	for a.buf.Len()%4 != 0 {
		a.buf.WriteByte(0)
	}
}

// run runs a command with its output going to log.
func run(ctx context.Context, log io.Writer, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}
