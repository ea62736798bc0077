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
