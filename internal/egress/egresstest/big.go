package egresstest

import (
	"net/http"
	"strconv"
)

// BigDefault is the body size of /big without a size parameter (1 GiB).
const BigDefault = 1 << 30

// bigChunk is what /big repeats; its content is incompressible enough for a benchmark.
var bigChunk = func() []byte {
	b := make([]byte, 256<<10)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}()

// serveBig is api's /big?size=N: N bytes (default BigDefault, at most 64 GiB) of
// pseudo-random data with a Content-Length, for throughput benchmarks (EGRESS.md §8.3).
func serveBig(w http.ResponseWriter, r *http.Request) {
	size := int64(BigDefault)
	if s := r.URL.Query().Get("size"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 || v > 64<<30 {
			http.Error(w, "size must be 0..68719476736 bytes", http.StatusBadRequest)
			return
		}
		size = v
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	for size > 0 {
		k := min(size, int64(len(bigChunk)))
		if _, err := w.Write(bigChunk[:k]); err != nil {
			return
		}
		size -= k
	}
}
