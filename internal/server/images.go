package server

import (
	"bytes"
	"net/http"
	"sync"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sse"
)

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	list, err := s.images.List(r.Context())
	if err != nil {
		writeError(w, r, err, "image.list")
		return
	}
	if list == nil {
		list = []ImageInfo{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"images": list})
}

// buildImage streams build progress as SSE: progress lines, then complete or error.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "image.build")
		return
	}
	if req.Name == "" {
		req.Name = "default"
	}
	out := sse.NewWriter(w)
	lw := &lineWriter{send: func(line string) { _ = out.Send(map[string]any{"type": "progress", "message": line}) }}
	img, err := s.images.Build(r.Context(), req.Name, lw)
	lw.flush()
	if err != nil {
		_ = out.Send(map[string]any{"type": "error", "code": errdefs.CodeOf(err), "error": err.Error()})
		return
	}
	_ = out.Send(map[string]any{"type": "complete", "image": img})
}

// lineWriter turns written bytes into whole lines.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte // guarded by mu
	send func(string)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.send(string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.send(string(l.buf))
		l.buf = nil
	}
}
