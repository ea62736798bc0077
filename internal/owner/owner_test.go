package owner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// deadOwner is the owner name of a process that ran and was reaped.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := Of(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	return o
}

func TestAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/pid"); err != nil {
		t.Fatalf("no /proc here: %v", err)
	}
	self := Self()
	host, _ := os.Hostname()
	f := strings.Split(self, "/")
	for _, tt := range []struct {
		name, owner string
		want        bool
	}{
		{"self", self, true},
		{"dead", deadOwner(t), false},
		{"reused PID", strings.Join([]string{f[0], f[1], f[2], "1"}, "/"), false},
		{"another host", "not-" + host + "/" + f[1] + "/1/1", true},
		{"another PID namespace", host + "/pid:[1]/1/1", true},
		{"malformed", "x", true},
		{"empty", "", true},
		{"bad PID", host + "/" + f[1] + "/x/1", true},
	} {
		if got := Alive(tt.owner); got != tt.want {
			t.Errorf("%s: Alive(%q) = %v, want %v", tt.name, tt.owner, got, tt.want)
		}
	}
}

func TestDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "state")
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if err := d.Write("sb-live", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	// A dead owner's record, as a killed process leaves it.
	b, _ := json.Marshal(Record{ID: "sb-dead", Owner: deadOwner(t), Created: time.Now(), Data: json.RawMessage(`{"k":"w"}`)})
	if err := os.WriteFile(filepath.Join(path, "sb-dead.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not records: a mismatched ID, junk, a symlink; never followed nor returned.
	os.WriteFile(filepath.Join(path, "sb-other.json"), b, 0o600)
	os.WriteFile(filepath.Join(path, "junk.json"), []byte("{"), 0o600)
	os.Symlink(filepath.Join(path, "sb-dead.json"), filepath.Join(path, "sb-link.json"))
	dead, err := d.Dead()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range dead {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"sb-dead"}) || string(dead[0].Data) != `{"k":"w"}` {
		t.Fatalf("Dead = %+v, want sb-dead's record alone", dead)
	}
	for _, id := range []string{"sb-live", "sb-dead", "sb-gone"} {
		if err := d.Remove(id); err != nil {
			t.Errorf("Remove(%s): %v", id, err)
		}
	}
	if _, err := os.Stat(filepath.Join(path, "sb-live.json")); !os.IsNotExist(err) {
		t.Errorf("sb-live's record after Remove: %v", err)
	}
	for _, id := range []string{"", ".x", "../x", "a/b", "a\x00"} {
		if err := d.Write(id, nil); err == nil {
			t.Errorf("Write(%q) succeeded", id)
		}
	}
}

func TestOpenDirRefuses(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	link := filepath.Join(dir, "link")
	os.Symlink(t.TempDir(), link)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	for _, p := range []string{open, link, file, "relative"} {
		if d, err := OpenDir(p); err == nil {
			d.Close()
			t.Errorf("OpenDir(%s) succeeded", p)
		}
	}
}
