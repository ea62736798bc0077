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
