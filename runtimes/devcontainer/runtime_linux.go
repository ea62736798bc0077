package devcontainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/boundary"
	"github.com/execbox/execbox/internal/hostpath"
	"github.com/execbox/execbox/internal/provision"
	"github.com/execbox/execbox/internal/undo"
	"github.com/execbox/execbox/runtimes/docker"
)

// Labels of the containers this runtime starts, beside the reference
// tools' (labelLocalFolder, labelConfigFile, labelMetadata).
const (
	labelRuntime = "dev.execbox.runtime" // Name
	labelOwner   = "dev.execbox.owner"   // the process whose sandbox removes it at Close; none if kept
	labelTemp    = "dev.execbox.temp"    // its temporary workspace on the host
)

// tempPrefix names the temporary workspaces, in os.TempDir().
const tempPrefix = "execbox-devcontainer-"

// keepAlive is the process of a container the runtime starts, as the
// reference tools' (a fixed script, not a command of anyone's): it runs
// the image's own command when overrideCommand is false ("$@"), then
// waits, and exits on SIGTERM.
const keepAlive = "echo Container started\ntrap \"exit 0\" 15\nexec \"$@\"\nwhile sleep 1 & wait $!; do :; done"

// Runtime is the devcontainer runtime. It is safe for concurrent use.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	docker *docker.Runtime

	sweepOnce sync.Once
	// folders serializes, with Keep, the Creates of one folder (by its
	// real path): the second finds what the first started, once ready.
	folders sync.Map // string -> *sync.Mutex
}

var _ execbox.Runtime = (*Runtime)(nil)

// New returns a devcontainer runtime. It does not reach the engine:
// Health and Create do.
func New(opts Options) (*Runtime, error) {
	o, err := opts.withDefaults()
	d, derr := docker.New(docker.Options{Host: o.Host, Network: o.Network, Memory: o.Memory, PIDs: o.PIDs, CPUs: o.CPUs,
		Pull: o.Pull, AgentBinary: o.AgentBinary, Logger: o.Logger})
	if err := errors.Join(err, ourFields(derr)); err != nil {
		return nil, err
	}
	return &Runtime{opts: o, log: o.Logger, docker: d}, nil
}

// Name implements execbox.Runtime.
func (r *Runtime) Name() string { return Name }

// Capabilities implements execbox.Runtime: the docker runtime's, but the
// image is devcontainer.json's and the container's caps are its own.
func (r *Runtime) Capabilities() execbox.Capabilities {
	return execbox.Capabilities{Isolation: true, Rlimits: true, User: true}
}

// Health implements execbox.Runtime: the engine and the agent program,
// as the docker runtime checks them.
func (r *Runtime) Health(ctx context.Context) execbox.Health {
	h := r.docker.Health(ctx)
	if !h.Available {
		return execbox.Health{Detail: strings.ReplaceAll(h.Detail, "runtimes.docker.", "runtimes.devcontainer.")}
	}
	engine, _, _ := strings.Cut(h.Detail, ";")
	cfg := "the workspace's devcontainer.json"
	if r.opts.Config != "" {
		cfg = r.opts.Config
	}
	return execbox.Health{Available: true, Detail: fmt.Sprintf("%s; config %s; a container it starts: network %s, keep %v",
		engine, cfg, r.opts.Network, r.opts.Keep)}
}

// project is the folder a sandbox is for, and its devcontainer.json.
type project struct {
	folder string // absolute, as given: the label's value
	real   string // symlinks resolved: what is mounted
	config string // devcontainer.json, absolute (under folder when it is the workspace's)
	temp   bool   // a temporary workspace, made for the sandbox
}

