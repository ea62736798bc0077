package proc

import (
	"slices"

	"github.com/execbox/execbox"
)

// headTail keeps the first and last bytes of a stream within a fixed
// budget. Small outputs live in a slice grown as needed; once the stream
// passes the head budget, one buffer of the full limit holds the head in
// its first part and a ring of the most recent bytes in the rest, so memory
// never exceeds the limit whatever the stream's length, and Output returns
// the buffer itself without a copy. Not safe for concurrent use; Process
// guards it.
type headTail struct {
	limit   int
	headCap int
	buf     []byte // head, then (once full) the ring
	ringPos int    // next write offset within the ring
	ringLen int    // valid bytes in the ring
	total   int64
}

func newHeadTail(limit int64) *headTail {
	return &headTail{limit: int(limit), headCap: int(limit - limit/2)}
}

func (h *headTail) ringCap() int { return h.limit - h.headCap }

// Write keeps p within the budget. It never fails.
func (h *headTail) Write(p []byte) {
	h.total += int64(len(p))
	if n := min(h.headCap-len(h.buf), len(p)); n > 0 {
		h.grow(len(h.buf) + n)
		h.buf = append(h.buf, p[:n]...)
		p = p[n:]
	}
	rc := h.ringCap()
	if len(p) == 0 || rc == 0 {
		return
	}
	h.grow(h.limit)
	ring := h.buf[h.headCap:h.limit]
	if len(p) >= rc {
		copy(ring, p[len(p)-rc:])
		h.ringPos, h.ringLen = 0, rc
		return
	}
	n := copy(ring[h.ringPos:], p)
	copy(ring, p[n:])
	h.ringPos = (h.ringPos + len(p)) % rc
	h.ringLen = min(h.ringLen+len(p), rc)
}

// bigStream is the capacity past which a stream is taken for one that
// will fill its limit: the buffer then grows to the limit at once, rather
// than doubling through sizes that would be garbage the size of the limit
// by the time it is full.
const bigStream = 1 << 20

// grow makes cap(buf) at least need, doubling up to bigStream, then to the
// limit; never beyond the limit, so the buffer's memory is bounded by the
// limit exactly.
func (h *headTail) grow(need int) {
	if need <= cap(h.buf) {
		return
	}
	c := max(2*cap(h.buf), need, 4096)
	if c > bigStream {
		c = h.limit
	}
	nb := make([]byte, len(h.buf), min(c, h.limit))
	copy(nb, h.buf)
	h.buf = nb
}

// Output returns what was kept. It rotates the ring into order in place, so
// it must be called once, after the last Write.
func (h *headTail) Output() execbox.Output {
	data := h.buf
	if h.ringLen > 0 {
		ring := h.buf[h.headCap:h.limit]
		if h.ringLen == len(ring) && h.ringPos > 0 {
			// Rotate left by ringPos: the oldest byte is at ringPos.
			slices.Reverse(ring[:h.ringPos])
			slices.Reverse(ring[h.ringPos:])
			slices.Reverse(ring)
		}
		data = h.buf[:h.headCap+h.ringLen]
	}
	out := execbox.Output{Data: data, Total: h.total}
	if kept := int64(len(data)); kept < h.total {
		out.Omitted = h.total - kept
		out.OmittedAt = h.headCap
	}
	return out
}

// next returns the region a reader may fill directly, without an
// intermediate copy: free head space, else the ring from its write
// position to its end (overwriting the oldest tail bytes, which the
// commit then counts as dropped). At most max bytes. The caller marks it
// in flight, reads into it and commits what it read.
func (h *headTail) next(max int) []byte {
	if len(h.buf) < h.headCap {
		h.grow(min(h.headCap, len(h.buf)+max))
		return h.buf[len(h.buf):min(cap(h.buf), h.headCap)]
	}
	if h.ringCap() == 0 {
		return nil
	}
	h.grow(h.limit)
	ring := h.buf[h.headCap:h.limit]
	return ring[h.ringPos:min(len(ring), h.ringPos+max)]
}

// commit records that the first n bytes of the region from next hold new
// output.
func (h *headTail) commit(n int) {
	h.total += int64(n)
	if len(h.buf) < h.headCap {
		h.buf = h.buf[:len(h.buf)+n]
		return
	}
	rc := h.ringCap()
	h.ringPos = (h.ringPos + n) % rc
	h.ringLen = min(h.ringLen+n, rc)
}

// snapshot is Output for a stream whose reader may still be filling the
// region [inflight, inflight+inflightLen) of the ring: it copies what is
// kept, leaving that region out (counted as omitted), so the result never
// aliases memory a read is writing.
func (h *headTail) snapshot(inflight, inflightLen int) execbox.Output {
	head := h.buf[:min(len(h.buf), h.headCap)]
	data := append([]byte(nil), head...)
	if h.ringLen > 0 {
		ring := h.buf[h.headCap:h.limit]
		var tail []byte
		if h.ringLen < len(ring) {
			tail = ring[:h.ringLen]
		} else {
			start := h.ringPos
			if inflightLen > 0 && inflight == h.ringPos {
				start += inflightLen // being overwritten: oldest bytes, drop them
			}
			tail = append(append([]byte(nil), ring[min(start, len(ring)):]...), ring[:h.ringPos]...)
		}
		data = append(data, tail...)
	}
	out := execbox.Output{Data: data, Total: h.total}
	if kept := int64(len(data)); kept < h.total {
		out.Omitted = h.total - kept
		out.OmittedAt = len(head)
	}
	return out
}
