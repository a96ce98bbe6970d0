package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// zeroReader reads zero bytes forever.
type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// sparseEntry is one regular file of a streamed test archive: its content is the
// concatenation of parts, where a nil part of length n (zeros) is streamed, not held.
type sparseEntry struct {
	name  string
	parts []sparsePart
}

type sparsePart struct {
	data  []byte // nil: zeros
	zeros int64
}

func (e sparseEntry) size() int64 {
	var n int64
	for _, p := range e.parts {
		n += int64(len(p.data)) + p.zeros
	}
	return n
}

// streamArchive returns a reader of a tar archive holding "./" and entries, written by a
// goroutine as it is read: the zeros are never in memory.
func streamArchive(t *testing.T, entries ...sparseEntry) io.Reader {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() })
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755})
		for _, e := range entries {
			if err != nil {
				break
			}
			if err = tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: e.size()}); err != nil {
				break
			}
			for _, p := range e.parts {
				if p.data != nil {
					_, err = tw.Write(p.data)
				} else {
					_, err = io.CopyN(tw, zeroReader{}, p.zeros)
				}
				if err != nil {
					break
				}
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(255)) + 1 // never zero: these blocks must be written
	}
	return b
}

// allocated is the disk space abs takes, in bytes.
func allocated(t *testing.T, abs string) (apparent, disk int64) {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(abs, &st))
	return st.Size, st.Blocks * 512
}

// A file of zeros is extracted as holes: its apparent size is kept, and it takes (almost) no
// disk, so restoring a backup of a sparse file needs no more room than the file had.
func TestExtractZerosBecomeHoles(t *testing.T) {
	const size = 1 << 30
	dst := filepath.Join(t.TempDir(), "dst")
	st, err := Extract(context.Background(), streamArchive(t, sparseEntry{name: "zeros", parts: []sparsePart{{zeros: size}}}), dst)
	must(t, err)
	if st.Files != 1 || st.Bytes != size {
		t.Errorf("stats = %+v; want 1 file of %d bytes", st, size)
	}
	apparent, disk := allocated(t, filepath.Join(dst, "zeros"))
	if apparent != size {
		t.Errorf("apparent size = %d; want %d", apparent, size)
	}
	if disk >= 1<<20 {
		t.Errorf("allocated = %d bytes; want under 1 MiB (the zeros must be holes)", disk)
	}
}

