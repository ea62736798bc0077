package sandbox

import (
	"strconv"
	"testing"
)

// FuzzParseSize: an accepted size is a non-negative byte count, never the
// result of converting NaN, infinity or an out-of-range float; a plain
// integer means exactly that many bytes, and a count printed in bytes
// parses back to itself.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1024", "64K", "512M", "2G", "1T", "2GiB", " 1.5g ", "0", "NaN", "Inf", "1e300", "-1", "9223372036854775807", "kib", ""} {
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
		if i, err := strconv.ParseInt(s, 10, 64); err == nil && i != n {
			t.Fatalf("ParseSize(%q) = %d, want %d", s, n, i)
		}
		if back, err := ParseSize(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d, which parses back to %d, %v", s, n, back, err)
		}
	})
}
