package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// harness runs the conformance suite against one implementation.
type harness struct {
	// open returns an empty store, private to the calling test.
	open func(t *testing.T) Store
	// leftovers returns what uploads in progress or failed left in s: temp files, incomplete
	// multipart uploads, objects outside the key space. It must be empty after a failed Put.
	leftovers func(t *testing.T, s Store) []string
	// racyDirs is set for a test server whose delete removes the directory it emptied while a
	// concurrent put into that directory may fail: versitygw's posix backend ("Existing Object
	// is a directory", seen once in CI). Its concurrent puts then go to directories no delete
	// empties.
	racyDirs bool
}

// conformance is the contract every Store implements, run by TestLocalConformance and
// TestS3Conformance.
var conformance = []struct {
	name string
	run  func(t *testing.T, h harness)
}{
	{"RoundTrip", testRoundTrip},
	{"Overwrite", testOverwrite},
	{"List", testList},
	{"Delete", testDelete},
	{"Missing", testMissing},
	{"BadKeys", testBadKeys},
	{"SizeMismatch", testSizeMismatch},
	{"Large", testLarge},
	{"ReaderFails", testReaderFails},
	{"Cancelled", testCancelled},
	{"InvisibleUntilDone", testInvisibleUntilDone},
	{"ConcurrentPuts", testConcurrentPuts},
}

func runConformance(t *testing.T, h harness) {
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

// testCtx bounds a test so a hang fails instead of blocking the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, s Store, key string, data []byte) {
	t.Helper()
	n, err := s.Put(testCtx(t), key, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put(%q) wrote %d bytes, want %d", key, n, len(data))
	}
}

func get(t *testing.T, s Store, key string) ([]byte, Info) {
	t.Helper()
	rc, info, err := s.Get(testCtx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q) read: %v", key, err)
	}
	return b, info
}

func keys(infos []Info) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Key
	}
	return out
}

func assertNotFound(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrNotFound) || !errdefs.IsCode(err, errdefs.CodeBlobNotFound) {
		t.Fatalf("%s: got %v (code %s), want BLOB_NOT_FOUND", what, err, errdefs.CodeOf(err))
	}
}

// assertAbsent checks that key holds no blob and that nothing else was left behind.
func assertAbsent(t *testing.T, h harness, s Store, key string) {
	t.Helper()
	_, err := s.Stat(testCtx(t), key)
	assertNotFound(t, err, "Stat after failed Put")
	rc, _, err := s.Get(testCtx(t), key)
	if err == nil {
		rc.Close()
	}
	assertNotFound(t, err, "Get after failed Put")
	list, err := s.List(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.Key == key {
			t.Fatalf("List shows %q after a failed Put", key)
		}
	}
	if left := h.leftovers(t, s); len(left) > 0 {
		t.Fatalf("failed Put left %v", left)
	}
}

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}

// onlyReader hides everything but Read (no ReaderAt, no WriterTo, no Seek): a pipe-like
// stream.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }

func testRoundTrip(t *testing.T, h harness) {
	s := h.open(t)
	if s.Describe() == "" {
		t.Fatal("Describe is empty")
	}
	before := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		key   string
		data  []byte
		known bool
	}{
		{"known size", "backups/0b9c1f4e-7d2a-4c1e-9a55-3f0d2b8e6a71.tar.zst", randBytes(1, 100_000), true},
		{"unknown size", "layers/sha256-" + strings.Repeat("ab", 32) + ".tar.zst", randBytes(2, 70_000), false},
		{"empty known", "meta/empty.json", nil, true},
		{"empty unknown", "meta/empty2.json", nil, false},
		{"top level", "top.json", []byte(`{"a":1}`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := int64(len(tc.data))
			if !tc.known {
				size = -1
			}
			n, err := s.Put(testCtx(t), tc.key, onlyReader{bytes.NewReader(tc.data)}, size)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if n != int64(len(tc.data)) {
				t.Fatalf("Put wrote %d, want %d", n, len(tc.data))
			}
			got, info := get(t, s, tc.key)
			if !bytes.Equal(got, tc.data) {
				t.Fatalf("Get returned %d bytes, differing from the %d put", len(got), len(tc.data))
			}
			if info.Key != tc.key || info.Size != int64(len(tc.data)) {
				t.Fatalf("Get info = %+v", info)
			}
			st, err := s.Stat(testCtx(t), tc.key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			if st.Key != tc.key || st.Size != int64(len(tc.data)) || st.ModTime.Before(before) || st.ModTime.After(time.Now().Add(time.Hour)) {
				t.Fatalf("Stat = %+v", st)
			}
		})
	}
	// A 512-byte key is the longest valid one.
	long := "mm/" + strings.Repeat("k", 254) + "/" + strings.Repeat("l", 254)
	if len(long) != MaxKeyLen {
		t.Fatalf("long key is %d bytes", len(long))
	}
	put(t, s, long, []byte("x"))
	if got, _ := get(t, s, long); string(got) != "x" {
		t.Fatalf("long key read %q", got)
	}
}

func testOverwrite(t *testing.T, h harness) {
	s := h.open(t)
	put(t, s, "meta/x.json", []byte("first version"))
	put(t, s, "meta/x.json", []byte("second"))
	got, info := get(t, s, "meta/x.json")
	if string(got) != "second" || info.Size != 6 {
		t.Fatalf("after overwrite: %q %+v", got, info)
	}
}