// Create implements execbox.Runtime: a sandbox in the running container
// of the folder (Spec.Workspace) if there is one, else in one it starts.
func (r *Runtime) Create(ctx context.Context, spec execbox.Spec) (_ execbox.Sandbox, err error) {
	defer func() { err = boundary.CreateError(err) }()
	if err := r.checkSpec(&spec); err != nil {
		return nil, err
	}
	var u undo.Stack
	defer u.OnError(&err)
	proj, err := r.project(spec, &u)
	if err != nil {
		return nil, err
	}
	cfg, err := r.loadConfig(proj)
	if err != nil {
		return nil, err
	}
	dc, err := r.docker.Engine()
	if err != nil {
		return nil, fmt.Errorf("docker client: %v: %w", err, execbox.ErrUnavailable)
	}
	r.sweepOnce.Do(func() { r.sweep(ctx, dc) })
	if r.opts.Keep && !proj.temp {
		m, _ := r.folders.LoadOrStore(proj.real, &sync.Mutex{})
		mu := m.(*sync.Mutex)
		mu.Lock()
		defer mu.Unlock()
	}
	if !proj.temp {
		cid, err := r.find(ctx, dc, proj)
		if err != nil {
			return nil, err
		}
		if cid != "" {
			r.log.Debug("found the folder's container", "container", cid[:12], "folder", proj.folder)
			// Not returned as it is: a nil *Sandbox would be a non-nil
			// execbox.Sandbox.
			sb, err := r.attach(ctx, dc, cid, spec, cfg, proj, false)
			if err != nil {
				return nil, err
			}
			return sb, nil
		}
	}
	cid, err := r.start(ctx, dc, cfg, proj, &u)
	if err != nil {
		return nil, err
	}
	sb, err := r.attach(ctx, dc, cid, spec, cfg, proj, true)
	if err != nil {
		return nil, err
	}
	u.Release() // sb.Close removes what is to go
	return sb, nil
}

// checkSpec refuses, before anything is made, a spec this runtime cannot
// honour, naming every problem.
func (r *Runtime) checkSpec(spec *execbox.Spec) error {
	errs := []error{spec.Validate(), docker.CapHint(Name, execbox.CheckLimits(Name, r.Capabilities(), spec.Limits, "limits.")), execbox.CheckServerFields(Name, spec)}
	if spec.Image != "" {
		errs = append(errs, &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported,
			Problem: "the devcontainer runtime's image is devcontainer.json's (image or build)"})
	}
	if spec.Workspace == "" && r.opts.Config == "" {
		errs = append(errs, execbox.Invalid("workspace", "is required by the devcontainer runtime: the folder with .devcontainer/devcontainer.json or .devcontainer.json (or set runtimes.devcontainer.config)"))
	}
	if err := provision.CheckAssets(spec); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// project finds the folder and its devcontainer.json; a temporary
// workspace is made (and its removal added to u).
func (r *Runtime) project(spec execbox.Spec, u *undo.Stack) (project, error) {
	if spec.Workspace == "" {
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return project{}, fmt.Errorf("temporary workspace: %w", err)
		}
		u.Add(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			return project{}, fmt.Errorf("temporary workspace: %w", err)
		}
		return project{folder: dir, real: dir, config: r.opts.Config, temp: true}, nil
	}
	dir, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return project{}, execbox.Invalid("workspace", "%v", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return project{}, execbox.Invalid("workspace", "%s is not an existing directory", dir)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return project{}, execbox.Invalid("workspace", "%s is not an existing directory", dir)
	}
	if err := hostpath.CheckWorkspace(dir, real, spec.AllowSystemWorkspace); err != nil {
		return project{}, err
	}
	p := project{folder: dir, real: real, config: r.opts.Config}
	if p.config != "" {
		return p, nil
	}
	for _, rel := range []string{".devcontainer/devcontainer.json", ".devcontainer.json"} {
		if fi, err := os.Stat(filepath.Join(real, rel)); err == nil && fi.Mode().IsRegular() {
			p.config = filepath.Join(dir, rel)
			return p, nil
		}
	}
	subs, _ := filepath.Glob(filepath.Join(real, ".devcontainer", "*", "devcontainer.json"))
	switch len(subs) {
	case 0:
		return p, execbox.Invalid("workspace", "%s has no .devcontainer/devcontainer.json or .devcontainer.json (or set runtimes.devcontainer.config)", dir)
	case 1:
		rel, _ := filepath.Rel(real, subs[0])
		p.config = filepath.Join(dir, rel)
		return p, nil
	}
	return p, execbox.Invalid("workspace", "%s has %d devcontainer.json files under .devcontainer/: choose one with runtimes.devcontainer.config", dir, len(subs))
}

