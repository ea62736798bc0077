package proc

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/execbox/execbox"
)

// eventLog is the ordered, bounded record of a process's events. Readers
// may start from any sequence number still in the window; old events are
// dropped once the window's byte budget is used, never the exit event.
type eventLog struct {
	mu      sync.Mutex
	events  []execbox.Event // events[0].Seq == first
	bytes   int64
	window  int64
	next    uint64        // Seq of the next event
	changed chan struct{} // closed and replaced on every append
	done    bool
}

func newEventLog(window int64) *eventLog {
	return &eventLog{window: window, next: 1, changed: make(chan struct{})}
}

// append records an event. data is copied. Callers serialise appends that
// must be ordered (Process holds its mutex).
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
	l.bytes += int64(len(ev.Data))
	for l.bytes > l.window && len(l.events) > 1 {
		l.bytes -= int64(len(l.events[0].Data))
		l.events[0] = execbox.Event{}
		l.events = l.events[1:]
	}
	if kind == execbox.EventExit {
		l.done = true
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// read yields events from seq on, waiting for more until the exit event.
func (l *eventLog) read(ctx context.Context, from uint64) iter.Seq2[execbox.Event, error] {
	return func(yield func(execbox.Event, error) bool) {
		next := from
		for {
			l.mu.Lock()
			var batch []execbox.Event
			if len(l.events) > 0 {
				first := l.events[0].Seq
				next = max(next, first)
				if next < l.next {
					batch = append(batch, l.events[next-first:]...)
				}
			}
			done, changed := l.done, l.changed
			l.mu.Unlock()
			for _, ev := range batch {
				if !yield(ev, nil) {
					return
				}
				next = ev.Seq + 1
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
