// Package lines turns a stream of writes (a build tool's output, say) into whole lines, each
// handed to a callback without its line ending.
package lines

import (
	"bytes"
	"sync"
)

// Writer calls emit once per complete line written to it. It is safe for concurrent use;
// Flush emits a final line that has no newline.
type Writer struct {
	emit func(line string)

	mu  sync.Mutex
	buf []byte // guarded by mu: the incomplete last line
}

// NewWriter returns a Writer calling emit.
func NewWriter(emit func(line string)) *Writer { return &Writer{emit: emit} }

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.emit(string(bytes.TrimRight(w.buf[:i], "\r")))
		w.buf = w.buf[i+1:]
	}
}

// Flush emits what is left of an unterminated last line.
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}
