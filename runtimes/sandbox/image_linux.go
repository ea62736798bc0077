package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/imageuser"
	"github.com/execbox/execbox/internal/staticbin"
	"github.com/execbox/execbox/internal/undo"
	"golang.org/x/sys/unix"
)

// A sandbox made from an image (Spec.Image) has as its root an overlay:
// the image's unpacked root, read-only and shared by every sandbox of
// the image (package image), below a tmpfs of its own (Options.RootSize)
// that takes its writes. Create copies nothing. The host mounts the
// overlay, detached, and hands it to the init as a descriptor, as it does
// the workspace: the image's files are seen through an idmapped mount,
// so that its uid 0 is the sandbox's root (the host uid of its slot,
// never host root), and the overlay's own bookkeeping (whiteouts, opaque
// directories) uses the host's trusted xattrs on the tmpfs, which no
// process of the sandbox can set.

// sandboxImage is the image of a sandbox being created.
type sandboxImage struct {
	root *ImageRoot
	user execbox.User // the image's user, resolved in its /etc/passwd
	env  []string     // the boundary's environment: the image's, completed
	// agent is the static program the init and agent run from
	// (imageAgent); "": this one.
	agent string
}

// imageStore returns the runtime's store (Options.Images, or the one
// OpenImages opens, on first use).
func (r *Runtime) imageStore() (Images, error) {
	r.storeOnce.Do(func() {
		switch {
		case r.opts.Images != nil:
			r.store = r.opts.Images
		case OpenImages != nil:
			r.store, r.storeErr = OpenImages(r.opts.ImageDir, int64(r.opts.ImageMaxSize), r.log)
		default:
			r.storeErr = &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported,
				Problem: "this program has no image store: set sandbox.Options.Images (package runtimes/sandbox/sandboximage), or import that package"}
		}
	})
	return r.store, r.storeErr
}

// openImage resolves spec.Image (pulled and unpacked unless cached),
// marks it in use until u unwinds or the sandbox is closed (its root's
// Release), and reads what the sandbox takes from its configuration.
func (r *Runtime) openImage(ctx context.Context, spec *execbox.Spec, u *undo.Stack) (*sandboxImage, error) {
	agent, err := r.imageAgent(ctx)
	if err != nil {
		return nil, err
	}
	st, err := r.imageStore()
	if err != nil {
		return nil, err
	}
	root, err := st.Root(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	u.Add(root.Release)
	si := &sandboxImage{root: root, env: imageEnv(root.Env), agent: agent}
	// The image's variables are the base of every command's environment,
	// whatever the policy (as Docker's are): the spec's own come on top.
	env := make(map[string]string, len(root.Env)+len(spec.Env))
	for _, kv := range root.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	maps.Copy(env, spec.Env)
	spec.Env = env
	if spec.User == nil {
		if si.user, err = imageUser(root); err != nil {
			return nil, err
		}
		if errs := checkUser(si.user); len(errs) > 0 {
			return nil, &execbox.FieldError{Field: "image", Kind: execbox.ErrInvalidArgument,
				Problem: fmt.Sprintf("user %q of image %s: %v", root.User, root.Ref, errors.Join(errs...))}
		}
	}
	return si, nil
}

// imageEnv is the environment of the boundary (the init's and agent's,
// what EnvInherit adds) for an image: its PATH and LANG, or the
// defaults, and container=execbox. Nothing else of the image's: its
// variables reach commands through the spec (openImage), never the
// privileged agent's own environment (GODEBUG, execbox's own).
func imageEnv(env []string) []string {
	path, lang := "PATH="+basePath, "LANG=C.UTF-8"
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			path = kv
		case strings.HasPrefix(kv, "LANG="):
			lang = kv
		}
	}
	return []string{path, lang, "container=execbox"}
}

