package watch

import (
	"context"
	"io"
	"sync"
)

// queue is a Watcher's bounded event queue. When it holds max events, further events are
// counted in one overflow event at the tail (placed where the loss happened) instead of being
// queued; the stopped event always gets in. It is safe for concurrent use.
type queue struct {
	mu      sync.Mutex
	items   []Event // guarded by mu
	max     int
	ended   bool          // stopped was pushed; guarded by mu
	dropped int           // events dropped in all; guarded by mu
	wake    chan struct{} // capacity 1: items became available
}

func newQueue(max int) *queue {
	return &queue{max: max, wake: make(chan struct{}, 1)}
}

// push queues ev. It returns false if ev was dropped (counted in an overflow event).
func (q *queue) push(ev Event) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false
	}
	switch {
	case ev.Kind == KindStopped:
		q.ended = true
		q.items = append(q.items, ev)
	case ev.Kind == KindOverflow && ev.Dropped < 0:
		// A kernel overflow: always reported, merged into an overflow already at the tail.
		if n := len(q.items); n > 0 && q.items[n-1].Kind == KindOverflow {
			q.items[n-1].Dropped = -1
		} else {
			q.items = append(q.items, ev)
		}
	case len(q.items) >= q.max:
		q.dropped++
		if n := len(q.items); q.items[n-1].Kind == KindOverflow {
			if q.items[n-1].Dropped >= 0 {
				q.items[n-1].Dropped++
			}
		} else {
			q.items = append(q.items, Event{Kind: KindOverflow, Dropped: 1, Time: ev.Time})
		}
		q.signal()
		return false
	default:
		q.items = append(q.items, ev)
	}
	q.signal()
	return true
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next returns the oldest event, waiting for one until ctx ends. After the stopped event it
// returns io.EOF.
func (q *queue) next(ctx context.Context) (Event, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			ev := q.items[0]
			q.items[0] = Event{}
			q.items = q.items[1:]
			if len(q.items) == 0 {
				q.items = nil // let the backing array go
			}
			q.mu.Unlock()
			return ev, nil
		}
		ended := q.ended
		q.mu.Unlock()
		if ended {
			return Event{}, io.EOF
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-q.wake:
		}
	}
}

// totalDropped returns how many events the queue has dropped.
func (q *queue) totalDropped() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
