package terminal

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/hutchdev/hutch/errdefs"
)

// ErrTooSlow is returned by Viewer.Read once the viewer was dropped for not reading the
// output for Config.SlowViewer while the shell was producing more than the ring holds.
var ErrTooSlow = errdefs.New(errdefs.CodeUnavailable, "terminal viewer too slow: output it had not read was about to be overwritten; reconnect to get the replay")

// ErrViewerClosed is returned by Viewer.Read after Close.
var ErrViewerClosed = errors.New("terminal: viewer closed")

// Ready is what a viewer learns when it attaches.
type Ready struct {
	ID          string `json:"id"`
	Cols        int    `json:"cols"`
	Rows        int    `json:"rows"`
	PID         int    `json:"pid"`
	ReplayBytes int64  `json:"replayBytes"` // bytes of the ring buffer the first Reads return
}

// Viewer is one attachment to a terminal: it reads the terminal's output from the oldest byte
// held at attach time onwards, and may send input and resize. Close it when done.
type Viewer struct {
	t       *Terminal
	ready   Ready
	off     int64 // next output offset to read; guarded by t.mu
	dropped bool  // too slow; guarded by t.mu

	closeOnce sync.Once
	closed    chan struct{}
}

// Ready returns the terminal's state at attach time.
func (v *Viewer) Ready() Ready { return v.ready }

// Read copies the next output bytes into p, waiting for them: first the replay, then live
// output, in order and without gaps. It returns io.EOF once the shell has exited and all its
// output was read (ExitCode then tells the code), ErrTooSlow when the viewer was dropped,
// ErrViewerClosed after Close, or ctx's error.
func (v *Viewer) Read(ctx context.Context, p []byte) (int, error) {
	t := v.t
	t.mu.Lock()
	for {
		switch {
		case v.dropped:
			t.mu.Unlock()
			return 0, ErrTooSlow
		case v.off < t.ring.end:
			n := t.ring.readAt(v.off, p)
			v.off += int64(n)
			t.progressLocked()
			t.mu.Unlock()
			return n, nil
		case t.exited:
			t.mu.Unlock()
			return 0, io.EOF
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-v.closed:
			return 0, ErrViewerClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		t.mu.Lock()
	}
}

// ExitCode returns the shell's exit code (128+N for signal N) and true once it has exited.
func (v *Viewer) ExitCode() (int, bool) {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	return v.t.exitCode, v.t.exited
}

// Write sends input bytes to the shell (as typed keys). It blocks while the terminal's input
// queue is full.
func (v *Viewer) Write(p []byte) (int, error) {
	select {
	case <-v.closed:
		return 0, ErrViewerClosed
	default:
	}
	return v.t.write(p)
}

// Resize sets the terminal's size: 1–MaxSize columns and rows, else VALIDATION_FAILED (the
// terminal is unchanged).
func (v *Viewer) Resize(cols, rows int) error { return v.t.resize(cols, rows) }

// Close detaches the viewer; the terminal runs on. A Read in progress returns ErrViewerClosed.
func (v *Viewer) Close() {
	v.closeOnce.Do(func() {
		close(v.closed)
		t := v.t
		t.mu.Lock()
		delete(t.viewers, v)
		t.progressLocked()
		t.mu.Unlock()
	})
}
