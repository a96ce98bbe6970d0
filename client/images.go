package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// ImageInfo is a base image (v1.Image).
type ImageInfo = v1.Image

// ListImages returns the images hutchd has built (GET /v1/images).
func (c *Client) ListImages(ctx context.Context) ([]ImageInfo, error) {
	var reply struct {
		Images []ImageInfo `json:"images"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/images"}, &reply); err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return reply.Images, nil
}

// BuildImage builds the image name (empty means "default") and returns it
// (POST /v1/images/build, an event stream). progress, if not nil, is called with each progress
// line as it arrives (without a trailing newline), from the calling goroutine. An image that
// already exists returns at once. A build can take minutes; bound it with ctx.
//
// Errors: the build's own failure (IMAGE_BUILD_FAILED, or the code of the "error" event);
// STREAM_INCOMPLETE (ErrUnavailable) when the stream ends before its complete or error event.
func (c *Client) BuildImage(ctx context.Context, name string, progress func(line string)) (*ImageInfo, error) {
	body := v1.BuildImageRequest{Name: name}
	shown := name
	if shown == "" {
		shown = "default"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/v1/images/build", json: body, accept: "text/event-stream"})
	if err != nil {
		return nil, fmt.Errorf("build image %q: %w", shown, err)
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	for {
		frame, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("build image %q: %w", shown, streamIncomplete(ctx, err))
		}
		var ev v1.ImageBuildEvent
		if err := json.Unmarshal(frame, &ev); err != nil {
			return nil, fmt.Errorf("build image %q: %w", shown, errdefs.Wrap(errdefs.CodeInternal, err, "decode build event"))
		}
		switch ev.Type {
		case "progress":
			if progress != nil {
				progress(ev.Message)
			}
		case "complete":
			if ev.Image == nil {
				return nil, fmt.Errorf("build image %q: %w", shown, errdefs.New(errdefs.CodeInternal, "complete event without an image"))
			}
			return ev.Image, nil
		case "error":
			return nil, fmt.Errorf("build image %q: %w", shown,
				errdefs.Envelope{Code: ev.Code, Message: ev.Error, Context: ev.Context}.Err())
		}
	}
}
