package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Image is a base image hutchd can run sandboxes on: a minimal Debian with Packages
// installed on top.
type Image struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Packages  []string  `json:"packages"`
	CreatedAt time.Time `json:"createdAt"`
	SizeBytes int64     `json:"sizeBytes"`
}

// ImageList is the reply of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
}

// BuildImageRequest is the body of POST /v1/images/build; Name defaults to "default". An
// image that exists already completes at once. The reply is an SSE stream of
// ImageBuildEvent frames.
type BuildImageRequest struct {
	Name string `json:"name,omitempty"`
}

// Image build event types (ImageBuildEvent.Type).
const (
	ImageBuildProgress = "progress"
	ImageBuildComplete = "complete"
	ImageBuildError    = "error"
)

// ImageBuildProgressEvent is the exact form of a "progress" frame: Message is sent even when
// the build printed an empty line.
type ImageBuildProgressEvent struct {
	Type    string `json:"type"` // "progress"
	Message string `json:"message"`
}

// ImageBuildEvent is one SSE frame of images/build: "progress" (Message, one line of build
// output), then "complete" (Image) or "error" (Code, Error; e.g. IMAGE_BUILD_FAILED).
type ImageBuildEvent struct {
	Type    string       `json:"type"`
	Message string       `json:"message,omitempty"`
	Image   *Image       `json:"image,omitempty"`
	Code    errdefs.Code `json:"code,omitempty"`
	Error   string       `json:"error,omitempty"`
	// Context is the error's details, when it has some. hutchd sends none, nor a Timestamp;
	// both are here because the error frame is the shared StreamError.
	Context   map[string]any `json:"context,omitempty"`
	Timestamp time.Time      `json:"timestamp,omitzero"`
}