// maxConfigSize bounds a devcontainer.json.
const maxConfigSize = 1 << 20

// loadConfig reads and parses the project's devcontainer.json. The
// workspace's own is read through the folder (a link in it cannot lead
// out of it): commands can write it.
func (r *Runtime) loadConfig(p project) (*config, error) {
	var f *os.File
	var err error
	if rel, inside := within(p.folder, p.config); inside && r.opts.Config == "" {
		var root *os.Root
		if root, err = os.OpenRoot(p.real); err == nil {
			f, err = root.Open(rel)
			root.Close()
		}
	} else {
		f, err = os.Open(p.config)
	}
	if err != nil {
		field := "workspace"
		if r.opts.Config != "" {
			field = "runtimes.devcontainer.config"
		}
		return nil, execbox.Invalid(field, "%v", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, execbox.Invalid("devcontainer", "%s: %v", p.config, err)
	}
	if len(src) > maxConfigSize {
		return nil, execbox.Invalid("devcontainer", "%s is larger than %d bytes", p.config, maxConfigSize)
	}
	return parseConfig(src, p.config, vars{localFolder: p.folder, localEnv: r.localEnv})
}

// localEnv is ${localEnv:NAME}: only names the configuration allows.
func (r *Runtime) localEnv(name string) (string, bool, error) {
	if !slices.Contains(r.opts.AllowedEnv, name) {
		return "", false, fmt.Errorf("${localEnv:%s}: %s is not in runtimes.devcontainer.allowed_env (commands can write this file, so it reads the host's environment only by the names allowed)", name, name)
	}
	v, ok := os.LookupEnv(name)
	return v, ok, nil
}

// within reports whether path is dir or below it, and path relative to
// dir.
func within(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// find returns the running container of the folder, "" if there is none:
// labelled with it (as given, or resolved) by the reference tools or by
// this runtime (kept), for this devcontainer.json or for none (older
// tools). A container another sandbox started for itself (it removes it
// at Close) is not shared.
func (r *Runtime) find(ctx context.Context, dc *client.Client, p project) (string, error) {
	configs := []string{p.config}
	if rel, ok := within(p.folder, p.config); ok {
		configs = append(configs, filepath.Join(p.real, rel))
	}
	var best container.Summary
	bestScore := 0
	for _, folder := range slices.Compact([]string{p.folder, p.real}) {
		list, err := dc.ContainerList(ctx, client.ContainerListOptions{
			Filters: make(client.Filters).Add("label", labelLocalFolder+"="+folder).Add("status", "running")})
		if err != nil {
			return "", fmt.Errorf("list the containers of %s: %w", folder, engineErr(err))
		}
		for _, c := range list.Items {
			if c.Labels[labelOwner] != "" {
				continue
			}
			score := 1 // no config label: an older tool's
			switch cf := c.Labels[labelConfigFile]; {
			case slices.Contains(configs, cf):
				score = 2
			case cf != "":
				continue // another devcontainer.json of the folder
			}
			if score > bestScore || score == bestScore && c.Created > best.Created {
				best, bestScore = c, score
			}
		}
	}
	return best.ID, nil
}

// start builds or pulls the image and starts a container for the folder
// as the reference tools would, without the agent; its removal is added
// to u.
func (r *Runtime) start(ctx context.Context, dc *client.Client, cfg *config, p project, u *undo.Stack) (string, error) {
	errs := slices.Clone(cfg.startErrs)
	if cfg.image == "" && cfg.build == nil {
		errs = append(errs, &execbox.FieldError{Field: fieldName("image"),
			Problem: fmt.Sprintf("one of image or build.dockerfile is required to start a container, and no running container of %s was found (in %s)", p.folder, cfg.path)})
	}
	mounts, pins, err := r.mounts(ctx, dc, cfg, p)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	defer closePins(pins)
	var imageID string
	if cfg.build != nil {
		imageID, err = r.build(ctx, dc, cfg, p)
	} else {
		imageID, err = r.docker.EnsureImage(ctx, cfg.image)
		var fe *execbox.FieldError
		if errors.As(err, &fe) && fe.Field == "image" {
			fe.Field = fieldName("image")
		}
	}
	if err != nil {
		return "", err
	}
	img, err := dc.ImageInspect(ctx, imageID)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", imageID, engineErr(err))
	}
	var imgLabel, imgUser string
	var imgCmd []string
	if c := img.Config; c != nil {
		imgLabel, imgUser = c.Labels[labelMetadata], c.User
		imgCmd = slices.Concat(c.Entrypoint, c.Cmd)
	}
	md := parseMetadata(imgLabel)

	env := map[string]string{}
	for k, v := range md.containerEnv {
		env[k] = v
	}
	for k, v := range cfg.containerEnv {
		env[k] = v
	}
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)
	user := firstOf(cfg.containerUser, md.containerUser, imgUser)

	labels := map[string]string{
		labelLocalFolder: p.folder,
		labelConfigFile:  p.config,
		labelMetadata:    metadataLabel(imgLabel, cfg),
		labelRuntime:     Name,
	}
	removable := !r.opts.Keep || p.temp
	if removable {
		labels[labelOwner] = r.docker.Owner()
		// The agent program, read-only, for Attach not to copy it: a
		// container that goes with its sandbox never outlives the
		// program (a kept one gets a copy, which a restart finds).
		bin, err := r.docker.AgentBinary(ctx)
		if err != nil {
			return "", ourFields(err)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: bin, Target: docker.AgentPath, ReadOnly: true})
	}
	if p.temp {
		labels[labelTemp] = p.real
	}
	cmd := []string{"-c", keepAlive, "-"}
	if cfg.overrideCommand != nil && !*cfg.overrideCommand {
		cmd = append(cmd, imgCmd...)
	}
	// Docker's seccomp profile with no set-id bits on any file: root in
	// the container (sudo) is root on the folder's files on the host,
	// and a setuid-root program left there would be host root.
	profile, err := docker.SeccompProfile()
	if err != nil {
		return "", err
	}
	init := true
	hc := &container.HostConfig{
		Init:        &init, // reaps what commands orphan
		NetworkMode: container.NetworkMode(r.opts.Network),
		Mounts:      mounts,
		SecurityOpt: []string{"seccomp=" + profile},
		LogConfig:   container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
	}
	if m := limit(int64(r.opts.Memory), docker.DefaultMemory); m > 0 {
		hc.Memory, hc.MemorySwap = m, m
	}
	if n := limit(r.opts.PIDs, docker.DefaultPIDs); n > 0 {
		hc.PidsLimit = &n
	}
	if r.opts.CPUs > 0 {
		hc.NanoCPUs = int64(r.opts.CPUs * 1e9)
	}
	res, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: imageID, Entrypoint: []string{"/bin/sh"}, Cmd: cmd, User: user,
			Env: envList, Labels: labels},
		HostConfig: hc,
	})
	if err != nil {
		return "", fmt.Errorf("create the container of %s: %w", p.folder, engineErr(err))
	}
	u.Add(func() { r.docker.RemoveContainer(res.ID) })
	if _, err := dc.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("start the container of %s: %w", p.folder, engineErr(err))
	}
	if err := r.docker.VerifyMounts(ctx, res.ID, pins); err != nil {
		return "", err
	}
	r.log.Debug("started a container", "container", res.ID[:12], "folder", p.folder, "image", imageID)
	return res.ID, nil
}

