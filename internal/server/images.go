package server

import (
	"net/http"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/lines"
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
	lw := lines.NewWriter(func(line string) { _ = out.Send(map[string]any{"type": "progress", "message": line}) })
	img, err := s.images.Build(r.Context(), req.Name, lw)
	lw.Flush()
	if err != nil {
		_ = out.Send(map[string]any{"type": "error", "code": errdefs.CodeOf(err), "error": err.Error()})
		return
	}
	_ = out.Send(map[string]any{"type": "complete", "image": img})
}
