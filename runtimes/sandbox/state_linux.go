package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/owner"
	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
)

// record is what the state directory of a live sandbox says about it,
// for an execbox process that finds it after its owner died.
type record struct {
	ID string `json:"id"`
	// Owner and OwnerStart identify the execbox process (its PID and
	// start time, so a reused PID is not mistaken for it).
	Owner      int    `json:"owner"`
	OwnerStart uint64 `json:"owner_start"`
	Slot       int    `json:"slot"`
	// Cgroup holds the sandbox's cgroup directories.
	Cgroup map[string]string `json:"cgroup,omitempty"`
	// TempWorkspace is the temporary workspace to remove, if any.
	TempWorkspace string `json:"temp_workspace,omitempty"`
	// InitRoot is the directory of the init's root mount point.
	InitRoot string `json:"init_root,omitempty"`
}

// state is the state directory of the runtime.
type state struct {
	dir string
	// slots is where uid ranges are reserved: one directory for the
	// whole machine (MachineSlots) when execbox is root, so that two
	// execbox processes with different state directories never give
	// sandboxes the same uids; rootless, where no range is taken from
	// the machine, the state directory's own.
	slots string
	// temp is Options.TempDir (or the system's): where temporary
	// workspaces and init roots are made, named after their sandbox.
	temp string
}

// MachineSlots is the machine-wide registry of the uid ranges that root
// execbox processes give their sandboxes, whatever their state directory.
const MachineSlots = "/run/execbox/uid-slots"

func newState(dir, temp string, rootless bool) state {
	if temp == "" {
		temp = os.TempDir()
	}
	if rootless {
		return state{dir: dir, slots: filepath.Join(dir, ".slots"), temp: temp}
	}
	return state{dir: dir, slots: MachineSlots, temp: temp}
}

func (s state) sandboxDir(id string) string { return filepath.Join(s.dir, id) }
func (s state) slotsDir() string            { return s.slots }

// init creates the directories, root's only (0700), parents included:
// records, slots and agent sockets are no business of any other host
// user. (The sandbox's init, nobody on the host, does not reach it: its
// root is built in a directory of its own, see makeInitRoot.)
func (s state) init() error {
	if err := mkdirAllPrivate(s.dir); err != nil {
		return err
	}
	if err := mkdirAllPrivate(s.slotsDir()); err != nil {
		return err
	}
	return os.Chmod(s.dir, 0o700)
}

// mkdirAllPrivate creates dir and its missing parents with mode 0700
// (os.MkdirAll would apply one mode to all, through the umask).
func mkdirAllPrivate(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// makeInitRoot creates the empty directory on which a sandbox's init
// builds its root: <tempDir>/execbox-ID-root-*/root, the outer one
// root's and searchable only (0711, a random name), the inner one the
// sandbox root's (host uid owner; -1 keeps the caller's, as rootless) and
// 0700. It holds nothing on the host (the init's tmpfs lives in the init's
// mount namespace). It returns the outer directory, which the caller
// records and removes.
func makeInitRoot(tempDir, id string, owner int) (outer, root string, err error) {
	outer, err = os.MkdirTemp(tempDir, "execbox-"+id+"-root-")
	if err != nil {
		return "", "", fmt.Errorf("init root: %w", err)
	}
	root = filepath.Join(outer, "root")
	if err = os.Chmod(outer, 0o711); err == nil {
		err = os.Mkdir(root, 0o700)
	}
	if err == nil {
		err = os.Chown(root, owner, owner)
	}
	if err != nil {
		os.RemoveAll(outer)
		return "", "", fmt.Errorf("init root: %w", err)
	}
	return outer, root, nil
}

// write records rec in its sandbox's directory (replacing it whole, so
// that a failure leaves the record that was there).
func (s state) write(rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	p := filepath.Join(s.sandboxDir(rec.ID), "owner.json")
	tmp := p + ".tmp"
	if err = os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state record: %w", err)
	}
	return nil
}