// limit is a cap of Options: the docker runtime's default for 0, none
// for a negative one.
func limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// metadataLabel is the devcontainer.metadata label of a container the
// runtime starts, for the reference tools that attach to it: the image's
// entries, then what execbox took of devcontainer.json.
func metadataLabel(image string, cfg *config) string {
	var entries []json.RawMessage
	if image != "" && json.Unmarshal([]byte(image), &entries) != nil {
		entries = []json.RawMessage{json.RawMessage(image)}
		if !json.Valid(entries[0]) {
			entries = nil
		}
	}
	own := map[string]any{}
	if cfg.remoteUser != "" {
		own["remoteUser"] = cfg.remoteUser
	}
	if cfg.containerUser != "" {
		own["containerUser"] = cfg.containerUser
	}
	if len(cfg.remoteEnv) > 0 {
		own["remoteEnv"] = cfg.remoteEnv
	}
	if len(cfg.containerEnv) > 0 {
		own["containerEnv"] = cfg.containerEnv
	}
	b, _ := json.Marshal(own)
	b, _ = json.Marshal(append(entries, b))
	return string(b)
}

// mounts are the container's mounts: the workspace's, then
// devcontainer.json's. A bind mount's source must be the folder, below
// it, or below a directory of runtimes.devcontainer.allowed_mounts, and
// a named volume must be one this runtime made for the folder or one of
// runtimes.devcontainer.allowed_volumes (see volumeSource): commands can
// write the file. Each bind source is pinned (O_PATH) as it was checked,
// by target, for VerifyMounts once the container runs; the caller closes
// the pins.
func (r *Runtime) mounts(ctx context.Context, dc *client.Client, cfg *config, p project) ([]mount.Mount, map[string]*os.File, error) {
	ws := mountSpec{typ: "bind", source: p.real, target: "/workspaces/" + filepath.Base(p.folder)}
	wsKey := ""
	if cfg.workspaceMount != nil {
		ws, wsKey = *cfg.workspaceMount, "workspaceMount"
	}
	var out []mount.Mount
	pins := map[string]*os.File{}
	var errs []error
	var toMake []string // volumes to make once every mount is allowed
	add := func(key string, m mountSpec) {
		mt := mount.Mount{Type: mount.Type(m.typ), Source: m.source, Target: m.target, ReadOnly: m.readOnly}
		switch m.typ {
		case "bind":
			pin, err := r.bindSource(m.source, p)
			if err != nil {
				field := "workspace"
				if key != "" {
					field = fieldName(key)
				}
				errs = append(errs, &execbox.FieldError{Field: field, Kind: execbox.ErrPermission, Problem: fmt.Sprintf("%v (in %s)", err, cfg.path)})
				return
			}
			if old := pins[m.target]; old != nil {
				old.Close()
			}
			pins[m.target] = pin
			mt.Source = pin.Name()
		case "volume":
			missing, err := r.volumeSource(ctx, dc, m.source, p)
			if missing {
				toMake = append(toMake, m.source)
			}
			if err != nil {
				field := "workspace"
				if key != "" {
					field = fieldName(key)
				}
				var fe *execbox.FieldError
				if errors.As(err, &fe) {
					fe.Field, fe.Problem = field, fmt.Sprintf("%s (in %s)", fe.Problem, cfg.path)
				}
				errs = append(errs, err)
				return
			}
			if m.noCopy {
				mt.VolumeOptions = &mount.VolumeOptions{NoCopy: true}
			}
		case "tmpfs":
			if m.tmpSize != 0 || m.tmpMode != 0 {
				mt.TmpfsOptions = &mount.TmpfsOptions{SizeBytes: m.tmpSize, Mode: os.FileMode(m.tmpMode)}
			}
		}
		out = append(out, mt)
	}
	add(wsKey, ws)
	for i, m := range cfg.mounts {
		add(fmt.Sprintf("mounts[%d]", i), m)
	}
	if len(errs) == 0 {
		for _, name := range toMake {
			errs = append(errs, r.makeVolume(ctx, dc, name, p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		closePins(pins)
		return nil, nil, err
	}
	return out, pins, nil
}

func closePins(pins map[string]*os.File) {
	for _, f := range pins {
		f.Close()
	}
}

// bindSource opens a bind mount's source (O_PATH, named by its real
// path) and checks that it is allowed.
func (r *Runtime) bindSource(src string, p project) (*os.File, error) {
	fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bind source %s: %w", src, err)
	}
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind source %s: %w", src, err)
	}
	pin := os.NewFile(uintptr(fd), real)
	if _, ok := within(p.real, real); ok {
		return pin, nil
	}
	for _, d := range r.opts.AllowedMounts {
		if rd, err := filepath.EvalSymlinks(d); err == nil {
			if _, ok := within(rd, real); ok {
				return pin, nil
			}
		}
	}
	pin.Close()
	return nil, fmt.Errorf("bind source %s is outside the workspace folder %s and runtimes.devcontainer.allowed_mounts (commands can write this file)", src, p.folder)
}

// labelVolumeFolder marks a named volume this runtime made for the
// folder (its value) of a devcontainer.json that names it.
const labelVolumeFolder = "dev.execbox.devcontainer.folder"

// volumeSource checks that devcontainer.json may mount the named volume
// name into a container of p's folder. Commands can write the file, so
// it could otherwise mount any volume of the engine (another project's,
// a database's) read-write. Allowed: an anonymous volume (no name), a
// name of runtimes.devcontainer.allowed_volumes, any volume of the
// operator's runtimes.devcontainer.config (see operatorConfig), and a
// volume this runtime made, labelled for this folder; a volume that does not exist
// yet is allowed and missing, for makeVolume to make once every mount
// is. Any other is an ErrPermission *FieldError.
func (r *Runtime) volumeSource(ctx context.Context, dc *client.Client, name string, p project) (missing bool, err error) {
	if name == "" || slices.Contains(r.opts.AllowedVolumes, name) || r.operatorConfig(p) {
		return false, nil
	}
	v, err := dc.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("volume %s: %w", name, engineErr(err))
	}
	return false, ourVolume(v.Volume.Name, v.Volume.Labels, p)
}

