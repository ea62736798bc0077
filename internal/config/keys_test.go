package config

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

const aliceSum = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8" // sha256("password")

func TestParseKeys(t *testing.T) {
	want := []Key{
		{Name: "alice", KeySHA256: aliceSum, MaxSandboxes: 2, MaxMemory: 1 << 30, MaxPIDs: 64, MaxCPUs: 1.5, MaxCPUTime: time.Minute},
		{Name: "ops", Key: "0123456789abcdef0123", Admin: true},
	}
	for name, data := range map[string]string{
		"yaml": `
- name: alice
  key_sha256: ` + aliceSum + `
  max_sandboxes: 2
  max_memory: 1GiB
  max_pids: 64
  max_cpus: 1.5
  max_cpu_time: 1m
- {name: ops, key: 0123456789abcdef0123, admin: true}
`,
		"json": `{"keys": [
  {"name": "alice", "key_sha256": "` + aliceSum + `", "max_sandboxes": 2, "max_memory": "1GiB", "max_pids": 64, "max_cpus": 1.5, "max_cpu_time": "1m"},
  {"name": "ops", "key": "0123456789abcdef0123", "admin": true}
]}`,
	} {
		got, err := ParseKeys("keys."+name, []byte(data))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v\nwant %+v", name, got, err, want)
		}
	}
	if sum := want[0].SHA256(); sum != sha256.Sum256([]byte("password")) {
		t.Errorf("SHA256 of key_sha256: %x", sum)
	}
	if sum := want[1].SHA256(); sum != sha256.Sum256([]byte(want[1].Key)) {
		t.Errorf("SHA256 of key: %x", sum)
	}
}

// TestBadKeysFile checks that each problem names the entry, the
// setting and the key, with its line.
func TestBadKeysFile(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		fields     []string
		line       int
	}{
		{"not a list", "name: a\n", []string{"keys"}, 1},
		{"no name", "- {key_sha256: " + aliceSum + "}\n", []string{"keys[0].name"}, 1},
		{"bad name", "- {name: a b, key_sha256: " + aliceSum + "}\n", []string{"keys[0].name"}, 1},
		{"no key", "- {name: a}\n", []string{"keys[0].key"}, 1},
		{"both", "- {name: a, key: 0123456789abcdef, key_sha256: " + aliceSum + "}\n", []string{"keys[0].key"}, 1},
		{"short key", "- {name: a, key: short}\n", []string{"keys[0].key"}, 1},
		{"bad hash", "- {name: a, key_sha256: abc}\n", []string{"keys[0].key_sha256"}, 1},
		{"unknown", "- {name: a, key_sha256: " + aliceSum + ", max_widgets: 3}\n", []string{"keys[0].max_widgets"}, 1},
		{"bad size", "- name: a\n  key_sha256: " + aliceSum + "\n  max_memory: lots\n", []string{"keys[0].max_memory"}, 3},
		{"negative", "- {name: a, key_sha256: " + aliceSum + ", max_sandboxes: -1}\n", []string{"keys[0].max_sandboxes"}, 1},
		{"bad admin", "- {name: a, key_sha256: " + aliceSum + ", admin: maybe}\n", []string{"keys[0].admin"}, 1},
		{"same name", "- {name: a, key_sha256: " + aliceSum + "}\n- {name: a, key: 0123456789abcdef}\n", []string{"keys[1].name"}, 2},
		{"same key", "- {name: a, key_sha256: " + aliceSum + "}\n- {name: b, key: password-but-longer}\n- {name: c, key_sha256: " + strings.ToUpper(aliceSum) + "}\n", []string{"keys[2].key"}, 3},
		{"not yaml", "- {name: [\n", []string{"keys"}, 0},
	} {
		_, err := ParseKeys("keys.yaml", []byte(tc.data))
		if !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", tc.name, err)
			continue
		}
		var fields []string
		lines := map[string]int{}
		for _, e := range Leaves(err) {
			var se *SourceError
			if errors.As(e, &se) {
				fields = append(fields, se.Err.Field)
				lines[se.Err.Field] = se.Line
			}
		}
		for _, f := range tc.fields {
			if !slices.Contains(fields, f) || lines[f] != tc.line {
				t.Errorf("%s: %v: want field %s at line %d", tc.name, err, f, tc.line)
			}
		}
		if strings.Contains(tc.name, "name") || tc.name == "no key" {
			if !strings.Contains(err.Error(), `key "a`) && tc.name != "no name" {
				t.Errorf("%s: %v: the problem does not name the key", tc.name, err)
			}
		}
	}
}

// TestKeysFromFiles: server.keys in the config file and the keys file
// together; a key in clear in a file others may read is refused, in
// either.
func TestKeysFromFiles(t *testing.T) {
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys.json")
	write := func(path, data string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(keysFile, `[{"name": "bob", "key": "bob-0123456789abcdef"}]`, 0o600)
	conf := filepath.Join(dir, "execbox.yaml")
	write(conf, "server:\n  keys_file: keys.json\n  keys:\n    - {name: alice, key_sha256: "+aliceSum+"}\n", 0o644)
	c, err := Load(LoadOptions{Getenv: env(map[string]string{EnvFile: conf}), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys()
	if err != nil || len(keys) != 2 || keys[0].Name != "alice" || keys[1].Name != "bob" {
		t.Errorf("Keys: %+v, %v", keys, err)
	}

	write(keysFile, `[{"name": "bob", "key": "bob-0123456789abcdef"}]`, 0o644)
	if _, err := c.Keys(); !errors.Is(err, execbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "chmod") {
		t.Errorf("a readable keys file with a key in clear: %v", err)
	}
	write(keysFile, `[{"name": "alice", "key": "bob-0123456789abcdef"}]`, 0o600)
	if _, err := c.Keys(); !errors.Is(err, execbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "server.keys[0]") {
		t.Errorf("a name in both: %v", err)
	}
	os.Remove(keysFile)
	if _, err := c.Keys(); !errors.Is(err, execbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "keys.json") {
		t.Errorf("no keys file: %v", err)
	}

	write(conf, "server:\n  keys:\n    - {name: alice, key: alice-0123456789abcdef}\n", 0o644)
	_, err = Load(LoadOptions{Getenv: env(map[string]string{EnvFile: conf}), Dir: dir})
	var se *SourceError
	if !errors.As(err, &se) || se.Err.Field != "server.keys[0].key" {
		t.Errorf("a readable config file with a key in clear: %v", err)
	}
	write(conf, "server:\n  keys:\n    - {name: alice, key: alice-0123456789abcdef}\n    - {name: alice, key: x}\n", 0o600)
	_, err = Load(LoadOptions{Getenv: env(map[string]string{EnvFile: conf}), Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "execbox.yaml:4: server.keys[1].name") || !strings.Contains(err.Error(), "server.keys[1].key") {
		t.Errorf("bad keys in the config file: %v", err)
	}
}
