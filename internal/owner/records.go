package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Record is what a Dir holds of one sandbox.
type Record struct {
	// ID is the sandbox's.
	ID string `json:"id"`
	// Owner is the process that holds it (Self when it was written).
	Owner string `json:"owner"`
	// Created is when the record was written.
	Created time.Time `json:"created"`
	// Data is what its writer needs to finish the job: paths to remove,
	// the runtime's name.
	Data json.RawMessage `json:"data,omitempty"`
}

// Dir is a directory of records, one file per sandbox (ID.json),
// private to this user (0700, never followed through a symlink: its
// files are opened through an os.Root on the directory itself, and
// IDs are single path elements). Records are written whole (a rename),
// so a reader sees the old one or the new one. Several execbox processes
// may share a Dir: each writes only its own sandboxes' records, and
// removes another's only once that owner is dead. It is safe for
// concurrent use.
type Dir struct {
	root *os.Root
	path string
}

// OpenDir opens the records directory at path, creating it (and its
// missing parents, 0700) if needed. It must be a directory, not a
// symlink, of this process's user, that no other user may write.
func OpenDir(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("state directory %q: not an absolute path", path)
	}
	if err := mkdirPrivate(path); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return nil, fmt.Errorf("state directory %s: not a directory (or a symlink)", path)
	case st != nil && int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("state directory %s: owned by uid %d, not by this user (%d)", path, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("state directory %s: writable by other users (mode %#o)", path, fi.Mode().Perm())
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return &Dir{root: root, path: path}, nil
}

// mkdirPrivate creates dir and its missing parents with mode 0700
// (os.MkdirAll would apply the umask).
func mkdirPrivate(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Close closes the directory.
func (d *Dir) Close() error { return d.root.Close() }

// name is the file of id's record; an ID that is not a plain name is
// refused.
func name(id string) (string, error) {
	if id == "" || id[0] == '.' || strings.ContainsAny(id, "/\x00") {
		return "", fmt.Errorf("record of %q: not a sandbox ID", id)
	}
	return id + ".json", nil
}

// Write records sandbox id as this process's, with data (marshalled as
// JSON), replacing a record of the same ID whole.
func (d *Dir) Write(id string, data any) error {
	n, err := name(id)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	b, err := json.Marshal(Record{ID: id, Owner: Self(), Created: time.Now().UTC(), Data: raw})
	if err != nil {
		return err
	}
	tmp := "." + n + ".tmp"
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("record of %s: %w", id, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, n)
	}
	if err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("record of %s: %w", id, err)
	}
	return nil
}

// Remove removes id's record; one already gone is no error.
func (d *Dir) Remove(id string) error {
	n, err := name(id)
	if err != nil {
		return err
	}
	if err := d.root.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("record of %s: %w", id, err)
	}
	return nil
}

// Dead returns the records whose owner is known dead (see Alive), and
// removes what cannot be a record: files that do not parse, once older
// than a minute (a crash between create and rename leaves a temporary
// one).
func (d *Dir) Dead() ([]Record, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var dead []Record
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		rec, ok := d.read(e.Name())
		if !ok {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = d.root.Remove(e.Name())
			}
			continue
		}
		if !Alive(rec.Owner) {
			dead = append(dead, rec)
		}
	}
	return dead, nil
}

// read parses the record in file n.
func (d *Dir) read(n string) (Record, bool) {
	id, ok := strings.CutSuffix(n, ".json")
	if !ok || strings.HasPrefix(n, ".") {
		return Record{}, false
	}
	b, err := d.root.ReadFile(n)
	var rec Record
	if err != nil || len(b) > 1<<20 || json.Unmarshal(b, &rec) != nil || rec.ID != id {
		return Record{}, false
	}
	return rec, true
}