// operatorConfig reports whether p's devcontainer.json is
// runtimes.devcontainer.config outside the workspace: the operator's,
// which no command can write, so its volumes are the operator's choice
// (and a temporary workspace, a new folder each time, can share them).
func (r *Runtime) operatorConfig(p project) bool {
	if r.opts.Config == "" {
		return false
	}
	real, err := filepath.EvalSymlinks(r.opts.Config)
	if err != nil {
		return false
	}
	_, inFolder := within(p.folder, r.opts.Config)
	_, inReal := within(p.real, real)
	return !inFolder && !inReal
}

// ourVolume checks that a volume's labels say this runtime made it for
// p's folder.
func ourVolume(name string, labels map[string]string, p project) error {
	if labels[labelRuntime] == Name && labels[labelVolumeFolder] == p.folder {
		return nil
	}
	return &execbox.FieldError{Field: "workspace", Kind: execbox.ErrPermission,
		Problem: fmt.Sprintf("volume %s was not made by execbox for %s and is not in runtimes.devcontainer.allowed_volumes (commands can write this file)", name, p.folder)}
}

// makeVolume makes the named volume for p's folder, labelled with it, as
// docker run would make it (unlabelled) for a mount naming it. The
// volume outlives the container, as the reference tools' volumes do, for
// the folder's next container.
func (r *Runtime) makeVolume(ctx context.Context, dc *client.Client, name string, p project) error {
	res, err := dc.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name,
		Labels: map[string]string{labelRuntime: Name, labelVolumeFolder: p.folder}})
	if err != nil {
		return fmt.Errorf("create volume %s: %w", name, engineErr(err))
	}
	r.log.Debug("made a volume", "volume", name, "folder", p.folder)
	// Made meanwhile by someone else, the engine answers with that one:
	// its labels decide.
	return ourVolume(name, res.Volume.Labels, p)
}

