package archive

import (
	"archive/tar"
	"bytes"
	"io"
	"maps"
	"os"
	"path"
	"strings"

	"github.com/hutchdev/hutch/internal/sparse"
)

// The names both formats give entries and PAX records.
const (
	// topEntry is a tree archive's first entry, the archived directory itself; a layer has none
	// but ExtractLayer accepts it (it extracts backup archives into the tree cache too).
	topEntry = "./"
	// paxXattr prefixes an extended attribute's name in a PAX record (the GNU tar / star form).
	paxXattr = "SCHILY.xattr."
	// paxOpaque is the record of an overlayfs opaque directory.
	paxOpaque = paxXattr + "trusted.overlay.opaque"
)

// checkName is the path-safety check of both extractors: it refuses an entry name that is
// empty, holds a NUL byte, is absolute or has a ".." element, which could name something
// outside the target, and returns the name cleaned ("." for the top) or why it is refused. The
// extractors add their own rule against names that go through a symlink of the archive.
func checkName(name string) (clean, why string) {
	switch {
	case name == "":
		return "", "empty name"
	case strings.IndexByte(name, 0) >= 0:
		return "", "NUL byte in name"
	case strings.HasPrefix(name, "/"):
		return "", "absolute path"
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", `".." element`
		}
	}
	return path.Clean(name), ""
}

// markSparse makes hdr the header of a sparse entry (internal/sparse) for a file of apparent
// size size whose data extents are ext: PAX format, the sparse records added to hdr's own, and
// Size the bytes of ext, which is all its content in the stream.
func markSparse(hdr *tar.Header, size int64, ext []sparse.Extent) {
	hdr.Format = tar.FormatPAX
	if hdr.PAXRecords == nil {
		hdr.PAXRecords = map[string]string{}
	}
	maps.Copy(hdr.PAXRecords, sparse.Records(size, ext))
	hdr.Size = sparse.DataBytes(ext)
}

// zeroPadded reads a file that may shrink while it is read: past its end it reads zero bytes,
// so the entry whose header promised the larger size still gets its content.
type zeroPadded struct{ f *os.File }

func (z zeroPadded) ReadAt(p []byte, off int64) (int, error) {
	n, err := z.f.ReadAt(p, off)
	if err == io.EOF {
		clear(p[n:])
		return len(p), nil
	}
	return n, err
}

// zeros is a block of zero bytes to compare with.
var zeros = make([]byte, bufSize)

// isZero reports whether b holds only zero bytes.
func isZero(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), len(zeros))
		if !bytes.Equal(b[:k], zeros[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// copyHoles writes the first size bytes of r into f (a new, empty file) through buf, reading at
// most len(buf) bytes at a time: each aligned block of block bytes (at most len(buf)) that
// holds only zeros is skipped rather than written, and f's size is set at the end, so they
// become holes (as `cp --sparse=always` makes them): zeros that an archive stores in full (a
// file that is not a sparse entry) take no disk once extracted. check, if set, runs before
// each read (a cancellation check).
// Errors: r's (io.EOF when it ends early) with fromStream set; f's and check's without.
func copyHoles(f *os.File, r io.Reader, size int64, buf []byte, block int, check func() error) (fromStream bool, err error) {
	var off int64
	for off < size {
		if check != nil {
			if err := check(); err != nil {
				return false, err
			}
		}
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-off)])
		if err != nil {
			return true, err
		}
		// Write each run of blocks that are not all zeros with one call; skip the others.
		chunk := buf[:n]
		for len(chunk) > 0 {
			k := 0
			for k < len(chunk) && !isZero(chunk[k:min(k+block, len(chunk))]) {
				k = min(k+block, len(chunk))
			}
			if k > 0 {
				if _, err := f.WriteAt(chunk[:k], off); err != nil {
					return false, err
				}
				off += int64(k)
				chunk = chunk[k:]
			}
			z := 0
			for z < len(chunk) && isZero(chunk[z:min(z+block, len(chunk))]) {
				z = min(z+block, len(chunk))
			}
			off += int64(z)
			chunk = chunk[z:]
		}
	}
	// The apparent size, which the writes do not reach when the content ends in zeros.
	return false, f.Truncate(size)
}
