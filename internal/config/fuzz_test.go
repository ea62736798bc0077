package config

import (
	"testing"
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
