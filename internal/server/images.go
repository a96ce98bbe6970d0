package server

import (
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/lines"
)

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	list, err := s.images.List(r.Context())
	if err != nil {
		writeError(w, r, err, "image.list")
		return
	}
	writeJSON(w, http.StatusOK, v1.ImageList{Images: toImages(list)})
}

// buildImage streams build progress as SSE: progress lines, then complete or error.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	var req v1.BuildImageRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "image.build")
		return
	}
	if req.Name == "" {
		req.Name = "default"
	}
	out := sse.NewWriter(w)
	lw := lines.NewWriter(func(line string) {
		_ = out.Send(v1.ImageBuildProgressEvent{Type: v1.ImageBuildProgress, Message: line})
	})
	img, err := s.images.Build(r.Context(), req.Name, lw)
	lw.Flush()
	if err != nil {
		_ = out.Send(v1.ImageBuildEvent{Type: v1.ImageBuildError, Code: errdefs.CodeOf(err), Error: err.Error()})
		return
	}
	wire := toImage(img)
	_ = out.Send(v1.ImageBuildEvent{Type: v1.ImageBuildComplete, Image: &wire})
}