// allocSlot reserves a free uid range for id: the lowest free one, so
// that ranges are reused and with them the user namespaces cached for
// idmapped mounts. Slots are files created with O_EXCL, so concurrent
// execbox processes never share one.
func (s state) allocSlot(id string) (int, error) {
	for n := range maxSlots {
		f, err := os.OpenFile(filepath.Join(s.slotsDir(), strconv.Itoa(n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("uid slot: %w", err)
		}
		_, err = f.WriteString(s.sandboxDir(id))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			// The slot is this call's: it goes, as the caller never
			// learns its number.
			s.freeSlot(n)
			return 0, fmt.Errorf("uid slot: %w", err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("all %d uid ranges are in use: %w", maxSlots, execbox.ErrResourceExhausted)
}

func (s state) freeSlot(n int) {
	_ = os.Remove(filepath.Join(s.slotsDir(), strconv.Itoa(n)))
}

// removeUnnamed removes what of sandbox id is in the temporary
// directory without being in its record: its owner died between making a
// temporary workspace or init root (execbox-ID-*, execbox-ID-root-*) and
// recording it. The name is the sandbox's alone: IDs are random, and id
// is checked to be one.
func (s state) removeUnnamed(id string) error {
	if !validID(id) {
		return nil
	}
	found, err := filepath.Glob(filepath.Join(s.temp, "execbox-"+id+"-*"))
	var errs []error
	for _, p := range found {
		errs = append(errs, removeTempWorkspace(p))
	}
	return errors.Join(append(errs, err)...)
}

// validID reports whether id has the form newID gives: "sb-" and 12
// lowercase hex digits.
func validID(id string) bool {
	hexPart, ok := strings.CutPrefix(id, "sb-")
	if !ok || len(hexPart) != 12 {
		return false
	}
	for _, c := range hexPart {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// procStart returns the start time of process pid (field 22 of
// /proc/PID/stat), or false if it does not exist.
func procStart(pid int) (uint64, bool) {
	n, err := strconv.ParseUint(owner.StartTime(pid), 10, 64)
	return n, err == nil
}

// alive reports whether the process that owns rec still runs.
func (rec *record) alive() bool {
	start, ok := procStart(rec.Owner)
	return ok && start == rec.OwnerStart
}

// sweep removes what sandboxes of dead execbox processes left: the
// processes in their cgroups (their inits died with their owner, taking
// their PID namespaces along, so this is a second line), the cgroups,
// temporary workspaces, state directories and uid ranges, and the
// workspaces and init roots in the temporary directory that the owner
// made but had not recorded yet (removeUnnamed). It returns how many it
// removed.
func (s state) sweep() (int, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "owner.json"))
		var rec record
		if err != nil || json.Unmarshal(b, &rec) != nil {
			// Being created (the record comes right after the directory),
			// or corrupt: removed once it is old enough.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				errs = append(errs, s.removeUnnamed(e.Name()), os.RemoveAll(dir))
			}
			continue
		}
		if rec.alive() {
			continue
		}
		if err := cgroups.Remove(rec.Cgroup, time.Now().Add(10*time.Second)); err != nil {
			errs = append(errs, err)
			continue
		}
		if rec.TempWorkspace != "" {
			errs = append(errs, removeTempWorkspace(rec.TempWorkspace))
		}
		if rec.InitRoot != "" {
			errs = append(errs, os.RemoveAll(rec.InitRoot))
		}
		errs = append(errs, s.removeUnnamed(rec.ID), os.RemoveAll(dir))
		s.freeSlot(rec.Slot)
		n++
	}
	// Slots whose sandbox's record is gone, in any state directory (one
	// younger than a minute may be a Create between its slot and its
	// record).
	slots, _ := os.ReadDir(s.slotsDir())
	for _, sl := range slots {
		p := filepath.Join(s.slotsDir(), sl.Name())
		b, err := os.ReadFile(p)
		fi, ierr := sl.Info()
		if err != nil || ierr != nil || time.Since(fi.ModTime()) < time.Minute || !filepath.IsAbs(string(b)) {
			continue
		}
		if _, err := os.Stat(string(b)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(p)
		}
	}
	return n, errors.Join(errs...)
}