func testList(t *testing.T, h harness) {
	s := h.open(t)
	all := []string{
		"backups/a.tar.zst", "backups/b.tar.zst",
		"layers/sha256-01.tar.zst", "layers/sha256-02.tar.zst", "layers/sub/x",
		"layersX", "meta/m.json", "a-c", "a/b",
	}
	for i, k := range all {
		put(t, s, k, bytes.Repeat([]byte{'z'}, i+1))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a-c", "a/b", "backups/a.tar.zst", "backups/b.tar.zst", "layers/sha256-01.tar.zst", "layers/sha256-02.tar.zst", "layers/sub/x", "layersX", "meta/m.json"}},
		{"backups/", []string{"backups/a.tar.zst", "backups/b.tar.zst"}},
		{"layers/sha256-", []string{"layers/sha256-01.tar.zst", "layers/sha256-02.tar.zst"}},
		{"layers/", []string{"layers/sha256-01.tar.zst", "layers/sha256-02.tar.zst", "layers/sub/x"}},
		{"lay", []string{"layers/sha256-01.tar.zst", "layers/sha256-02.tar.zst", "layers/sub/x", "layersX"}},
		{"layers", []string{"layers/sha256-01.tar.zst", "layers/sha256-02.tar.zst", "layers/sub/x", "layersX"}},
		{"meta/m.json", []string{"meta/m.json"}},
		{"a", []string{"a-c", "a/b"}},
		{"nothing/", nil},
		{"nothing/deeper/", nil},
		{"meta/m.json/", nil},
	} {
		t.Run("prefix="+tc.prefix, func(t *testing.T) {
			got, err := s.List(testCtx(t), tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(keys(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("List(%q) = %v, want %v", tc.prefix, keys(got), tc.want)
			}
		})
	}
	got, err := s.List(testCtx(t), "meta/")
	if err != nil || len(got) != 1 {
		t.Fatalf("List(meta/) = %v, %v", got, err)
	}
	if got[0].Size != 7 || got[0].ModTime.IsZero() {
		t.Fatalf("List info = %+v, want size 7 and a time", got[0])
	}
}

func testDelete(t *testing.T, h harness) {
	s := h.open(t)
	put(t, s, "backups/x/y.tar.zst", []byte("data"))
	put(t, s, "backups/keep.tar.zst", []byte("data"))
	if err := s.Delete(testCtx(t), "backups/x/y.tar.zst"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Stat(testCtx(t), "backups/x/y.tar.zst")
	assertNotFound(t, err, "Stat after Delete")
	for _, k := range []string{"backups/x/y.tar.zst", "never/was.json", "backups"} {
		if err := s.Delete(testCtx(t), k); err != nil {
			t.Fatalf("Delete(%q) of a missing key: %v, want nil", k, err)
		}
	}
	got, err := s.List(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys(got)) != "[backups/keep.tar.zst]" {
		t.Fatalf("List after Delete = %v", keys(got))
	}
	// The key can be written again.
	put(t, s, "backups/x/y.tar.zst", []byte("again"))
	if b, _ := get(t, s, "backups/x/y.tar.zst"); string(b) != "again" {
		t.Fatalf("re-put read %q", b)
	}
}

func testMissing(t *testing.T, h harness) {
	s := h.open(t)
	put(t, s, "layers/sub/present", []byte("p"))
	for _, k := range []string{"backups/none.tar.zst", "layers", "layers/sub", "layers/sub/present/deeper"} {
		_, err := s.Stat(testCtx(t), k)
		assertNotFound(t, err, "Stat("+k+")")
		rc, _, err := s.Get(testCtx(t), k)
		if err == nil {
			rc.Close()
		}
		assertNotFound(t, err, "Get("+k+")")
	}
}

func testBadKeys(t *testing.T, h harness) {
	s := h.open(t)
	bad := []string{
		"", "/abs", "a/../b", "..", "../x", ".", "a/./b", "a//b", "a/", "with space", "tab\tkey",
		"ü.json", "a\\b", ".hidden", "meta/.tmp-blob-123", "a:b", "a?b", "a*b", "a\x00b",
		strings.Repeat("a", MaxKeyLen+1), strings.Repeat("a", MaxSegmentLen+1),
	}
	ctx := testCtx(t)
	for _, k := range bad {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.CodeOf(err) != errdefs.CodeInvalidArgument {
				t.Errorf("%s(%q) = %v, want VALIDATION_FAILED", op, k, err)
			}
		}
		_, err := s.Put(ctx, k, strings.NewReader("x"), 1)
		check("Put", err)
		_, _, err = s.Get(ctx, k)
		check("Get", err)
		_, err = s.Stat(ctx, k)
		check("Stat", err)
		check("Delete", s.Delete(ctx, k))
	}
	for _, p := range []string{"/x", "../", "a//", "a/../", ".tmp", "x y"} {
		if _, err := s.List(ctx, p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("List(%q) = %v, want VALIDATION_FAILED", p, err)
		}
	}
	if _, err := s.Put(ctx, "ok.json", strings.NewReader("x"), -2); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Put size -2 = %v, want VALIDATION_FAILED", err)
	}
	if _, err := s.Put(ctx, "ok.json", nil, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Put nil reader = %v, want VALIDATION_FAILED", err)
	}
	if got, err := s.List(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("bad keys stored something: %v %v", keys(got), err)
	}
}

func testSizeMismatch(t *testing.T, h harness) {
	s := h.open(t)
	for _, tc := range []struct {
		name string
		data []byte
		size int64
	}{
		{"short small", randBytes(3, 1000), 2000},
		{"long small", randBytes(4, 2000), 1000},
		{"long empty", []byte("x"), 0},
		{"short multipart", randBytes(5, 6<<20), 12 << 20},
		{"long multipart", randBytes(6, 12<<20), 6 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "meta/" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := s.Put(testCtx(t), key, onlyReader{bytes.NewReader(tc.data)}, tc.size)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !errors.Is(err, errSourceSize) {
				t.Fatalf("Put of %d bytes declared %d = %v, want VALIDATION_FAILED", len(tc.data), tc.size, err)
			}
			assertAbsent(t, h, s, key)
		})
	}
}

