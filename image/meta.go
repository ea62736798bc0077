//go:build linux

package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// record is what the store keeps of one reference: all of its Image, so
// that Ensure reads one small file.
type record struct {
	Ref     string `json:"ref"`
	ID      string `json:"id"`
	Digest  string `json:"digest,omitempty"`
	ChainID string `json:"chain_id"`
	Config  Config `json:"config"`
	Size    int64  `json:"size"`
}

// refFile is the file of the reference key (Image.Ref).
func (s *Store) refFile(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.path(refsDir, hex.EncodeToString(sum[:])+".json")
}

// readRecord reads the record of the reference key; fs.ErrNotExist if
// there is none.
func (s *Store) readRecord(key string) (*record, error) {
	b, err := os.ReadFile(s.refFile(key))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Ref != key || !isHex(r.ChainID) {
		return nil, fs.ErrNotExist // damaged or foreign: as if absent
	}
	return &r, nil
}

// writeRecord writes r atomically: to a temporary file, renamed over.
func (s *Store) writeRecord(r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeAtomic(s.refFile(r.Ref), b)
}

// records reads every record of the store.
func (s *Store) records() ([]*record, error) {
	ents, err := os.ReadDir(s.path(refsDir))
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(s.path(refsDir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var r record
		if json.Unmarshal(b, &r) == nil && isHex(r.ChainID) {
			out = append(out, &r)
		}
	}
	return out, nil
}

// image is the Image of r.
func (s *Store) image(r *record) *Image {
	return &Image{
		Ref: r.Ref, ID: r.ID, Digest: r.Digest, ChainID: "sha256:" + r.ChainID,
		RootFS: filepath.Join(s.rootDir(r.ChainID), "rootfs"),
		Config: r.Config, Size: r.Size,
	}
}

// writeAtomic replaces the file name with data, never leaving a partial
// one: readers see the old content or the new.
func writeAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// isHex reports whether s is the 64 lower-case hex digits of a sha256.
func isHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
