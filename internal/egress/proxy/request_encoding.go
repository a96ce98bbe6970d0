package proxy

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// gzipMagic starts every gzip member (ID1 ID2 CM=deflate).
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// decodeForRedaction makes resp's body plain bytes the redactor can scan (EGRESS.md §5.2
// "Response redaction"). Go's transport undoes only the gzip it asked for itself; whatever
// content coding remains is handled here: none or "identity" passes; one "gzip", "x-gzip" or
// "deflate" (zlib, or raw deflate as some servers send) is decoded, and Content-Encoding and
// Content-Length are dropped; anything else (br, zstd, compress, an unknown coding, or a list
// of codings: nested encodings) fails with EGRESS_RESPONSE_UNREDACTABLE before any byte is
// sent. A body decoded once (by the transport or here) that starts with another gzip member
// is a nested encoding too: reading it fails, so the response is cut off (fail closed).
// Responses without a body (HEAD, 204, 304) are left alone.
func decodeForRedaction(resp *http.Response, method string) error {
	if method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	decoded := resp.Uncompressed
	switch {
	case len(codings) == 0:
		resp.Header.Del("Content-Encoding")
	case len(codings) > 1:
		return unredactable(strings.Join(codings, ", "))
	case codings[0] == "gzip" || codings[0] == "x-gzip":
		resp.Body = &lazyDecoder{src: resp.Body, open: func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }}
		decoded = true
	case codings[0] == "deflate":
		resp.Body = &lazyDecoder{src: resp.Body, open: openDeflate}
		decoded = true
	default:
		return unredactable(codings[0])
	}
	if decoded {
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = &nestedGuard{ReadCloser: resp.Body}
	}
	return nil
}

func unredactable(coding string) error {
	return errdefs.Newf(errdefs.CodeEgressUnredactable, "response encoding %s cannot be redacted", clip(coding, 64))
}

// clip shortens s to at most n bytes (an upstream's header echoed in an error).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// openDeflate reads HTTP "deflate": a zlib stream, or a raw deflate stream from servers that
// send that instead (RFC 9110 §8.4.1.2).
func openDeflate(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	h, err := br.Peek(2)
	if err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// lazyDecoder opens its decoder at the first Read, so the response headers are not held up
// waiting for the upstream's first body bytes.
type lazyDecoder struct {
	src  io.ReadCloser
	open func(io.Reader) (io.Reader, error)
	dec  io.Reader
	err  error
}

func (l *lazyDecoder) Read(p []byte) (int, error) {
	if l.dec == nil && l.err == nil {
		l.dec, l.err = l.open(l.src)
		if l.err != nil {
			l.err = errdefs.Wrap(errdefs.CodeEgressUnredactable, l.err, "response body does not match its content encoding")
		}
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.dec.Read(p)
}

func (l *lazyDecoder) Close() error { return l.src.Close() }

// nestedGuard refuses a decoded body that starts with a gzip member (gzip inside gzip).
type nestedGuard struct {
	io.ReadCloser
	head    []byte // first bytes, held until they are known not to be a gzip header
	checked bool
	err     error
}

func (g *nestedGuard) Read(p []byte) (int, error) {
	if g.checked {
		if len(g.head) > 0 {
			n := copy(p, g.head)
			g.head = g.head[n:]
			return n, nil
		}
		if g.err != nil {
			return 0, g.err
		}
		return g.ReadCloser.Read(p)
	}
	for len(g.head) < len(gzipMagic) && g.err == nil {
		buf := make([]byte, len(gzipMagic)-len(g.head))
		n, err := g.ReadCloser.Read(buf)
		g.head = append(g.head, buf[:n]...)
		g.err = err
	}
	g.checked = true
	if bytes.HasPrefix(g.head, gzipMagic) {
		g.head = nil
		g.err = errdefs.New(errdefs.CodeEgressUnredactable, "response encoding gzip inside gzip cannot be redacted")
	}
	return g.Read(p)
}