func testLarge(t *testing.T, h harness) {
	s := h.open(t)
	const size = 64 << 20
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"unknown size", -1},
		{"known size", size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "layers/sha256-large-" + strings.ReplaceAll(tc.name, " ", "-") + ".tar.zst"
			src := sha256.New()
			r := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{9}), size), src)
			n, err := s.Put(testCtx(t), key, onlyReader{r}, tc.size)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if n != size {
				t.Fatalf("Put wrote %d, want %d", n, size)
			}
			rc, info, err := s.Get(testCtx(t), key)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			dst := sha256.New()
			m, err := io.Copy(dst, rc)
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			if m != size || info.Size != size {
				t.Fatalf("read %d bytes, info size %d, want %d", m, info.Size, size)
			}
			if !bytes.Equal(src.Sum(nil), dst.Sum(nil)) {
				t.Fatal("checksum of the blob read back differs from the one put")
			}
		})
	}
}

var errBoom = errors.New("source exploded")

// failingReader yields n bytes of random data, then errBoom.
type failingReader struct {
	r io.Reader
}

func newFailingReader(n int64) *failingReader {
	return &failingReader{r: io.MultiReader(io.LimitReader(rand.NewChaCha8([32]byte{7}), n), errReader{errBoom})}
}

func (f *failingReader) Read(b []byte) (int, error) { return f.r.Read(b) }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func testReaderFails(t *testing.T, h harness) {
	s := h.open(t)
	for _, tc := range []struct {
		name   string
		after  int64 // bytes before the failure
		size   int64
		exists bool // a blob is already under the key and must survive
	}{
		{"small known", 300 << 10, 1 << 20, false},
		{"small unknown", 300 << 10, -1, false},
		{"multipart unknown", 13 << 20, -1, false},
		{"multipart known", 13 << 20, 40 << 20, false},
		{"replacing unknown", 13 << 20, -1, true},
		{"replacing small", 1 << 10, 4 << 10, true},
		{"at once", 0, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "backups/fail-" + strings.ReplaceAll(tc.name, " ", "-") + ".tar.zst"
			if tc.exists {
				put(t, s, key, []byte("old blob"))
			}
			_, err := s.Put(testCtx(t), key, newFailingReader(tc.after), tc.size)
			if !errors.Is(err, errBoom) {
				t.Fatalf("Put = %v, want the reader's error", err)
			}
			if tc.exists {
				if b, _ := get(t, s, key); string(b) != "old blob" {
					t.Fatalf("failed Put changed the old blob to %d bytes", len(b))
				}
				if err := s.Delete(testCtx(t), key); err != nil {
					t.Fatal(err)
				}
			}
			assertAbsent(t, h, s, key)
		})
	}
}

// cancellingReader yields random data and cancels its context after n bytes.
type cancellingReader struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(b []byte) (int, error) {
	if len(b) > 32<<10 {
		b = b[:32<<10]
	}
	if c.n <= 0 {
		c.cancel()
	}
	k, err := c.r.Read(b)
	c.n -= int64(k)
	return k, err
}

func testCancelled(t *testing.T, h harness) {
	s := h.open(t)
	for _, tc := range []struct {
		name  string
		after int64
		size  int64
	}{
		{"before start", -1, -1},
		{"small known", 100 << 10, 1 << 20},
		{"multipart unknown", 12 << 20, -1},
		{"multipart known", 12 << 20, 40 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "backups/cancel-" + strings.ReplaceAll(tc.name, " ", "-") + ".tar.zst"
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			var r io.Reader = &cancellingReader{r: rand.NewChaCha8([32]byte{8}), n: tc.after, cancel: cancel}
			if tc.after < 0 {
				cancel()
				r = strings.NewReader("never read")
			}
			if tc.size >= 0 {
				r = io.LimitReader(r, tc.size)
			}
			_, err := s.Put(ctx, key, r, tc.size)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Put = %v, want context.Canceled", err)
			}
			assertAbsent(t, h, s, key)
		})
	}
}

