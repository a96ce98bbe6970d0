package client

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

func buildServer(t *testing.T, events ...map[string]any) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/images/build", func(w http.ResponseWriter, r *http.Request) {
		if name := readJSON(t, r)["name"]; name != "py" {
			t.Errorf("build name = %v", name)
		}
		sw := sse.NewWriter(w)
		for _, ev := range events {
			_ = sw.Send(ev)
		}
	})
	mux.HandleFunc("GET /v1/images", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"images": []any{map[string]any{"id": "img-1", "name": "default",
			"packages": []string{"bash", "git"}, "createdAt": "2025-01-01T00:00:00Z", "sizeBytes": 1234}}})
	})
	return mux
}

func TestBuildImage(t *testing.T) {
	image := map[string]any{"id": "img-2", "name": "py", "packages": []string{"python3"},
		"createdAt": "2025-01-01T00:00:00Z", "sizeBytes": 99}
	c := newTestClient(t, buildServer(t,
		map[string]any{"type": "progress", "message": "debootstrap"},
		map[string]any{"type": "progress", "message": "apt-get install python3"},
		map[string]any{"type": "complete", "image": image}))
	var lines []string
	img, err := c.BuildImage(t.Context(), "py", func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("BuildImage = %v", err)
	}
	if img.ID != "img-2" || img.Name != "py" || img.SizeBytes != 99 || !slices.Equal(img.Packages, []string{"python3"}) {
		t.Errorf("BuildImage = %+v", img)
	}
	if !slices.Equal(lines, []string{"debootstrap", "apt-get install python3"}) {
		t.Errorf("progress lines = %q", lines)
	}

	imgs, err := c.ListImages(t.Context())
	if err != nil || len(imgs) != 1 || imgs[0].Name != "default" || imgs[0].SizeBytes != 1234 {
		t.Errorf("ListImages = %+v, %v", imgs, err)
	}
}

func TestBuildImageFailures(t *testing.T) {
	c := newTestClient(t, buildServer(t,
		map[string]any{"type": "progress", "message": "x"},
		map[string]any{"type": "error", "code": "IMAGE_BUILD_FAILED", "error": "debootstrap failed"}))
	if _, err := c.BuildImage(t.Context(), "py", nil); !errdefs.IsCode(err, errdefs.CodeImageBuildFailed) {
		t.Errorf("BuildImage with an error event = %v; want IMAGE_BUILD_FAILED", err)
	}
	c = newTestClient(t, buildServer(t, map[string]any{"type": "progress", "message": "x"}))
	_, err := c.BuildImage(t.Context(), "py", nil)
	if !errdefs.IsCode(err, errdefs.CodeStreamIncomplete) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("BuildImage with a cut stream = %v; want STREAM_INCOMPLETE", err)
	}
}
