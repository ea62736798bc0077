package proc

import (
	"bytes"
	"fmt"
	"testing"
)

func TestHeadTail(t *testing.T) {
	tests := []struct {
		limit  int64
		writes []string
		want   string
		omit   int64
	}{
		{limit: 10, writes: []string{"hello"}, want: "hello"},
		{limit: 10, writes: []string{"0123456789"}, want: "0123456789"},
		{limit: 10, writes: []string{"0123456789abc"}, want: "01234" + "89abc", omit: 3},
		{limit: 10, writes: []string{"012", "345", "678", "9ab", "cde"}, want: "01234" + "abcde", omit: 5},
		{limit: 10, writes: []string{"01234", "x", "yz", "0123456789ABCDEF"}, want: "01234" + "BCDEF", omit: 14},
		{limit: 1, writes: []string{"abc"}, want: "a", omit: 2},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := newHeadTail(tt.limit)
			var total int64
			for _, w := range tt.writes {
				h.Write([]byte(w))
				total += int64(len(w))
			}
			out := h.Output()
			if got := string(out.Data); got != tt.want {
				t.Errorf("Data = %q, want %q", got, tt.want)
			}
			if out.Omitted != tt.omit || out.Total != total {
				t.Errorf("Omitted, Total = %d, %d, want %d, %d", out.Omitted, out.Total, tt.omit, total)
			}
			if tt.omit > 0 && out.OmittedAt != int(tt.limit-tt.limit/2) {
				t.Errorf("OmittedAt = %d", out.OmittedAt)
			}
		})
	}
}

func TestHeadTailBoundedMemory(t *testing.T) {
	h := newHeadTail(1 << 20)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range 1024 { // 64 MiB
		h.Write(chunk)
	}
	if got := cap(h.buf); got > 1<<20 {
		t.Fatalf("kept %d bytes, limit %d", got, 1<<20)
	}
}

// TestHeadTailDirect fills the buffer through next/commit, as a reader
// does for big streams, and checks the same head and tail come out, also
// from a snapshot taken while a read is in flight.
func TestHeadTailDirect(t *testing.T) {
	h := newHeadTail(10)
	in := []byte("0123456789abcdefghij") // 20 bytes: head "01234", tail "fghij"
	for len(in) > 0 {
		r := h.next(3)
		n := copy(r, in)
		h.commit(n)
		in = in[n:]
	}
	// A read in flight into the ring overwrites the oldest tail bytes.
	r := h.next(2)
	off := cap(h.buf) - cap(r) - h.headCap
	copy(r, "XY") // what a concurrent read might have written so far
	snap := h.snapshot(off, len(r))
	if got := string(snap.Data); got != "01234"+"hij" || snap.Omitted != 12 || snap.OmittedAt != 5 {
		t.Errorf("snapshot = %q omitted %d at %d, want %q omitted 12 at 5", got, snap.Omitted, snap.OmittedAt, "01234hij")
	}
}
