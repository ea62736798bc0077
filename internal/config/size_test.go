package config

import (
	"encoding/json"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1234", 1234},
		{"1234B", 1234},
		{"1k", 1 << 10},
		{"1K", 1 << 10},
		{"1KB", 1 << 10},
		{"1KiB", 1 << 10},
		{"16MiB", 16 << 20},
		{"512M", 512 << 20},
		{"512mb", 512 << 20},
		{"2G", 2 << 30},
		{"2 GiB", 2 << 30},
		{" 3T ", 3 << 40},
		{"1P", 1 << 50},
		{"1.5G", 3 << 29},
		{"0.5k", 512},
		{"9223372036854775807", 1<<63 - 1},
	} {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeBad(t *testing.T) {
	for _, in := range []string{
		"", " ", "-1", "-1G", "G", "1X", "1GiBs", "1 2", "1.2.3", ".", "1e3",
		"9223372036854775808", "8589934592G", "1e30", "0x10", "+5",
	} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestSizeString(t *testing.T) {
	for _, tt := range []struct {
		in   Size
		want string
	}{
		{0, "0"},
		{1000, "1000"},
		{1024, "1KiB"},
		{1536, "1536"},
		{16 << 20, "16MiB"},
		{3 << 29, "1536MiB"},
		{2 << 30, "2GiB"},
	} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if n, err := ParseSize(tt.in.String()); err != nil || n != int64(tt.in) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in.String(), n, err, int64(tt.in))
		}
	}
}

// TestSizeUnmarshalJSON: a runtime's size settings take a number of bytes
// or a size with a unit, like every other size.
func TestSizeUnmarshalJSON(t *testing.T) {
	for in, want := range map[string]Size{`134217728`: 128 << 20, `"128MiB"`: 128 << 20, `"1.5G"`: 3 << 29, `-1`: -1, `" 2 kb "`: 2048} {
		var s Size
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%s: %d, %v; want %d", in, s, err, want)
		}
	}
	for _, in := range []string{`"lots"`, `true`, `[1]`, `"-1"`, `1.5`} {
		var s Size
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s: accepted as %d", in, s)
		}
	}
}
