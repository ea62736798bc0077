// Command streamgen writes known pseudo-random streams, for tests that
// check every byte a runtime delivers: streamgen SEED BYTES [SEED2 BYTES2]
// writes BYTES bytes of testutil.Stream(SEED) to stdout and, if given,
// BYTES2 bytes of testutil.Stream(SEED2) to stderr, interleaving the two
// in chunks of uneven sizes. It is built static (testutil.StreamGen) so
// that it runs in any sandbox, container or image.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/execbox/execbox/internal/testutil/streams"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "streamgen:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) != 2 && len(args) != 4 {
		return fmt.Errorf("usage: streamgen SEED BYTES [SEED2 BYTES2]")
	}
	nums := make([]uint64, len(args))
	for i, a := range args {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return err
		}
		nums[i] = n
	}
	type out struct {
		w    io.Writer
		r    io.Reader
		left uint64
	}
	outs := []*out{{w: os.Stdout, r: streams.New(nums[0]), left: nums[1]}}
	if len(nums) == 4 {
		outs = append(outs, &out{w: os.Stderr, r: streams.New(nums[2]), left: nums[3]})
	}
	buf := make([]byte, 256<<10)
	for i := 0; ; i++ {
		active := 0
		for j, o := range outs {
			if o.left == 0 {
				continue
			}
			active++
			// Uneven chunks, different per stream: 1 byte to 256 KiB.
			n := min(o.left, uint64(1+(i*7919+j*104729)%len(buf)))
			if _, err := io.ReadFull(o.r, buf[:n]); err != nil {
				return err
			}
			if _, err := o.w.Write(buf[:n]); err != nil {
				return err
			}
			o.left -= n
		}
		if active == 0 {
			return nil
		}
	}
}
