package proc

import "github.com/execbox/execbox"

// headTail keeps the first and last bytes of a stream within a fixed
// budget: the head fills first, then a ring holds the most recent bytes.
// Memory never exceeds the limit whatever the stream's length. Not safe for
// concurrent use; Process guards it.
type headTail struct {
	headCap int
	head    []byte
	ring    []byte // tail ring of capacity limit-headCap, allocated lazily
	ringCap int
	ringPos int // next write position in ring
	ringLen int // bytes valid in ring
	total   int64
}

func newHeadTail(limit int64) *headTail {
	head := int(limit - limit/2)
	return &headTail{headCap: head, ringCap: int(limit / 2)}
}

// Write keeps p within the budget. It never fails.
func (h *headTail) Write(p []byte) {
	h.total += int64(len(p))
	if n := min(h.headCap-len(h.head), len(p)); n > 0 {
		h.head = append(h.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 || h.ringCap == 0 {
		return
	}
	if h.ring == nil {
		h.ring = make([]byte, h.ringCap)
	}
	if len(p) >= h.ringCap {
		copy(h.ring, p[len(p)-h.ringCap:])
		h.ringPos, h.ringLen = 0, h.ringCap
		return
	}
	n := copy(h.ring[h.ringPos:], p)
	copy(h.ring, p[n:])
	h.ringPos = (h.ringPos + len(p)) % h.ringCap
	h.ringLen = min(h.ringLen+len(p), h.ringCap)
}

// Output returns a copy of what was kept.
func (h *headTail) Output() execbox.Output {
	data := make([]byte, 0, len(h.head)+h.ringLen)
	data = append(data, h.head...)
	if h.ringLen < h.ringCap {
		data = append(data, h.ring[:h.ringLen]...)
	} else {
		data = append(data, h.ring[h.ringPos:]...)
		data = append(data, h.ring[:h.ringPos]...)
	}
	out := execbox.Output{Data: data, Total: h.total}
	if kept := int64(len(data)); kept < h.total {
		out.Omitted = h.total - kept
		out.OmittedAt = len(h.head)
	}
	return out
}
