package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// FuzzParseSize: every size ParseSize accepts is non-negative and prints
// (Size.String) in a form that parses back to the same number.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "16MiB", "16M", "16777216", "1.5G", " 2 kb ", "1P", "8EiB", ".", "1e3", "9223372036854775807", "9223372036854775808", "NaN", "-1", "1.5.5K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
		back, err := ParseSize(Size(n).String())
		if err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d prints as %q, which parses to %d, %v", s, n, Size(n).String(), back, err)
		}
	})
}

// FuzzParseDuration: every duration parseDuration accepts prints
// (Duration.String) in a form that parses back to it.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "1m30s", " 2h ", "0", "1.5ms", "-3s", "1", "9223372036s", "1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			return
		}
		back, err := parseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("parseDuration(%q) = %v, which parses back to %v, %v", s, d, back, err)
		}
	})
}

// FuzzParseKeys: ParseKeys never panics, and every list it accepts is
// of valid keys with distinct names and hashes.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		"- {name: a, key_sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8}\n",
		`{"keys": [{"name": "ops", "key": "0123456789abcdef0123", "admin": true, "max_memory": "1GiB"}]}`,
		"- name: a\n  key: 0123456789abcdef\n  max_cpu_time: 1m\n  max_cpus: 0.5\n- &x {name: b, key: 0123456789abcdefg}\n- *x\n",
		"", "[]", "keys: 3", "- [1, 2]", "- {name: a, admin: yes}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseKeys("keys.yaml", []byte(s))
		if err != nil {
			return
		}
		names := map[string]bool{}
		sums := map[[32]byte]bool{}
		for i, k := range keys {
			if probs := k.validate(); len(probs) > 0 || names[k.Name] || sums[k.SHA256()] {
				t.Fatalf("ParseKeys(%q) accepted key %d %+v: %v", s, i, k, probs)
			}
			names[k.Name], sums[k.SHA256()] = true, true
		}
	})
}

// FuzzLoadRuntimes: Load never panics on a file's runtimes section, and
// reports a runtime's settings that do not decode as problems naming
// runtimes.NAME.KEY with the file's line, matching ErrInvalidArgument;
// a file it accepts has every section decoding.
func FuzzLoadRuntimes(f *testing.F) {
	for _, s := range []string{
		"runtimes:\n  sandbox:\n    memry: 1GiB\n    pids: lots\n",
		"runtimes:\n  sandbox: {memory: 2GiB, pids: 10, network: host, ro_paths: [/a]}\n",
		"runtimes:\n  remote: {token_env: X, pids: [1, {a: b}]}\n  local: ~\n",
		"runtimes:\n  sandbox: &a {pids: 1}\n  local: *a\n",
		"runtime: local\nruntimes: {local: {memory: -1}}\n",
		"runtimes: [1]\n", "runtimes:\n  '': {}\n", "runtimes:\n  sandbox:\n    ? [a]\n    : 1\n",
	} {
		f.Add(s)
	}
	reg := testRegistry()
	f.Fuzz(func(t *testing.T, s string) {
		dir := t.TempDir()
		file := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file}), Dir: dir, Registry: reg})
		if err != nil {
			for _, e := range Leaves(err) {
				var fe *execbox.FieldError
				if !errors.As(e, &fe) || !errors.Is(e, execbox.ErrInvalidArgument) && !errors.Is(e, execbox.ErrNotFound) && !errors.Is(e, execbox.ErrUnsupported) {
					t.Fatalf("Load(%q): problem %v is not a FieldError of a known kind", s, e)
				}
				var se *SourceError
				if strings.HasPrefix(fe.Field, "runtimes.") && (!errors.As(e, &se) || se.Source != file || se.Line == 0) {
					t.Fatalf("Load(%q): problem %v does not name the file's line", s, e)
				}
			}
			return
		}
		for name, settings := range c.Runtimes {
			if err := execbox.SettingsProblems(reg.Check(name, execbox.Options{Settings: settings})); err != nil {
				t.Fatalf("Load(%q) accepted runtimes.%s, which does not decode: %v", s, name, err)
			}
		}
	})
}
