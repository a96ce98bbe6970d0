// Package blob stores immutable blobs (backup archives, snapshot layers, their metadata records)
// under string keys, in a local directory or in S3-compatible object storage.
//
// The contract, shared by both implementations and checked by one conformance suite:
//   - Keys are relative slash-separated paths such as "backups/<uuid>.tar.zst",
//     "layers/sha256-<hex>.tar.zst" or "meta/<name>.json" (see ValidateKey). A bad key is an
//     errdefs error with code VALIDATION_FAILED.
//   - Put is atomic: a reader never sees a partial blob, and a Put that fails or whose context is
//     cancelled leaves nothing under its key (an older blob under the key stays as it was). A
//     successful Put replaces any blob already under the key.
//   - A missing key is an errdefs error with code BLOB_NOT_FOUND (class errdefs.ErrNotFound).
//   - Delete of a missing key succeeds, so deletes can be retried after a crash.
//   - Context cancellation is reported as an error wrapping ctx.Err().
package blob

import (
	"context"
	"io"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Store is a flat namespace of immutable blobs addressed by key. Implementations are safe for
// concurrent use.
type Store interface {
	// Put streams r into a new blob under key and returns the number of bytes written. size is
	// the exact length of r in bytes, or -1 when unknown (the blob is then streamed in parts); a
	// reader that yields fewer or more bytes than a known size fails the Put. Put is atomic: on
	// any error (a failing reader, a cancelled ctx, a full disk) nothing is left under key.
	// Errors: VALIDATION_FAILED (bad key or size), NO_SPACE, PERMISSION_DENIED, UNAVAILABLE
	// (object storage unreachable), ctx.Err() wrapped.
	Put(ctx context.Context, key string, r io.Reader, size int64) (int64, error)
	// Get opens the blob under key for streaming. The caller must close the reader. The reader
	// yields exactly Info.Size bytes of one complete blob, even if the key is replaced or
	// deleted meanwhile (local) or fails with an error (object storage). ctx governs the open
	// and, for object storage, the whole read. Errors: BLOB_NOT_FOUND, VALIDATION_FAILED.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat returns the blob's key, size and modification time. Errors: BLOB_NOT_FOUND,
	// VALIDATION_FAILED.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the blob under key. A missing key is not an error. Errors:
	// VALIDATION_FAILED and storage errors.
	Delete(ctx context.Context, key string) error
	// List returns the blobs whose key starts with prefix (a plain string prefix, not a
	// directory: "layers/sha256-" is fine; "" lists everything), sorted by key. Uploads in
	// progress are never listed. Errors: VALIDATION_FAILED (bad prefix) and storage errors.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Describe returns a one-line description for logs, without secrets, such as
	// "local:/var/lib/hutch/blobs" or "s3://bucket/prefix/ at http://host:9000".
	Describe() string
}

// Info describes one blob.
type Info struct {
	Key     string    // the blob's key
	Size    int64     // length in bytes
	ModTime time.Time // when the blob was written (the storage's clock)
}

// notFound returns the BLOB_NOT_FOUND error for key.
func notFound(key string) error {
	return errdefs.Newf(errdefs.CodeBlobNotFound, "blob %q not found", key).With("key", key)
}
