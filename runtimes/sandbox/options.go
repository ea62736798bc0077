package sandbox

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
)

// Name is the registered name of this runtime.
const Name = "sandbox"

// Defaults of Options: what a sandbox gets without any setting.
const (
	DefaultMemory  = 2 << 30   // bytes of memory for the whole sandbox
	DefaultPIDs    = 1024      // processes and threads
	DefaultTmpSize = 512 << 20 // bytes of /tmp (a tmpfs, also counted as memory)
	DefaultShmSize = 64 << 20  // bytes of /dev/shm
	// DefaultWorkspaceSize and DefaultWorkspaceInodes are the disk
	// quota of a temporary workspace (a tmpfs, also counted as memory).
	DefaultWorkspaceSize   = 1 << 30
	DefaultWorkspaceInodes = 1 << 18
	// DefaultRootSize is what a sandbox made from an image may write
	// over the image's root (a tmpfs, also counted as memory).
	DefaultRootSize = 1 << 30
	DefaultUID      = 1000 // the user commands run as, inside
	DefaultGID      = 1000
	// DefaultUIDBase is the first host uid of the ranges mapped into
	// sandboxes: sandbox slot n gets host uids base+n*65536 to
	// base+n*65536+65535 for its uids 0 to 65535.
	DefaultUIDBase = 1 << 30
	// DefaultStateDir holds one directory per live sandbox (owner, cgroup,
	// socket), used to clean up after an execbox process that died.
	DefaultStateDir = "/run/execbox/sandbox"
	// Workspace is where the workspace is mounted inside every sandbox.
	Workspace = "/workspace"
)

// Network is a sandbox's network mode.
type Network string

const (
	// NetworkNone gives the sandbox a network namespace of its own with
	// only a loopback interface: servers started by one command are
	// reachable from the next over 127.0.0.1, and nothing else is.
	NetworkNone Network = "none"
	// NetworkHost shares the host's network namespace: the sandbox
	// reaches (and is reachable from) everything the host does,
	// including services bound to the host's loopback.
	NetworkHost Network = "host"
	// A future "allow" mode will give the sandbox its own namespace with
	// egress restricted to a list of hosts; its list will be a separate
	// setting, so "none" and "host" keep their meaning.
)

