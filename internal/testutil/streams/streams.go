// Package streams makes the known pseudo-random byte streams that tests
// of output delivery write (cmd streamgen) and check, byte for byte.
package streams

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
)

// New returns the endless stream of seed: ChaCha8, whose output the Go
// project keeps stable, so a writer and a checker built apart agree.
func New(seed uint64) io.Reader {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	return rand.NewChaCha8(key)
}

// Checker compares what is written to it with the stream of its seed.
type Checker struct {
	r    io.Reader
	want []byte
	n    int64 // bytes checked
	err  error // the first mismatch
}

// NewChecker checks writes against New(seed).
func NewChecker(seed uint64) *Checker { return &Checker{r: New(seed)} }

// Write compares p with the next len(p) bytes of the stream. It never
// fails (so that it can sit behind an io.Writer that must not); Err
// reports the first difference.
func (c *Checker) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && c.err == nil {
		k := min(len(p), 1<<20)
		if cap(c.want) < k {
			c.want = make([]byte, 1<<20)
		}
		w := c.want[:k]
		_, _ = io.ReadFull(c.r, w)
		if !bytes.Equal(w, p[:k]) {
			i := 0
			for w[i] == p[i] {
				i++
			}
			c.err = fmt.Errorf("byte %d is %#02x, want %#02x", c.n+int64(i), p[i], w[i])
			return n, nil
		}
		c.n += int64(k)
		p = p[k:]
	}
	return n, nil
}

// Check reports the first difference, or a length other than want.
func (c *Checker) Check(want int64) error {
	if c.err != nil {
		return c.err
	}
	if c.n != want {
		return fmt.Errorf("got %d bytes, want %d", c.n, want)
	}
	return nil
}

// Equal checks that b is the first bytes of the stream of seed,
// and is want bytes long.
func Equal(seed uint64, b []byte, want int64) error {
	c := NewChecker(seed)
	c.Write(b)
	return c.Check(want)
}
