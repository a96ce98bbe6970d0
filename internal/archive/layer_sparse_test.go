package archive

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// sparseSample makes a 1 GiB file with three runs of data (at the start, in the middle, and
// the last bytes) and holes between them, and returns the runs by offset.
func sparseSample(t *testing.T, p string) map[int64][]byte {
	t.Helper()
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	runs := map[int64][]byte{0: make([]byte, 4096), 300 << 20: make([]byte, 1<<20), 1<<30 - 10: make([]byte, 10)}
	for off, b := range runs {
		_, _ = rand.Read(b)
		_, err := f.WriteAt(b, off)
		must(t, err)
	}
	return runs
}

func allocatedBytes(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	return st.Blocks * 512
}

// A sparse file travels as its data alone: the layer stream is about its data's size, not its
// apparent size, and extracts to a file of the same size, the same data at the same offsets,
// and holes (little allocated) everywhere else.
func TestLayerSparseFile(t *testing.T) {
	src := t.TempDir()
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	p := filepath.Join(src, "d", "big.img")
	runs := sparseSample(t, p)
	if a := allocatedBytes(t, p); a > 8<<20 {
		t.Skipf("the temp dir's file system does not keep holes (%d bytes allocated)", a)
	}
	var buf bytes.Buffer
	stats, err := WriteLayer(context.Background(), &buf, src, LayerOptions{})
	must(t, err)
	if stats.Entries != 2 {
		t.Errorf("entries = %d, want 2", stats.Entries)
	}
	if buf.Len() > 4<<20 {
		t.Fatalf("layer of a 1 GiB file holding 1 MiB of data is %d bytes: holes were written", buf.Len())
	}
	dst := t.TempDir()
	must(t, ExtractLayer(bytes.NewReader(buf.Bytes()), dst))
	q := filepath.Join(dst, "d", "big.img")
	fi, err := os.Stat(q)
	must(t, err)
	if fi.Size() != 1<<30 {
		t.Fatalf("extracted size = %d, want %d", fi.Size(), 1<<30)
	}
	if a := allocatedBytes(t, q); a > 8<<20 {
		t.Errorf("extracted file has %d bytes allocated: holes were filled", a)
	}
	f, err := os.Open(q)
	must(t, err)
	defer f.Close()
	for off, want := range runs {
		got := make([]byte, len(want))
		if _, err := f.ReadAt(got, off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("data at %d differs after the round trip", off)
		}
	}
	hole := make([]byte, 1<<20)
	if _, err := f.ReadAt(hole, 600<<20); err != nil {
		t.Fatal(err)
	}
	if !isZero(hole) {
		t.Error("a hole reads back non-zero")
	}
	// Same tree, same bytes: the sparse entry is deterministic too.
	var again bytes.Buffer
	_, err = WriteLayer(context.Background(), &again, src, LayerOptions{})
	must(t, err)
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Error("two layers of the same tree differ")
	}
}

// A cancelled context stops WriteLayer part way, with the context's cause.
func TestWriteLayerCancelled(t *testing.T) {
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "data"))
	must(t, err)
	block := bytes.Repeat([]byte("x"), 1<<20)
	for range 64 {
		_, err := f.Write(block)
		must(t, err)
	}
	must(t, f.Close())
	cause := errors.New("capture aborted")
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &cancelAfter{n: 4 << 20, cancel: func() { cancel(cause) }}
	_, err = WriteLayer(ctx, w, src, LayerOptions{})
	if !errors.Is(err, cause) {
		t.Fatalf("WriteLayer after cancel = %v, want %v", err, cause)
	}
	if w.written > 16<<20 {
		t.Errorf("WriteLayer wrote %d bytes after the cancel at 4 MiB", w.written)
	}
}

// cancelAfter discards what is written and calls cancel once n bytes have been.
type cancelAfter struct {
	n, written int64
	cancel     func()
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	w.written += int64(len(p))
	if w.written >= w.n {
		w.cancel()
	}
	return len(p), nil
}