// Options configure the sandbox runtime. The zero value gives the
// defaults above. In execbox.yaml they are the runtimes.sandbox section;
// memory, pids and cpus are also the defaults of every sandbox's limits
// (Spec.Limits, the --memory, --pids and --cpus flags, override them per
// sandbox), and network has the flag --network.
type Options struct {
	// Memory caps the memory of the whole sandbox: every process and
	// its tmpfs files. YAML runtimes.sandbox.memory ("2GiB", "512M" or a
	// number of bytes). Default DefaultMemory.
	Memory Size `json:"memory,omitempty"`
	// PIDs caps processes and threads. Default DefaultPIDs.
	PIDs int64 `json:"pids,omitempty"`
	// CPUs caps CPU bandwidth in cores. Default 0: no cap.
	CPUs float64 `json:"cpus,omitempty"`
	// Network is "none" (default) or "host".
	Network Network `json:"network,omitempty"`
	// TmpSize is the size of the sandbox's /tmp. Default DefaultTmpSize.
	TmpSize Size `json:"tmp_size,omitempty"`
	// ShmSize is the size of /dev/shm. Default DefaultShmSize.
	ShmSize Size `json:"shm_size,omitempty"`
	// WorkspaceSize is the disk quota of a temporary workspace in bytes:
	// it is a tmpfs of that size (its pages are charged to the sandbox's
	// memory), and a command writing past it gets ENOSPC. Negative: no
	// quota, a plain directory in TempDir. YAML
	// runtimes.sandbox.workspace_size. Default DefaultWorkspaceSize.
	WorkspaceSize Size `json:"workspace_size,omitempty"`
	// WorkspaceInodes caps the files of a temporary workspace with a
	// quota. YAML runtimes.sandbox.workspace_inodes. Default
	// DefaultWorkspaceInodes.
	WorkspaceInodes int64 `json:"workspace_inodes,omitempty"`
	// RootFS is a directory used as the sandbox's root file system (for
	// example an image unpacked), read-only, instead of the host's
	// system directories. Default: the host's.
	RootFS string `json:"rootfs,omitempty"`
	// RootSize is what a sandbox made from an image (Spec.Image) may
	// write over the image's files: the per-sandbox upper layer of its
	// root is a tmpfs of that size, its pages charged to the sandbox's
	// memory. YAML runtimes.sandbox.root_size. Default DefaultRootSize.
	RootSize Size `json:"root_size,omitempty"`
	// AgentBinary is a statically linked build of execbox (make build
	// makes one) that the sandbox's init and agent run from instead of
	// this program. A sandbox made from an image needs a static one: the
	// agent runs inside the image's root, where this program's loader and
	// C library are not. Default: this program, or for an image when this
	// program is dynamically linked, a static build of execbox made once
	// with the go command and cached ($XDG_CACHE_HOME/execbox/agent,
	// /var/cache/execbox/agent for root).
	AgentBinary string `json:"agent_binary,omitempty"`
	// ImageDir and ImageMaxSize are the image store's (image.Options
	// Dir and MaxSize), opened (OpenImages) when a sandbox first asks
	// for an image.
	// In execbox.yaml: images.dir and images.max_size. Default: the
	// image package's.
	ImageDir     string `json:"image_dir,omitempty"`
	ImageMaxSize Size   `json:"image_max_size,omitempty"`
	// Images, if set, is the store to use instead (for programs that
	// share one).
	Images Images `json:"-"`
	// ReadOnlyPaths are more host paths mounted read-only at the same
	// place, e.g. /opt/toolchains. Default none.
	ReadOnlyPaths []string `json:"ro_paths,omitempty"`
	// UID and GID are the identity commands run as when the spec sets no
	// user. Default 1000:1000.
	UID *uint32 `json:"uid,omitempty"`
	GID *uint32 `json:"gid,omitempty"`
	// UIDBase is the first host uid of sandboxes' uid ranges. Default
	// DefaultUIDBase.
	UIDBase uint32 `json:"uid_base,omitempty"`
	// StateDir is where live sandboxes are recorded. Default
	// DefaultStateDir.
	StateDir string `json:"state_dir,omitempty"`
	// TempDir is where temporary workspaces are made; empty means
	// os.TempDir().
	TempDir string `json:"temp_dir,omitempty"`
	// CgroupParent is the cgroup (relative to the hierarchy's root) under
	// which sandboxes' cgroups are made. Default: a directory "execbox"
	// below execbox's own cgroup.
	CgroupParent string `json:"cgroup_parent,omitempty"`

	// Logger; nil discards.
	Logger *slog.Logger `json:"-"`
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.Memory == 0 {
		o.Memory = DefaultMemory
	}
	if o.PIDs == 0 {
		o.PIDs = DefaultPIDs
	}
	if o.Network == "" {
		o.Network = NetworkNone
	}
	if o.TmpSize == 0 {
		o.TmpSize = DefaultTmpSize
	}
	if o.ShmSize == 0 {
		o.ShmSize = DefaultShmSize
	}
	if o.WorkspaceSize == 0 {
		o.WorkspaceSize = DefaultWorkspaceSize
	}
	if o.WorkspaceInodes == 0 {
		o.WorkspaceInodes = DefaultWorkspaceInodes
	}
	if o.RootSize == 0 {
		o.RootSize = DefaultRootSize
	}
	if o.UID == nil {
		u := uint32(DefaultUID)
		o.UID = &u
	}
	if o.GID == nil {
		g := uint32(DefaultGID)
		o.GID = &g
	}
	if o.UIDBase == 0 {
		o.UIDBase = DefaultUIDBase
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// validate reports every problem of o, naming fields as in execbox.yaml.
func (o Options) validate() []error {
	var errs []error
	f := func(field string) string { return "runtimes." + Name + "." + field }
	if o.Memory < 0 {
		errs = append(errs, execbox.Invalid(f("memory"), "must not be negative"))
	}
	if o.PIDs < 0 {
		errs = append(errs, execbox.Invalid(f("pids"), "must not be negative"))
	}
	if o.CPUs < 0 {
		errs = append(errs, execbox.Invalid(f("cpus"), "must not be negative"))
	}
	switch o.Network {
	case "", NetworkNone, NetworkHost:
	default:
		errs = append(errs, execbox.Invalid(f("network"), "unknown network mode %q (want none or host)", o.Network))
	}
	if o.TmpSize < 0 || o.ShmSize < 0 {
		errs = append(errs, execbox.Invalid(f("tmp_size"), "sizes must not be negative"))
	}
	if o.RootSize < 0 {
		errs = append(errs, execbox.Invalid(f("root_size"), "must not be negative"))
	}
	if o.AgentBinary != "" && !strings.HasPrefix(o.AgentBinary, "/") {
		errs = append(errs, execbox.Invalid(f("agent_binary"), "%q is not an absolute path", o.AgentBinary))
	}
	if o.WorkspaceInodes < 0 {
		errs = append(errs, execbox.Invalid(f("workspace_inodes"), "must not be negative"))
	}
	if o.RootFS != "" && !strings.HasPrefix(o.RootFS, "/") {
		errs = append(errs, execbox.Invalid(f("rootfs"), "%q is not an absolute path", o.RootFS))
	}
	for i, p := range o.ReadOnlyPaths {
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("%s[%d]", f("ro_paths"), i), "%q is not a clean absolute path", p))
		}
	}
	if o.UID != nil && *o.UID >= AgentID || o.GID != nil && *o.GID >= AgentID {
		errs = append(errs, execbox.Invalid(f("uid"), "uid and gid must be below %d (the agent's)", AgentID))
	}
	if o.UIDBase != 0 && uint64(o.UIDBase)+uint64(maxSlots)*rangeSize > 1<<32-1 {
		errs = append(errs, execbox.Invalid(f("uid_base"), "%d leaves no room for %d ranges of %d uids", o.UIDBase, maxSlots, rangeSize))
	}
	return errs
}

