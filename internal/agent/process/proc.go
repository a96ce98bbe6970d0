package process

import (
	"sort"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/agent/session"
)

// Stream names one of a process's output streams.
type Stream int

// The streams.
const (
	Stdout Stream = 0
	Stderr Stream = 1
)

func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// maxSegs bounds the arrival-order record of one process. Past it the oldest entries go, and
// the oldest held output loses its interleaving of stdout and stderr (each stream stays exact).
const maxSegs = 8192

// seg is one run of output of a single stream, in arrival order. ends are the cumulative
// ends (absolute offsets) of both streams once the run was written.
type seg struct {
	stream Stream
	ends   [2]int64
}

// proc is one process: its record, its logs, and what waits on it.
type proc struct {
	seq      uint64
	logBytes int
	started  chan struct{} // closed once the start attempt is over (bg set, or not started)
	done     chan struct{} // closed once ended and saved

	killMu sync.Mutex // one kill at a time

	mu      sync.Mutex
	info    Info                // guarded by mu
	bg      *session.Background // nil when never started or loaded; guarded by mu
	logs    [2]*ring            // guarded by mu
	order   []seg               // arrival order of the output; guarded by mu
	changed chan struct{}       // closed on new output or the end; guarded by mu
	watched bool                // someone holds changed; guarded by mu
}

func newProc(info Info, logBytes int, seq uint64) *proc {
	return &proc{
		seq: seq, logBytes: logBytes, started: make(chan struct{}), done: make(chan struct{}),
		info: info, logs: [2]*ring{newRing(logBytes, 0), newRing(logBytes, 0)}, changed: make(chan struct{}),
	}
}

// free gives the memory of the in-memory logs back to the log budget; they must no longer be
// used.
func (p *proc) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.logs {
		r.free()
	}
}

// snapshot returns a copy of the record.
func (p *proc) snapshot() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// write is the session.Background output callback: it appends a chunk to its stream.
func (p *proc) write(stderr bool, b []byte) {
	s := Stdout
	if stderr {
		s = Stderr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logs[s].write(b)
	ends := [2]int64{p.logs[0].end, p.logs[1].end}
	if n := len(p.order); n > 0 && p.order[n-1].stream == s {
		p.order[n-1].ends = ends
	} else {
		p.order = append(p.order, seg{stream: s, ends: ends})
	}
	// Drop runs whose output is no longer held, and the oldest past the bound.
	for len(p.order) > 1 && (len(p.order) > maxSegs ||
		(p.order[0].ends[0] <= p.logs[0].start && p.order[0].ends[1] <= p.logs[1].start)) {
		p.order = p.order[1:]
	}
	p.notify()
}

// notify wakes whoever waits for a change. p.mu must be held.
func (p *proc) notify() {
	if p.watched {
		close(p.changed)
		p.changed = make(chan struct{})
		p.watched = false
	}
}

// watch returns a channel closed on the next change. p.mu must be held.
func (p *proc) watch() <-chan struct{} {
	p.watched = true
	return p.changed
}

// ended reports whether the process has ended and been saved.
func (p *proc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// next returns the stream whose output comes next for a reader at offsets off, among the
// streams in want, and the end of that run; ok is false when the reader has everything.
// p.mu must be held and off must be ≥ the held starts.
func (p *proc) next(off [2]int64, want [2]bool) (s Stream, limit int64, ok bool) {
	best := len(p.order)
	for _, st := range []Stream{Stdout, Stderr} {
		if !want[st] || off[st] >= p.logs[st].end {
			continue
		}
		i := sort.Search(len(p.order), func(i int) bool { return p.order[i].ends[st] > off[st] })
		if i < best || !ok {
			best, s, ok = i, st, true
			limit = p.logs[st].end
			if i < len(p.order) {
				limit = p.order[i].ends[st]
			}
		}
	}
	return s, limit, ok
}

// kill terminates the process (see Manager.Kill) and waits until it is done.
func (p *proc) kill(grace time.Duration) bool {
	<-p.started
	p.killMu.Lock()
	defer p.killMu.Unlock()
	p.mu.Lock()
	bg := p.bg
	p.mu.Unlock()
	if bg == nil || p.ended() {
		<-p.done
		return false
	}
	killed := bg.Terminate(grace)
	<-p.done
	return killed
}