// imageUser is the user the image says its commands run as
// (imageuser.Resolve), its /etc/passwd and /etc/group read through
// os.Root: a symlink there leads nowhere outside the image.
func imageUser(img *ImageRoot) (execbox.User, error) {
	if img.User == "" {
		return execbox.User{}, nil
	}
	root, err := os.OpenRoot(img.Dir)
	if err != nil {
		return execbox.User{}, err
	}
	defer root.Close()
	return imageuser.Resolve(img.User, img.Ref, func(name string) (io.ReadCloser, error) { return root.Open(name) })
}

// imageRootMount makes the root of a sandbox of slot base from img: an
// overlay, mounted detached, whose lower layer is an idmapped mount of
// the image's root (the image's ids 0-65535 are the sandbox's, host
// base to base+65535) and whose upper layer a tmpfs of Options.RootSize.
// Every layer is reached by a descriptor (/proc/self/fd), so nothing is
// mounted on the host's tree; the overlay lives as long as the init's
// mount namespace holds it. attach is an empty directory only root
// reaches (see inPrivateMountNS). The caller closes the returned mount; the
// upper tmpfs (its directory "upper" holds the sandbox's changes, for
// CommitImage) is the sandbox's to close.
func (r *Runtime) imageRootMount(img *ImageRoot, base uint32, attach string) (root, tmpfs *os.File, err error) {
	userns, err := r.userns.get(idmapKey{DiskUID: 0, DiskGID: 0, HostUID: base, HostGID: base, Size: rangeSize})
	if err != nil {
		return nil, nil, err
	}
	lower, err := unix.OpenTree(unix.AT_FDCWD, img.Dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: open_tree: %w", img.Ref, err)
	}
	defer unix.Close(lower)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(lower, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return nil, nil, fmt.Errorf("image %s: idmapped mount: %w", img.Ref, err)
	}
	upper, err := fsMount("tmpfs", map[string]string{
		"size": strconv.FormatInt(int64(r.opts.RootSize), 10), "nr_inodes": strconv.FormatInt(DefaultWorkspaceInodes, 10), "mode": "0755",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("image root's tmpfs: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(upper)
		}
	}()
	if err := unix.Mkdirat(upper, "upper", 0o755); err != nil {
		return nil, nil, err
	}
	if err := unix.Mkdirat(upper, "work", 0o700); err != nil {
		return nil, nil, err
	}
	// The upper directory is the root directory of the overlay: the
	// sandbox's root owns it, as the image's root owns the image's.
	if err := unix.Fchownat(upper, "upper", int(base), int(base), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, nil, err
	}
	// Before Linux 6.x (6.1 here), overlayfs takes only layers attached
	// in the mounter's mount namespace: they are attached in one of a
	// thread's own, at empty directories of attach, for the time of the
	// mount (overlayfs keeps private clones of them).
	var m int
	err = inPrivateMountNS(func() error {
		lowerAt, upperAt := filepath.Join(attach, "lower"), filepath.Join(attach, "upper")
		for _, a := range []struct {
			fd int
			at string
		}{{lower, lowerAt}, {upper, upperAt}} {
			if err := os.Mkdir(a.at, 0o700); err != nil {
				return err
			}
			if err := unix.MoveMount(a.fd, "", unix.AT_FDCWD, a.at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("attach a layer: %w", err)
			}
		}
		// No redirects, metacopy or index: the upper directory then holds
		// every change whole, in the form CommitImage turns into a layer.
		var err error
		m, err = fsMount("overlay", map[string]string{
			"lowerdir": lowerAt, "upperdir": upperAt + "/upper", "workdir": upperAt + "/work",
			"redirect_dir": "off", "metacopy": "off", "index": "off",
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: overlay: %w", img.Ref, err)
	}
	return os.NewFile(uintptr(m), "image-root"), os.NewFile(uintptr(upper), "image-upper"), nil
}

// inPrivateMountNS runs f on a thread of its own, in a mount namespace of
// its own whose mounts are private: what f mounts there is never seen
// elsewhere, and goes with the namespace when the thread exits (when f
// returns, or with this process).
func inPrivateMountNS(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in its own namespace, exits with
		// this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("unshare a mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- fmt.Errorf("make mounts private: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// fsMount makes a detached, nosuid, nodev mount of a new file system of
// type fstype with the options opts (fsopen, fsconfig, fsmount).
func fsMount(fstype string, opts map[string]string) (int, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fs)
	for k, v := range opts {
		if err := unix.FsconfigSetString(fs, k, v); err != nil {
			return -1, fmt.Errorf("%s option %s=%s: %w", fstype, k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("create %s: %w", fstype, err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("fsmount %s: %w", fstype, err)
	}
	return m, nil
}

// imageAgent is the program a sandbox made from an image starts its
// init and agent from: Options.AgentBinary (checked once,
// Runtime.agentCheck); "" for this program when it is static; else a
// static build of execbox (staticbin.Agent), made once and cached: the
// agent runs inside the image's root, where this program's loader and C
// library are not.
func (r *Runtime) imageAgent(ctx context.Context) (string, error) {
	if r.opts.AgentBinary != "" {
		return r.opts.AgentBinary, r.agentCheck()
	}
	interp, err := staticbin.Interpreter("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("this program: %w", err)
	}
	if interp == "" {
		return "", nil
	}
	bin, err := staticbin.Agent(ctx, r.log)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		kind := execbox.ErrUnavailable
		if errors.Is(err, staticbin.ErrNoToolchain) {
			kind = execbox.ErrUnsupported
		}
		return "", &execbox.FieldError{Field: "image", Kind: kind, Problem: err.Error()}
	}
	if err := othersCanExec(bin); err != nil {
		return "", &execbox.FieldError{Field: "image", Kind: execbox.ErrUnavailable,
			Problem: fmt.Sprintf("the static agent %s: %v: the sandbox's init starts it as an unprivileged host uid (set XDG_CACHE_HOME to a directory others can search, or runtimes.sandbox.agent_binary)", bin, err)}
	}
	return bin, nil
}

// checkAgentBinary checks Options.AgentBinary: a static program any
// user may execute. Runtime.agentCheck is it, run once.
func (r *Runtime) checkAgentBinary() error {
	bin := r.opts.AgentBinary
	interp, err := staticbin.Interpreter(bin)
	if err != nil {
		return execbox.Invalid("runtimes.sandbox.agent_binary", "%s: %v", bin, err)
	}
	if err := othersCanExec(bin); err != nil {
		return execbox.Invalid("runtimes.sandbox.agent_binary", "%v: the sandbox's init starts it as an unprivileged host uid", err)
	}
	if interp != "" {
		return execbox.Invalid("runtimes.sandbox.agent_binary", "%s is dynamically linked (interpreter %s): build it with CGO_ENABLED=0, as make build does", bin, interp)
	}
	return nil
}

// othersCanExec fails unless any user may execute path: the file and
// every directory above it have the x bit for others.
func othersCanExec(path string) error {
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s (mode %v) is not searchable or executable by others", p, fi.Mode().Perm())
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

// CommitImage implements execbox.ImageCommitter: the changes of the
// sandbox's root, read from its upper layer, become a new image over its
// image (Images.Commit).
func (s *Sandbox) CommitImage(ctx context.Context, dest string) (execbox.CommittedImage, error) {
	if s.image == nil {
		return execbox.CommittedImage{}, &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported,
			Problem: "sandbox " + s.id + " was not made from an image: its root is the host's"}
	}
	if s.Closed() {
		return execbox.CommittedImage{}, fmt.Errorf("sandbox %s: %w", s.id, execbox.ErrClosed)
	}
	st, err := s.r.imageStore()
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	ch := ImageChanges{Upper: "/proc/self/fd/" + strconv.Itoa(int(s.upper.Fd())) + "/upper", IDBase: s.base}
	c, err := st.Commit(ctx, s.image, ch, dest)
	runtime.KeepAlive(s.upper)
	return c, s.Err(err)
}
