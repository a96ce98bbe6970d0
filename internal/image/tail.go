package image

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// tailWriter passes writes through to w and remembers the last max lines, for error messages.
type tailWriter struct {
	w   io.Writer
	max int

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, string(t.partial[:i]))
		t.partial = t.partial[i+1:]
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
	}
	if _, err := t.w.Write(p); err != nil {
		// A broken progress sink (a client went away) must not fail the build.
		t.w = io.Discard
	}
	return len(p), nil
}

func (t *tailWriter) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := append([]string{}, t.lines...)
	if len(t.partial) > 0 {
		lines = append(lines, string(t.partial))
	}
	return strings.Join(lines, "\n")
}