// Files mixing data and zeros, at aligned and unaligned offsets, come back byte-exact, and runs
// of zeros of a block or more are holes.
func TestExtractSparseRoundTrip(t *testing.T) {
	a, b, c := randomBytes(1, 100_001), randomBytes(2, 70_003), randomBytes(3, holeBlock)
	withZeros := func(data []byte, at int) []byte { // data with a few zeros inside a block
		d := bytes.Clone(data)
		clear(d[at : at+100])
		return d
	}
	tests := []sparseEntry{
		{name: "data-zeros-data", parts: []sparsePart{{data: a}, {zeros: 8 << 20}, {data: b}}},
		{name: "zeros-data", parts: []sparsePart{{zeros: 3*holeBlock + 17}, {data: b}}},
		{name: "data-zeros", parts: []sparsePart{{data: a}, {zeros: 5<<20 + 3}}},
		{name: "aligned", parts: []sparsePart{{data: c}, {zeros: 4 * holeBlock}, {data: c}, {zeros: holeBlock}}},
		{name: "short-zero-runs", parts: []sparsePart{{data: withZeros(a, 5000)}, {zeros: 10}, {data: withZeros(b, 0)}}},
		{name: "small-zeros", parts: []sparsePart{{zeros: 100}}},
		{name: "empty"},
	}
	dst := filepath.Join(t.TempDir(), "dst")
	st, err := Extract(context.Background(), streamArchive(t, tests...), dst)
	must(t, err)
	if st.Files != int64(len(tests)) {
		t.Errorf("extracted %d files; want %d", st.Files, len(tests))
	}
	for _, e := range tests {
		t.Run(e.name, func(t *testing.T) {
			abs := filepath.Join(dst, e.name)
			got, err := os.ReadFile(abs)
			must(t, err)
			var want []byte
			for _, p := range e.parts {
				if p.data != nil {
					want = append(want, p.data...)
				} else {
					want = append(want, make([]byte, p.zeros)...)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("content differs: %d bytes, want %d", len(got), len(want))
			}
			var data int64
			for _, p := range e.parts {
				data += int64(len(p.data))
			}
			// Every part of zeros spans at most one partial block on each side; whole blocks of
			// zeros are holes. Two blocks of slack per part for the file system's own layout.
			apparent, disk := allocated(t, abs)
			if limit := data + int64(2*len(e.parts)+2)*holeBlock; e.size() > 1<<20 && disk > limit {
				t.Errorf("allocated %d bytes of %d; want at most %d (zeros written)", disk, apparent, limit)
			}
		})
	}
}

// The reported failure: a backup holding a sparse file far larger than the disk restores onto
// that disk, because the extracted file is as sparse as it was.
func TestExtractSparseLargerThanDisk(t *testing.T) {
	requireRoot(t)
	mnt := filepath.Join(t.TempDir(), "tiny")
	mount(t, "tmpfs", "tmpfs", mnt, "size=2m")
	dst := filepath.Join(mnt, "proj")
	data := randomBytes(4, 100_000)
	_, err := Extract(context.Background(), streamArchive(t,
		sparseEntry{name: "disk.img", parts: []sparsePart{{data: data}, {zeros: 3 << 30}, {data: data}}}), dst)
	must(t, err)
	abs := filepath.Join(dst, "disk.img")
	if apparent, _ := allocated(t, abs); apparent != 3<<30+200_000 {
		t.Errorf("apparent size = %d; want %d", apparent, 3<<30+200_000)
	}
	f, err := os.Open(abs)
	must(t, err)
	defer f.Close()
	tail := make([]byte, len(data))
	_, err = f.ReadAt(tail, 3<<30+100_000)
	must(t, err)
	if !bytes.Equal(tail, data) {
		t.Error("the data after the hole differs")
	}
}

// A sparse file in a backup costs its data, not its apparent size: Write stores only the data
// extents (a 1 GiB file holding 1 MiB of data makes an archive of about 1 MiB), and Extract
// gives back the same size, the same data at the same offsets, and holes.
func TestWriteSparseFile(t *testing.T) {
	src := t.TempDir()
	p := filepath.Join(src, "big.img")
	f, err := os.Create(p)
	must(t, err)
	runs := map[int64][]byte{0: randomBytes(5, 4096), 300 << 20: randomBytes(6, 1<<20), 1<<30 - 10: randomBytes(7, 10)}
	for off, b := range runs {
		_, err := f.WriteAt(b, off)
		must(t, err)
	}
	must(t, f.Close())
	if _, disk := allocated(t, p); disk > 8<<20 {
		t.Skipf("the temp dir's file system does not keep holes (%d bytes allocated)", disk)
	}
	var w bytes.Buffer
	_, err = Write(context.Background(), &w, src, Options{})
	must(t, err)
	if w.Len() > 4<<20 {
		t.Fatalf("archive of a 1 GiB file holding 1 MiB of data is %d bytes: holes were written", w.Len())
	}
	dst := filepath.Join(t.TempDir(), "dst")
	_, err = Extract(context.Background(), &w, dst)
	must(t, err)
	q := filepath.Join(dst, "big.img")
	apparent, disk := allocated(t, q)
	if apparent != 1<<30 || disk > 8<<20 {
		t.Errorf("extracted: %d bytes, %d allocated; want %d, holes kept", apparent, disk, 1<<30)
	}
	g, err := os.Open(q)
	must(t, err)
	defer g.Close()
	for off, want := range runs {
		got := make([]byte, len(want))
		_, _ = g.ReadAt(got, off)
		if !bytes.Equal(got, want) {
			t.Errorf("data at %d differs", off)
		}
	}
}