// gateReader yields first, then blocks until gate is closed, then yields rest.
type gateReader struct {
	first, rest io.Reader
	reached     chan struct{}
	gate        chan struct{}
	once        sync.Once
}

func (g *gateReader) Read(b []byte) (int, error) {
	n, err := g.first.Read(b)
	if n > 0 || err != io.EOF {
		return n, err
	}
	g.once.Do(func() { close(g.reached) })
	<-g.gate
	return g.rest.Read(b)
}

func testInvisibleUntilDone(t *testing.T, h harness) {
	s := h.open(t)
	for _, tc := range []struct {
		name        string
		first, rest int
		size        int64
	}{
		{"small", 1 << 10, 1 << 10, -1},
		{"multipart", 11 << 20, 3 << 20, -1},
		{"multipart known", 11 << 20, 3 << 20, 14 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "layers/sha256-slow-" + strings.ReplaceAll(tc.name, " ", "-")
			data := randBytes(11, tc.first+tc.rest)
			g := &gateReader{
				first: bytes.NewReader(data[:tc.first]), rest: bytes.NewReader(data[tc.first:]),
				reached: make(chan struct{}), gate: make(chan struct{}),
			}
			errc := make(chan error, 1)
			go func() {
				_, err := s.Put(testCtx(t), key, g, tc.size)
				errc <- err
			}()
			select {
			case <-g.reached:
			case err := <-errc:
				t.Fatalf("Put ended before its reader did: %v", err)
			}
			// Give a multipart upload time to send the parts it has.
			time.Sleep(300 * time.Millisecond)
			_, err := s.Stat(testCtx(t), key)
			assertNotFound(t, err, "Stat during Put")
			list, err := s.List(testCtx(t), "")
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range list {
				if in.Key == key {
					t.Fatalf("List shows %q during its Put", key)
				}
			}
			close(g.gate)
			if err := <-errc; err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, _ := get(t, s, key)
			if !bytes.Equal(got, data) {
				t.Fatal("blob differs from what was put")
			}
		})
	}
}

func testConcurrentPuts(t *testing.T, h harness) {
	s := h.open(t)
	const n = 12
	blobs := make([][]byte, n)
	for i := range blobs {
		size := 200<<10 + i*1000
		if i%4 == 0 {
			size = 7<<20 + i // multipart on S3
		}
		blobs[i] = randBytes(uint64(100+i), size)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			size := int64(len(blobs[i]))
			if i%2 == 1 {
				size = -1
			}
			_, errs[i] = s.Put(testCtx(t), fmt.Sprintf("backups/c%02d/blob.tar.zst", i), onlyReader{bytes.NewReader(blobs[i])}, size)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	list, err := s.List(testCtx(t), "backups/")
	if err != nil || len(list) != n {
		t.Fatalf("List = %d entries, %v; want %d", len(list), err, n)
	}
	for i := range n {
		got, _ := get(t, s, fmt.Sprintf("backups/c%02d/blob.tar.zst", i))
		if !bytes.Equal(got, blobs[i]) {
			t.Fatalf("blob %d differs", i)
		}
	}
	// Concurrent deletes and puts in one directory do not trip each other.
	var wg2 sync.WaitGroup
	for i := range n {
		wg2.Go(func() {
			k := fmt.Sprintf("backups/c%02d/blob.tar.zst", i)
			if err := s.Delete(testCtx(t), k); err != nil {
				errs[i] = err
				return
			}
			dir := "c"
			if h.racyDirs {
				dir = "n"
			}
			_, errs[i] = s.Put(testCtx(t), fmt.Sprintf("backups/%s%02d/again", dir, (i+1)%n), strings.NewReader("x"), 1)
		})
	}
	wg2.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delete/put %d: %v", i, err)
		}
	}
}
