package process

import (
	"context"
	"fmt"
	"io"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
)

// EventKind is the kind of an Event.
type EventKind int

// The kinds of events a Follower returns.
const (
	// KindOutput: Data is output of Stream starting at byte Offset of that stream.
	KindOutput EventKind = iota
	// KindDropped: bytes [From, To) of Stream are no longer held; the reader skips them.
	KindDropped
	// KindExit: the process has ended (Info is its final record); it is the last event.
	KindExit
)

// Event is one step of a process's output.
type Event struct {
	Kind     EventKind
	Stream   Stream
	Data     []byte
	Offset   int64
	From, To int64
	Info     Info
}

// Follower reads a process's output from given offsets: held output first, then live
// output as it arrives, in arrival order across the two streams, without gaps or
// duplicates (except where output was dropped from a log buffer before it was read, which
// a KindDropped event reports). It is not safe for concurrent use.
type Follower struct {
	p        *proc
	want     [2]bool
	off      [2]int64
	exitSent bool
}

// Follow returns a Follower of process id from the given stream offsets (0 = from the
// first byte). Errors: PROCESS_NOT_FOUND; VALIDATION_FAILED for an offset past what the stream
// has written.
func (m *Manager) Follow(id string, stdoutOffset, stderrOffset int64) (*Follower, error) {
	p, err := m.lookup(id)
	if err != nil {
		return nil, err
	}
	return p.follow([2]int64{stdoutOffset, stderrOffset}, [2]bool{true, true})
}

func (p *proc) follow(off [2]int64, want [2]bool) (*Follower, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range []Stream{Stdout, Stderr} {
		if off[s] < 0 || off[s] > p.logs[s].end {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "%s offset %d outside 0-%d", s, off[s], p.logs[s].end).
				With(s.String()+"Offset", off[s])
		}
	}
	return &Follower{p: p, want: want, off: off}, nil
}

// Offsets returns the offsets of the next bytes the Follower will return.
func (f *Follower) Offsets() (stdout, stderr int64) { return f.off[0], f.off[1] }

// Next returns the next event, waiting for one while the process runs. After the KindExit
// event it returns io.EOF. Output events carry at most session.ChunkSize bytes. Errors: the
// cause of ctx when it ends first, or a failure to read a log kept on disk.
func (f *Follower) Next(ctx context.Context) (Event, error) {
	p := f.p
	for {
		p.mu.Lock()
		for _, s := range []Stream{Stdout, Stderr} {
			if f.want[s] && f.off[s] < p.logs[s].start {
				ev := Event{Kind: KindDropped, Stream: s, From: f.off[s], To: p.logs[s].start}
				f.off[s] = p.logs[s].start
				p.mu.Unlock()
				return ev, nil
			}
		}
		if s, limit, ok := p.next(f.off, f.want); ok {
			n := int(min(limit-f.off[s], session.ChunkSize))
			data, err := p.logs[s].read(f.off[s], n)
			p.mu.Unlock()
			if err != nil {
				return Event{}, fmt.Errorf("process %s: read %s log: %w", p.info.ID, s, err)
			}
			ev := Event{Kind: KindOutput, Stream: s, Data: data, Offset: f.off[s]}
			f.off[s] += int64(len(data))
			return ev, nil
		}
		if p.ended() {
			info := p.info
			p.mu.Unlock()
			if f.exitSent {
				return Event{}, io.EOF
			}
			f.exitSent = true
			return Event{Kind: KindExit, Info: info}, nil
		}
		ch := p.watch()
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Event{}, context.Cause(ctx)
		}
	}
}
