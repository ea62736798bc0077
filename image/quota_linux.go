//go:build linux

package image

import (
	"context"
	"fmt"
	"strings"

	"github.com/execbox/execbox"
)

// quota is what one unpack may write under the store's bound
// (Options.MaxSize): the bound less the roots of the store and what the
// store's other unpacks in progress have taken. It takes room in chunks,
// and when the room runs out, removes roots no sandbox uses (least
// recently used first, never waiting for a lock) before giving up: the
// store never holds more than its bound, even while a pull unpacks.
type quota struct {
	ctx   context.Context
	s     *Store
	chain string // the root being unpacked, hex
	free  int64  // taken from the store's room, not yet charged
	taken int64  // added to s.reserved by this unpack
}

// newQuota returns the quota of an unpack of chain; nil without a bound.
func (s *Store) newQuota(ctx context.Context, chain string) *quota {
	if s.maxSize <= 0 {
		return nil
	}
	return &quota{ctx: ctx, s: s, chain: chain}
}

// take charges n bytes, or fails with ErrResourceExhausted.
func (q *quota) take(n int64) error {
	if q == nil || n <= q.free {
		if q != nil {
			q.free -= n
		}
		return nil
	}
	room, err := q.room()
	if err != nil {
		return err
	}
	if room < n-q.free {
		if _, err := q.s.pruneFor(q.ctx, n-q.free, q.chain); err != nil {
			return err
		}
		if room, err = q.room(); err != nil {
			return err
		}
	}
	if room < n-q.free {
		return q.exhausted(n)
	}
	// Half of what is left, at least what is needed: fewer look-ups of
	// the store, and room left for pulls beside this one.
	chunk := max(n-q.free, room/2)
	q.s.reserved.Add(chunk)
	q.taken += chunk
	q.free += chunk - n
	return nil
}

// room is the bound less the roots of the store and what unpacks in
// progress (this one too) reserved.
func (q *quota) room() (int64, error) {
	used, _, err := q.s.rootsSize()
	if err != nil {
		return 0, err
	}
	return q.s.maxSize - used - q.s.reserved.Load(), nil
}

// exhausted is the error of an unpack that needs n more bytes than it has.
func (q *quota) exhausted(n int64) error {
	used, inUse, _ := q.s.rootsSize()
	return &kindError{execbox.ErrResourceExhausted, fmt.Errorf(
		"the image takes more than the store's bound (images.max_size, %d bytes) leaves it: %d bytes needed so far, "+
			"%d held by images sandboxes use, %d by other images, %d by other pulls",
		q.s.maxSize, q.taken-q.free+n, inUse, used-inUse, q.s.reserved.Load()-q.taken)}
}

// release returns what the unpack reserved: call it once its root is
// recorded (or thrown away), when the store's roots count it.
func (q *quota) release() {
	if q != nil {
		q.s.reserved.Add(-q.taken)
		q.taken, q.free = 0, 0
	}
}

// rootsSize adds up the roots of the store, and those of them in use.
func (s *Store) rootsSize() (total, inUse int64, err error) {
	infos, err := s.List()
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	for _, in := range infos {
		if !seen[in.ChainID] {
			seen[in.ChainID] = true
			total += in.Size
			if in.InUse {
				inUse += in.Size
			}
		}
	}
	return total, inUse, nil
}

// pruneFor removes roots no sandbox uses, least recently used first,
// sparing keep, until need more bytes fit under the bound. It never
// waits for a lock: the caller holds keep's, and another unpack could be
// waiting for its own while holding one of these.
func (s *Store) pruneFor(ctx context.Context, need int64, keep string) ([]Info, error) {
	return s.pruneWith(ctx, s.maxSize-s.reserved.Load()-need, "sha256:"+strings.TrimPrefix(keep, "sha256:"), false)
}
