package files

import (
	"errors"
	"io"
	"os"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
)

// MaxReadSize is the largest file Read returns whole, in bytes (32 MiB); bigger files must be
// streamed.
const MaxReadSize = 32 << 20

// Meta describes a file's content.
type Meta struct {
	// Size in bytes.
	Size int64
	// MIME type without parameters.
	MIME string
	// IsBinary is true unless the type is text/*, JSON, XML, JavaScript, or the file is empty.
	IsBinary bool
}

// Open opens the regular file at path for reading and detects its type. The caller closes the
// file. Errors: IS_DIRECTORY, FILESYSTEM_ERROR for non-regular files (devices, FIFOs), and the
// mapped OS codes.
func Open(path string) (*os.File, Meta, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, Meta{}, fserr.Map(err, path)
	}
	if fi.IsDir() {
		return nil, Meta{}, errdefs.Newf(errdefs.CodeIsDirectory, "%s is a directory", path).With("path", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, Meta{}, errdefs.Newf(errdefs.CodeFilesystem, "%s is not a regular file", path).With("path", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, Meta{}, fserr.Map(err, path)
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, Meta{}, fserr.Map(err, path)
	}
	head := make([]byte, 512)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, Meta{}, fserr.Map(err, path)
	}
	meta := Meta{Size: fi.Size()}
	if fi.Size() == 0 {
		meta.MIME = "inode/x-empty"
		if t, ok := extTypes[extOf(path)]; ok {
			meta.MIME = t
		}
	} else {
		meta.MIME = DetectMIME(path, head[:n])
	}
	meta.IsBinary = fi.Size() > 0 && IsBinaryMIME(meta.MIME)
	return f, meta, nil
}

// Read returns the whole content of the file at path, up to max bytes (MaxReadSize when max
// <= 0). A bigger file gives FILE_TOO_LARGE with context {path, size, maxSize}.
func Read(path string, max int64) ([]byte, Meta, error) {
	if max <= 0 {
		max = MaxReadSize
	}
	f, meta, err := Open(path)
	if err != nil {
		return nil, Meta{}, err
	}
	defer f.Close()
	if meta.Size > max {
		return nil, Meta{}, errdefs.Newf(errdefs.CodeFileTooLarge,
			"%s is %d bytes, over the %d byte limit of read; use the streaming read", path, meta.Size, max).
			With("path", path).With("size", meta.Size).With("maxSize", max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, Meta{}, fserr.Map(err, path)
	}
	if int64(len(data)) > max {
		return nil, Meta{}, errdefs.Newf(errdefs.CodeFileTooLarge, "%s grew over the %d byte limit", path, max).
			With("path", path).With("maxSize", max)
	}
	meta.Size = int64(len(data))
	return data, meta, nil
}