// attach makes the sandbox: the agent injected into the container, as
// remoteUser in workspaceFolder with remoteEnv; in a container it
// started (started), the lifecycle commands first; then the spec's
// snapshot, assets and setup.
func (r *Runtime) attach(ctx context.Context, dc *client.Client, cid string, spec execbox.Spec, cfg *config, p project, started bool) (_ *Sandbox, err error) {
	ins, err := dc.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("container %.12s: %w", cid, engineErr(err))
	}
	c := ins.Container
	var cenv []string
	var clabels map[string]string
	var cuser string
	if c.Config != nil {
		cenv, clabels, cuser = c.Config.Env, c.Config.Labels, c.Config.User
	}
	md := parseMetadata(clabels[labelMetadata])

	// The workspace folder: the file's; else where the folder is mounted
	// (the reference tools mount the git root above it, in which case it
	// is a directory below); else the default.
	ws := cfg.workspaceFolder
	if !cfg.workspaceFolderSet {
		for _, m := range c.Mounts {
			if m.Type != mount.TypeBind {
				continue
			}
			for _, f := range []string{p.real, p.folder} {
				if rel, ok := within(m.Source, f); ok {
					ws = filepath.ToSlash(filepath.Join(m.Destination, rel))
				}
			}
		}
	}

	// remoteEnv (the image's and the container's metadata, then the
	// file's) over the container's environment, ${containerEnv:NAME}
	// substituted.
	envMap := map[string]string{}
	var names []string
	for _, kv := range cenv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := envMap[k]; !dup {
				names = append(names, k)
			}
			envMap[k] = v
		}
	}
	sub := substituter{local: p.folder, container: ws, id: devcontainerID(p.folder, p.config), env: r.localEnv, containerEnv: maps(envMap)}
	var errs []error
	apply := func(re map[string]*string) {
		keys := make([]string, 0, len(re))
		for k := range re {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := re[k]
			if v == nil {
				delete(envMap, k)
				continue
			}
			val, err := sub.replace(*v)
			if err != nil {
				errs = append(errs, &execbox.FieldError{Field: fieldName("remoteEnv." + k), Problem: err.Error()})
			}
			if _, ok := envMap[k]; !ok {
				names = append(names, k)
			}
			envMap[k] = val
		}
	}
	apply(md.remoteEnv)
	apply(cfg.remoteEnv)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	env := []string{}
	for _, k := range names {
		if v, ok := envMap[k]; ok {
			env = append(env, k+"="+v)
			delete(envMap, k)
		}
	}

	// The user: the spec's, else remoteUser, else containerUser, else
	// the container's.
	user := spec.User
	userField := "user"
	if user == nil {
		name := firstOf(cfg.remoteUser, md.remoteUser, cfg.containerUser, md.containerUser, cuser)
		if cfg.remoteUser != "" {
			userField = fieldName("remoteUser")
		}
		uu, err := r.docker.ContainerUser(ctx, cid, name)
		if err != nil {
			var fe *execbox.FieldError
			if errors.As(err, &fe) && fe.Field == "user" {
				fe.Field = userField
			}
			return nil, err
		}
		user = &uu
	}
	if p.temp {
		if err := os.Lchown(p.real, int(user.UID), int(user.GID)); err != nil {
			return nil, fmt.Errorf("temporary workspace: %w", err)
		}
	}

	// The agent first, then the container's lifecycle, then the spec's
	// files and setup.
	base := spec
	base.Workspace, base.Snapshot, base.Assets, base.Setup = "", nil, nil, nil
	base.User = user
	dsb, err := r.docker.Attach(ctx, cid, base, docker.AttachOptions{Workspace: ws, Env: env})
	if err != nil {
		err = ourFields(err)
		var fe *execbox.FieldError
		if errors.As(err, &fe) && fe.Field == "workspace" {
			fe.Field = fieldName("workspaceFolder")
		}
		return nil, err
	}
	sb := &Sandbox{Sandbox: dsb, r: r, dc: dc}
	if started {
		sb.remove = !r.opts.Keep || p.temp
		if p.temp {
			sb.tempDir = p.real
		}
	}
	defer func() {
		if err != nil {
			sb.Close()
		}
	}()
	var cmds []lifecycleCommand
	if started {
		cmds = append(cmds, cfg.onCreate...)
	}
	if cfg.postAttach != nil {
		cmds = append(cmds, *cfg.postAttach)
	}
	for _, lc := range cmds {
		if err := r.runLifecycle(ctx, sb, lc); err != nil {
			return nil, err
		}
	}
	if err := provision.Apply(ctx, sb, &spec); err != nil {
		return nil, err
	}
	return sb, nil
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// LifecycleError is returned by Create when a lifecycle command of
// devcontainer.json (postCreateCommand, ...) does not succeed: the
// sandbox cannot be made from it. It matches execbox.ErrInvalidArgument,
// as a *execbox.SetupError does.
type LifecycleError struct {
	Key    string   // "postCreateCommand"
	Name   string   // the entry's name in the object form, else ""
	Cmd    []string // argv, or ["/bin/sh", "-c", script]
	Result execbox.Result
}

