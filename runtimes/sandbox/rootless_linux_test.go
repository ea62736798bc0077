package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestLookupSubIDs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "subuid")
	content := "# comment\nalice:100000:65536\nbob:x:65536\n1001:300000:1000\n1001:400000:70000\ncarol:500000:65536\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		id   int
		want subIDs
		ok   bool
	}{
		{"alice", 1000, subIDs{100000, 65536}, true},
		{"", 1001, subIDs{400000, 70000}, true}, // the first range that is large enough
		{"bob", 1002, subIDs{}, false},          // not a number
		{"dave", 1003, subIDs{}, false},
	} {
		got, ok := lookupSubIDs(file, tc.name, tc.id, maxInsideID)
		if got != tc.want || ok != tc.ok {
			t.Errorf("lookupSubIDs(%q, %d) = %v, %v; want %v, %v", tc.name, tc.id, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := lookupSubIDs(filepath.Join(t.TempDir(), "none"), "alice", 1000, 1); ok {
		t.Error("a missing file gave a range")
	}
}

// TestSubIDMap: every inside id from 0 to maxInsideID is mapped once, the
// command user's to the caller and the rest, in order, into the range.
func TestSubIDMap(t *testing.T) {
	for _, inside := range []uint32{0, 1, 1000, maxInsideID} {
		m := subIDMap(inside, 4242, subIDs{Start: 100000, Count: 65536})
		next, total := 0, 0
		for _, r := range m {
			if r.ContainerID != next || r.Size <= 0 {
				t.Fatalf("inside %d: %+v: ranges not contiguous from 0", inside, m)
			}
			next += r.Size
			total += r.Size
		}
		if total != maxInsideID+1 {
			t.Errorf("inside %d: %d ids mapped, want %d", inside, total, maxInsideID+1)
		}
		if host := hostOf(m, int(inside)); host != 4242 {
			t.Errorf("inside %d maps to %d, want the caller's 4242", inside, host)
		}
		for _, id := range []int{0, maxInsideID} {
			if id != int(inside) {
				if h := hostOf(m, id); h < 100000 || h >= 100000+maxInsideID {
					t.Errorf("inside %d: id %d maps to %d, outside the subordinate range", inside, id, h)
				}
			}
		}
	}
}

func hostOf(m []syscall.SysProcIDMap, id int) int {
	for _, r := range m {
		if id >= r.ContainerID && id < r.ContainerID+r.Size {
			return r.HostID + id - r.ContainerID
		}
	}
	return -1
}

func TestCheckPrivateDir(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := checkPrivateDir(mine, 0o077); err != nil {
		t.Errorf("a 0700 directory of ours: %v", err)
	}
	os.Chmod(mine, 0o711)
	if err := checkPrivateDir(mine, 0o022); err != nil {
		t.Errorf("a 0711 parent of ours: %v", err)
	}
	if err := checkPrivateDir(mine, 0o077); err == nil {
		t.Errorf("a 0711 directory passed as private")
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	link := filepath.Join(dir, "link")
	os.Symlink(mine, link)
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o700)
	os.Chown(other, os.Geteuid()+1, os.Getegid()) // fails unless root: then it is ours and skipped
	for _, d := range []string{open, link, other} {
		if d == other && os.Geteuid() != 0 {
			continue
		}
		if err := checkPrivateDir(d, 0o022); err == nil {
			t.Errorf("%s passed", d)
		}
	}
}
