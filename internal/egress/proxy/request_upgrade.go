package proxy

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/inject"
)

// redactUpgrade makes the stream after a 101 Switching Protocols response pass red on its
// way to the sandbox: the ReverseProxy copies resp.Body (which must stay an
// io.ReadWriteCloser) both ways once it has hijacked the sandbox's connection, reading from
// it what goes to the sandbox. Bytes the sandbox writes go upstream unchanged. What is
// redacted is the byte stream as it arrives (EGRESS.md §5.2): a secret inside one WebSocket
// frame (server frames are not masked) is caught, so is a run long enough to redact on
// either side of a frame boundary; a secret cut into shorter pieces by framing, or encoded
// by the upstream, is not. An upstream that accepts a WebSocket extension (compression:
// none was offered, the proxy drops Sec-WebSocket-Extensions) is refused with
// EGRESS_RESPONSE_UNREDACTABLE before the upgrade completes. Replacements are added to
// count as they are made. Bytes held back are released after upgradeIdle without more data
// (Redactor.IdleReader): a secret cut by such a pause into pieces shorter than a run to
// redact gets through.
func redactUpgrade(resp *http.Response, red *inject.Redactor, count *atomic.Int64) error {
	if resp.Header.Get("Sec-WebSocket-Extensions") != "" {
		resp.Body.Close()
		return errdefs.New(errdefs.CodeEgressUnredactable, "upgraded response uses a WebSocket extension and cannot be redacted")
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		// The ReverseProxy refuses such a response anyway; keep it that way.
		return nil
	}
	resp.Body = &redactedUpgrade{rr: red.IdleReader(rwc, upgradeIdle), w: rwc, count: count}
	return nil
}

// upgradeIdle is how long the stream after a 101 may hold back bytes that could still grow
// into a run to redact: the peer of an interactive protocol waits for a whole message before
// it sends more, so a message ending in bytes a form holds would never arrive otherwise.
const upgradeIdle = 100 * time.Millisecond

// redactedUpgrade is an upgraded upstream connection whose reads are redacted.
type redactedUpgrade struct {
	rr    *inject.RedactReader
	w     io.Writer
	count *atomic.Int64
	seen  int // rr.Count() already added to count (only the reading goroutine touches it)
}

func (u *redactedUpgrade) Read(p []byte) (int, error) {
	n, err := u.rr.Read(p)
	if c := u.rr.Count(); c != u.seen {
		u.count.Add(int64(c - u.seen))
		u.seen = c
	}
	return n, err
}

func (u *redactedUpgrade) Write(p []byte) (int, error) { return u.w.Write(p) }

func (u *redactedUpgrade) Close() error { return u.rr.Close() }