func (e *LifecycleError) Error() string {
	out := strings.TrimSpace(e.Result.Stderr.Text())
	if out == "" {
		out = strings.TrimSpace(e.Result.Stdout.Text())
	}
	if len(out) > 2000 {
		out = "..." + out[len(out)-2000:]
	}
	key := e.Key
	if e.Name != "" {
		key += "." + e.Name
	}
	return fmt.Sprintf("devcontainer.%s %q: %s: %s", key, strings.Join(e.Cmd, " "), e.Result.String(), out)
}

// Is makes a LifecycleError match execbox.ErrInvalidArgument.
func (e *LifecycleError) Is(target error) bool { return target == execbox.ErrInvalidArgument }

// runLifecycle runs a lifecycle command: its one step, or its named
// steps in parallel, as the spec says; each as remoteUser in the
// workspace folder, a script with /bin/sh -c (the spec's string form is
// a shell command), an array as argv.
func (r *Runtime) runLifecycle(ctx context.Context, sb execbox.Sandbox, lc lifecycleCommand) error {
	errs := make([]error, len(lc.steps))
	var wg sync.WaitGroup
	for i, st := range lc.steps {
		wg.Go(func() {
			req := execbox.ExecRequest{Command: st.argv, Timeout: time.Duration(r.opts.LifecycleTimeout)}
			cmd := st.argv
			if st.argv == nil {
				req.Command = []string{"/bin/sh", "-c", st.shell}
				cmd = req.Command
			}
			start := time.Now()
			res, err := sb.Exec(ctx, req)
			r.log.Debug("lifecycle command", "key", lc.key, "name", st.name, "result", res.String(), "duration", time.Since(start))
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("devcontainer.%s %q: %w", lc.key, strings.Join(cmd, " "), err)
			case !res.Success():
				errs[i] = &LifecycleError{Key: lc.key, Name: st.name, Cmd: cmd, Result: res}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Sandbox is a sandbox of this runtime: the docker runtime's, in the
// folder's container.
type Sandbox struct {
	*docker.Sandbox
	r       *Runtime
	dc      *client.Client
	remove  bool   // the runtime started the container, and does not keep it
	tempDir string // the temporary workspace, removed at Close

	closeOnce sync.Once
	closeErr  error
}

var _ execbox.Sandbox = (*Sandbox)(nil)

// Close implements execbox.Sandbox: the agent stops, and with it every
// process the sandbox started; a container the runtime started is then
// removed unless kept (Options.Keep), a found one stays as it was.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.remove {
			// Removing the container kills everything in it at once:
			// no need to ask the agent first.
			s.MarkClosed()
			errs = append(errs, s.r.docker.RemoveContainer(s.ContainerID()))
		}
		errs = append(errs, s.Sandbox.Close())
		if s.tempDir != "" {
			errs = append(errs, os.RemoveAll(s.tempDir))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// sweep removes, once per Runtime, the containers (and temporary
// workspaces) of sandboxes whose process died without closing them.
func (r *Runtime) sweep(ctx context.Context, dc *client.Client) {
	n, err := r.Sweep(ctx)
	if err != nil {
		r.log.Warn("sweep of leftover containers", "err", err)
	} else if n > 0 {
		r.log.Info("removed leftover containers of processes that died", "count", n)
	}
}

// Sweep removes the containers this runtime started for sandboxes of
// processes that died without closing them, and their temporary
// workspaces; it returns how many containers it removed. Kept containers
// (Options.Keep) are never swept.
func (r *Runtime) Sweep(ctx context.Context) (int, error) {
	return r.docker.SweepDead(ctx, Name, func(labels map[string]string) {
		if dir := labels[labelTemp]; filepath.Dir(dir) == filepath.Clean(os.TempDir()) && strings.HasPrefix(filepath.Base(dir), tempPrefix) {
			os.RemoveAll(dir)
		}
	})
}

// engineErr is docker.EngineErr.
func engineErr(err error) error { return docker.EngineErr(err) }

// ourFields renames the docker runtime's settings in its errors to this
// runtime's, kinds kept.
func ourFields(err error) error {
	if err == nil || !strings.Contains(err.Error(), "runtimes.docker.") {
		return err
	}
	return execbox.MapFieldErrors(err, func(fe execbox.FieldError) execbox.FieldError {
		fe.Field = strings.Replace(fe.Field, "runtimes.docker.", "runtimes.devcontainer.", 1)
		fe.Problem = strings.ReplaceAll(fe.Problem, "runtimes.docker.", "runtimes.devcontainer.")
		return fe
	})
}
