package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes. In YAML, variables and flags it is written as
// ParseSize accepts, and it prints in the largest binary unit that divides
// it exactly ("16MiB").
type Size int64

var sizeUnits = []struct {
	names []string
	bytes int64
}{
	{[]string{"", "b"}, 1},
	{[]string{"k", "kb", "kib"}, 1 << 10},
	{[]string{"m", "mb", "mib"}, 1 << 20},
	{[]string{"g", "gb", "gib"}, 1 << 30},
	{[]string{"t", "tb", "tib"}, 1 << 40},
	{[]string{"p", "pb", "pib"}, 1 << 50},
}

// ParseSize parses a byte count: a non-negative number, optionally with a
// fraction, followed by an optional unit. Units are binary and
// case-insensitive, as in Docker's --memory: B is 1; K, KB and KiB are 1024;
// M, MB and MiB are 1024²; then G, T and P likewise. So "16MiB", "16M" and
// "16777216" are equal, and "1.5G" is 1610612736 (a fraction of a byte is
// dropped).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("invalid size %q: want a non-negative number of bytes with an optional unit, e.g. 16MiB", s)
	}
	mult := int64(0)
	for _, u := range sizeUnits {
		for _, n := range u.names {
			if unit == n {
				mult = u.bytes
			}
		}
	}
	if mult == 0 {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, K, M, G, T or P, optionally with B or iB)", s, t[i:])
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: bad number %q", s, num)
	}
	b := f * float64(mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return int64(b), nil
}

// UnmarshalJSON accepts a number of bytes (negative ones included: some
// settings give them a meaning, such as no cap) or a string ParseSize
// accepts ("128MiB"), as a runtime's settings (runtimes.NAME) give sizes
// like every other size of the configuration.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("want a size, a number of bytes or a string like \"128MiB\", got %s", b)
	}
	v, err := ParseSize(str)
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// String formats s in the largest binary unit that divides it, e.g.
// "16MiB", "1536KiB" or "1000".
func (s Size) String() string {
	for i := len(sizeUnits) - 1; i > 0; i-- {
		u := sizeUnits[i]
		if s != 0 && int64(s)%u.bytes == 0 {
			return strconv.FormatInt(int64(s)/u.bytes, 10) + strings.ToUpper(u.names[0]) + "iB"
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// parseDuration is time.ParseDuration with a message that says what to write.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit, e.g. 90s or 1m30s", s)
	}
	return d, nil
}
