package owner

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecords: whatever a records directory holds, Dead neither panics
// nor returns a record whose ID does not match its file.
func FuzzRecords(f *testing.F) {
	f.Add("sb-1", []byte(`{"id":"sb-1","owner":"h/pid:[1]/1/1","created":"2026-01-01T00:00:00Z","data":{}}`))
	f.Add("sb-2", []byte(`{"id":"sb-3"}`))
	f.Add("x", []byte("\x00{"))
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		dir := t.TempDir()
		d, err := OpenDir(filepath.Join(dir, "s"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		n, err := name(id)
		if err != nil {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "s", n), body, 0o600); err != nil {
			return
		}
		recs, _ := d.Dead()
		for _, r := range recs {
			if r.ID != id {
				t.Fatalf("record of %q in %s", r.ID, n)
			}
		}
		Alive(string(body))
	})
}
