package proc

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/execbox/execbox"
)

// eventLog is the ordered, bounded record of a process's events. Readers
// may start from any sequence number still in the window. In window mode
// old events are dropped once the window's byte budget is used (never
// the exit event), and a reader that fell behind is told how many bytes
// it missed (EventDropped). In flow mode (flow) no event is dropped
// before a reader has been given it: while window bytes of events wait
// for a reader, the process's output readers wait (waitRoom) and so,
// once its pipes are full, does the command.
type eventLog struct {
	mu      sync.Mutex
	events  []execbox.Event // events[0].Seq == first
	offs    []int64         // offs[i]: bytes of output before events[i]
	bytes   int64           // output bytes in events
	total   int64           // output bytes ever appended
	window  int64
	next    uint64        // Seq of the next event
	changed chan struct{} // closed and replaced on every append and ack
	done    bool

	flow    bool
	acked   uint64 // flow mode: the highest Seq a reader was given
	unacked int64  // flow mode: output bytes in events after acked
}

func newEventLog(window int64, flow bool) *eventLog {
	return &eventLog{window: window, flow: flow, next: 1, changed: make(chan struct{})}
}

// append records an event. data is copied. Callers serialise appends that
// must be ordered (Process holds its mutex). It never blocks: in flow
// mode the output readers wait for room first (waitRoom).
func (l *eventLog) append(kind execbox.EventKind, data []byte, res *execbox.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	ev := execbox.Event{Seq: l.next, Time: time.Now(), Kind: kind, Result: res}
	if data != nil {
		ev.Data = append([]byte(nil), data...)
	}
	l.next++
	l.events = append(l.events, ev)
	l.offs = append(l.offs, l.total)
	n := int64(len(ev.Data))
	l.bytes += n
	l.total += n
	if l.flow {
		l.unacked += n
	}
	l.trimLocked()
	if kind == execbox.EventExit {
		l.done = true
	}
	l.signalLocked()
}

// trimLocked drops the oldest events while the window is exceeded: in
// flow mode only events a reader was given.
func (l *eventLog) trimLocked() {
	for l.bytes > l.window && len(l.events) > 1 && (!l.flow || l.events[0].Seq <= l.acked) {
		l.bytes -= int64(len(l.events[0].Data))
		l.events[0] = execbox.Event{}
		l.events, l.offs = l.events[1:], l.offs[1:]
	}
}

func (l *eventLog) signalLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// ack records, in flow mode, that a reader was given every event up to
// seq: they no longer count against the window.
func (l *eventLog) ack(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.flow || seq <= l.acked {
		return
	}
	first := uint64(0)
	if len(l.events) > 0 {
		first = l.events[0].Seq
	}
	for s := max(l.acked+1, first); s <= seq && s < l.next; s++ {
		l.unacked -= int64(len(l.events[s-first].Data))
	}
	l.acked = seq
	l.trimLocked()
	l.signalLocked()
}

// waitRoom waits, in flow mode, until fewer than window bytes of events
// wait for a reader, or stop is closed.
func (l *eventLog) waitRoom(stop <-chan struct{}) {
	for {
		l.mu.Lock()
		full, changed := l.flow && !l.done && l.unacked >= l.window, l.changed
		l.mu.Unlock()
		if !full {
			return
		}
		select {
		case <-changed:
		case <-stop:
			return
		}
	}
}

// read yields events from seq on, waiting for more until the exit event.
// Where events it should have yielded are gone, it yields one
// EventDropped first; the exit event's Dropped totals what it left out.
func (l *eventLog) read(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	return func(yield func(execbox.Event, error) bool) {
		next := max(from, 1)
		// pos is the output offset of next, when known: from the start,
		// or from an event still held.
		pos, known := int64(0), next == 1
		var dropped int64
		for {
			l.mu.Lock()
			var batch []execbox.Event
			var gap *execbox.Event
			if len(l.events) > 0 {
				first := l.events[0].Seq
				if !known && next >= first && next <= l.next {
					pos, known = l.offsetLocked(next), true
				}
				if next < first {
					gap = &execbox.Event{Seq: first - 1, Time: time.Now(), Kind: execbox.EventDropped, Offset: l.offs[0], Dropped: -1}
					if known {
						gap.Dropped = l.offs[0] - pos
						dropped += gap.Dropped
					}
					next, pos, known = first, l.offs[0], true
				}
				if next < l.next {
					batch = append(batch, l.events[next-first:]...)
				}
			}
			done, changed := l.done, l.changed
			l.mu.Unlock()
			if gap != nil && !yield(*gap, nil) {
				return
			}
			for _, ev := range batch {
				if ev.Kind == execbox.EventExit {
					ev.Dropped = dropped
				}
				if !yield(ev, nil) {
					return
				}
				l.ack(ev.Seq)
				next = ev.Seq + 1
				pos += int64(len(ev.Data))
				if ev.Kind == execbox.EventExit {
					return
				}
			}
			if len(batch) > 0 {
				continue
			}
			if done {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				yield(execbox.Event{}, ctx.Err())
				return
			}
		}
	}
}

// offsetLocked returns the output offset of seq, held or next.
func (l *eventLog) offsetLocked(seq uint64) int64 {
	if seq == l.next {
		return l.total
	}
	return l.offs[seq-l.events[0].Seq]
}
