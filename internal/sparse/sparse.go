// Package sparse stores sparse regular files in tar streams by their data alone: the writer
// finds a file's data extents with lseek(SEEK_DATA/SEEK_HOLE) and writes only them, the reader
// puts them back at their offsets and leaves the rest holes. A file of 200 GB apparent size
// holding 1 MB of data costs 1 MB to archive and to extract, not 200 GB of zeros read, hashed
// and compressed.
//
// The format is Hutch's own (snapshot layers and backup archives are written and read by
// Hutch alone): a sparse file is a regular tar entry (PAX format) whose content is its data
// extents concatenated, in offset order, and whose Size is their total; two PAX records give
// the rest:
//
//	HUTCH.sparse.size  the file's apparent size, decimal
//	HUTCH.sparse.map   its data extents as "offset,length" pairs, comma-separated ("" if none)
//
// Go's archive/tar keeps records it does not know in Header.PAXRecords, so both survive a
// round trip through it. GNU's sparse formats are not used because Go's reader expands them
// into zeros on read, which is the very cost to avoid. A file without holes is written as an
// ordinary entry.
package sparse

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PAX record names.
const (
	RecordSize = "HUTCH.sparse.size"
	RecordMap  = "HUTCH.sparse.map"
)

// MaxExtents is the most data extents a sparse entry may list: the map is one PAX record, and
// Go's tar reader refuses PAX headers past 1 MiB. A file with more (a fragmented file) gets its
// smallest holes merged into data until it fits (Extents).
const MaxExtents = 32 << 10

// Extent is one run of data in a file.
type Extent struct {
	Off, Len int64
}

// Extents returns the data extents of the first size bytes of f, in offset order, and
// whether the file has holes there (if not, the single extent covers all of it). A file
// system without SEEK_DATA support reports the whole file as data.
func Extents(f *os.File, size int64) ([]Extent, bool, error) {
	if size <= 0 {
		return nil, false, nil
	}
	whole := []Extent{{0, size}}
	fd := int(f.Fd())
	var out []Extent
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return whole, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("seek data: %w", err)
		}
		if data >= size {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, false, fmt.Errorf("seek hole: %w", err)
		}
		hole = min(hole, size)
		out = append(out, Extent{data, hole - data})
		off = hole
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return nil, false, fmt.Errorf("seek: %w", err)
	}
	if len(out) == 1 && out[0] == whole[0] {
		return whole, false, nil
	}
	return merge(out, MaxExtents), true, nil
}

// merge joins neighbouring extents across the smallest holes until at most max remain.
func merge(ext []Extent, max int) []Extent {
	for len(ext) > max {
		// Double the smallest gap kept until enough merge: a few passes at most.
		minGap := int64(4096)
		for {
			n := 1
			for i := 1; i < len(ext); i++ {
				if ext[i].Off-(ext[i-1].Off+ext[i-1].Len) > minGap {
					n++
				}
			}
			if n <= max {
				break
			}
			minGap *= 2
		}
		out := ext[:1]
		for _, e := range ext[1:] {
			last := &out[len(out)-1]
			if e.Off-(last.Off+last.Len) <= minGap {
				last.Len = e.Off + e.Len - last.Off
				continue
			}
			out = append(out, e)
		}
		ext = out
	}
	return ext
}

// DataBytes is the total length of ext.
func DataBytes(ext []Extent) int64 {
	var n int64
	for _, e := range ext {
		n += e.Len
	}
	return n
}

// Records returns the PAX records of a sparse file of the given apparent size.
func Records(size int64, ext []Extent) map[string]string {
	var b strings.Builder
	for i, e := range ext {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(e.Off, 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(e.Len, 10))
	}
	return map[string]string{RecordSize: strconv.FormatInt(size, 10), RecordMap: b.String()}
}

// Parse reads the sparse records of an entry whose tar Size is stored (its data bytes). It
// returns ok false when the entry is not sparse. The records are untrusted: a size or map
// that does not parse, extents out of order, overlapping, empty or past the size, more than
// MaxExtents of them, or lengths that do not add up to stored all fail.
func Parse(recs map[string]string, stored int64) (size int64, ext []Extent, ok bool, err error) {
	sz, hasSize := recs[RecordSize]
	mp, hasMap := recs[RecordMap]
	if !hasSize && !hasMap {
		return 0, nil, false, nil
	}
	if !hasSize || !hasMap {
		return 0, nil, false, errors.New("sparse entry: size or map record missing")
	}
	size, err = strconv.ParseInt(sz, 10, 64)
	if err != nil || size < 0 {
		return 0, nil, false, fmt.Errorf("sparse entry: bad size %q", sz)
	}
	if mp != "" {
		fields := strings.Split(mp, ",")
		if len(fields)%2 != 0 || len(fields)/2 > MaxExtents {
			return 0, nil, false, errors.New("sparse entry: bad map")
		}
		ext = make([]Extent, 0, len(fields)/2)
		var end, total int64
		for i := 0; i < len(fields); i += 2 {
			off, err1 := strconv.ParseInt(fields[i], 10, 64)
			n, err2 := strconv.ParseInt(fields[i+1], 10, 64)
			if err1 != nil || err2 != nil || off < end || n <= 0 || off > size || n > size-off {
				return 0, nil, false, fmt.Errorf("sparse entry: bad extent %s,%s", fields[i], fields[i+1])
			}
			ext = append(ext, Extent{off, n})
			end, total = off+n, total+n
		}
		if total != stored {
			return 0, nil, false, fmt.Errorf("sparse entry: map holds %d bytes, entry %d", total, stored)
		}
	} else if stored != 0 {
		return 0, nil, false, fmt.Errorf("sparse entry: empty map, entry %d bytes", stored)
	}
	return size, ext, true, nil
}

// Restore writes the data extents ext, read in order from r, into f (a new, empty file) at
// their offsets, and sets f's size, so everything between them is a hole. buf is the copy
// buffer; check, if set, is called before each buffer's worth (a cancellation check).
func Restore(f *os.File, r io.Reader, size int64, ext []Extent, buf []byte, check func() error) error {
	for _, e := range ext {
		for done := int64(0); done < e.Len; {
			if check != nil {
				if err := check(); err != nil {
					return err
				}
			}
			n, err := io.ReadFull(r, buf[:min(int64(len(buf)), e.Len-done)])
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			if _, err := f.WriteAt(buf[:n], e.Off+done); err != nil {
				return err
			}
			done += int64(n)
		}
	}
	return f.Truncate(size)
}

// Copy writes the data extents ext of f to w, in order, through buf. check, if set, is called
// before each buffer's worth. A file that shrank meanwhile (f's ReadAt reports io.EOF inside an
// extent) is an error.
func Copy(w io.Writer, f io.ReaderAt, ext []Extent, buf []byte, check func() error) error {
	for _, e := range ext {
		for done := int64(0); done < e.Len; {
			if check != nil {
				if err := check(); err != nil {
					return err
				}
			}
			n, err := f.ReadAt(buf[:min(int64(len(buf)), e.Len-done)], e.Off+done)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				done += int64(n)
			}
			if err == io.EOF && done < e.Len {
				return fmt.Errorf("file shrank to %d bytes while being read", e.Off+done)
			}
			if err != nil && err != io.EOF {
				return err
			}
		}
	}
	return nil
}