// rangeSize is the number of uids (and gids) mapped into a sandbox.
const rangeSize = 65536

// maxInsideID is the largest uid or gid that exists inside a sandbox.
const maxInsideID = rangeSize - 1

// AgentID is the inside uid and gid of the sandbox's init and agent
// (host uid base+65535): reserved, so that no command, not even one run
// as root inside, shares their identity and may signal, stop or trace
// them or open their /proc entries. A user asking for it is refused.
const AgentID = maxInsideID

// maxSlots bounds how many sandboxes may live at once on a machine: each
// takes a range of host uids of its own.
const maxSlots = 16384

// Size is a number of bytes. In settings it is a number, or a string with
// an optional binary unit: "512M", "2GiB", "1.5G".
type Size int64

// UnmarshalJSON accepts a number or a size string.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size: want a number or a string like \"512M\"")
	}
	v, err := ParseSize(str)
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// ParseSize parses "1024", "64K", "512M", "2G", "1T" (binary units; an
// optional "i" and "B" are accepted: "2GiB").
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	t = strings.TrimSpace(t)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid size %q", s)
		}
		return n * mult, nil
	}
	// A fraction ("1.5G"). NaN, infinities and values past int64 are
	// refused: converting them to int64 gives an arbitrary number.
	v, err := strconv.ParseFloat(t, 64)
	b := v * float64(mult)
	if err != nil || !(b >= 0 && b < math.MaxInt64) {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int64(b), nil
}
