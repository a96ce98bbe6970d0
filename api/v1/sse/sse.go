// Package sse writes and reads Server-Sent Events in the reference system's framing: each event is
// one "data: <json>\n\n" frame whose JSON object has a "type" field
// (cloudflare-sandbox-api.md §4.4). No "event:" lines are written, and "id:" lines only by
// SendID; the reader ignores them and comment lines.
package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Writer sends events on an HTTP response. It is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer    // guarded by mu
	f  http.Flusher // may be nil
}

// NewWriter sets the SSE headers on w, writes the status 200 and returns a Writer.
func NewWriter(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if f != nil {
		f.Flush()
	}
	return &Writer{w: w, f: f}
}

// Send marshals v as JSON and writes it as one frame, then flushes.
func (s *Writer) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sse: marshal: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Flush()
	}
	return nil
}

// SendID is Send with an "id: <id>" line before the data, which a client sends back as the
// Last-Event-ID header when it reconnects. id must not contain a line break.
func (s *Writer) SendID(id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sse: marshal: %w", err)
	}
	if strings.ContainsAny(id, "\r\n") {
		return fmt.Errorf("sse: event id %q holds a line break", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, "id: %s\ndata: %s\n\n", id, b); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Flush()
	}
	return nil
}

// MaxFrame is the largest frame the Reader accepts, in bytes.
const MaxFrame = 16 << 20

// ErrFrameTooLarge is returned by Reader.Next for a frame over MaxFrame.
var ErrFrameTooLarge = errors.New("sse: frame too large")

// Reader reads frames from an SSE body.
type Reader struct {
	br *bufio.Reader
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the data of the next frame (the concatenated "data:" lines). It returns io.EOF
// at a clean end of stream between frames, and io.ErrUnexpectedEOF if the stream ends inside a
// frame.
func (r *Reader) Next() ([]byte, error) {
	var data []byte
	have := false
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: collect it whole.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(buf) > MaxFrame {
					return nil, ErrFrameTooLarge
				}
				line, err = r.br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if have || len(line) > 0 {
					return nil, io.ErrUnexpectedEOF
				}
				return nil, io.EOF
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if have {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) != "data" {
			continue
		}
		if have {
			data = append(data, '\n')
		}
		data = append(data, value...)
		if len(data) > MaxFrame {
			return nil, ErrFrameTooLarge
		}
		have = true
	}
}
