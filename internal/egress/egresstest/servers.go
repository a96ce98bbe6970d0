package egresstest

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

const (
	maxRecorded = 64 << 10
	maxRequests = 10000
)

// apiHandler is the api echo server (EGRESS.md §8.1):
//
//	/headers                 JSON {method, host, path, proto, tls, headers} of the request
//	/sse?n=N&id=ID           N events "data: i"; event i+1 is sent only after POST /sse/ack?id=ID&n=i
//	                         (a buffering proxy deadlocks the test instead of passing it)
//	/ws                      WebSocket echo
//	/upload                  counts body bytes, answers {"bytes":N}
//	/redirect?to=URL         302 to URL
//	/stream?chunks=N&ms=T    one 1 KiB chunk every T ms (default 100), N chunks (0 = until the client goes)
//	/big?size=N              N bytes (default 1 GiB) of data, for benchmarks
//	/                        "api:<host><path>"
func (n *Internet) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "host": r.Host, "path": r.URL.Path, "query": r.URL.RawQuery,
			"proto": r.Proto, "tls": r.TLS != nil, "headers": r.Header,
		})
	})
	mux.HandleFunc("/sse", n.serveSSE)
	mux.HandleFunc("/sse/ack", func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("n"))
		n.mu.Lock()
		ch := n.acks[r.URL.Query().Get("id")]
		n.mu.Unlock()
		if ch == nil {
			http.Error(w, "unknown stream", http.StatusNotFound)
			return
		}
		select {
		case ch <- i:
		case <-time.After(5 * time.Second):
			http.Error(w, "stream not waiting", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		c, _ := io.Copy(io.Discard, r.Body)
		n.mu.Lock()
		n.uploaded += c
		n.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"bytes\":%d}\n", c)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/stream", n.serveStream)
	mux.HandleFunc("/big", serveBig)
	mux.HandleFunc("/simple/", serveSimpleIndex) // pypi.go
	mux.HandleFunc("/files/", serveWheel)        // pypi.go
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "api:%s%s", r.Host, r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		if len(n.requests) < maxRequests {
			n.requests = append(n.requests, APIRequest{Method: r.Method, Host: r.Host, Path: r.URL.Path, Proto: r.Proto, TLS: r.TLS != nil, Header: r.Header.Clone()})
		}
		n.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

func (n *Internet) trackStream(d int) {
	n.mu.Lock()
	n.streams += d
	n.mu.Unlock()
}

func (n *Internet) serveSSE(w http.ResponseWriter, r *http.Request) {
	count, _ := strconv.Atoi(r.URL.Query().Get("n"))
	id := r.URL.Query().Get("id")
	if count <= 0 || count > 1000 || id == "" {
		http.Error(w, "need n (1–1000) and id", http.StatusBadRequest)
		return
	}
	ch := make(chan int)
	n.mu.Lock()
	n.acks[id] = ch
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.acks, id)
		n.mu.Unlock()
	}()
	n.trackStream(1)
	defer n.trackStream(-1)
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := 1; i <= count; i++ {
		fmt.Fprintf(w, "data: %d\n\n", i)
		fl.Flush()
		if i == count {
			return
		}
		select {
		case got := <-ch:
			if got != i {
				fmt.Fprintf(w, "event: error\ndata: ack %d for event %d\n\n", got, i)
				return
			}
		case <-r.Context().Done():
			return
		case <-time.After(30 * time.Second):
			fmt.Fprintf(w, "event: error\ndata: no ack for event %d\n\n", i)
			return
		}
	}
}

func (n *Internet) serveStream(w http.ResponseWriter, r *http.Request) {
	chunks, _ := strconv.Atoi(r.URL.Query().Get("chunks"))
	ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
	if ms <= 0 {
		ms = 100
	}
	n.trackStream(1)
	defer n.trackStream(-1)
	w.Header().Set("Content-Type", "application/octet-stream")
	fl := w.(http.Flusher)
	chunk := bytes.Repeat([]byte("x"), 1023)
	chunk = append(chunk, '\n')
	t := time.NewTicker(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	for i := 0; chunks == 0 || i < chunks; i++ {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
}

// gitHandler serves the repositories under dir/git through git http-backend, requiring Basic
// auth with GitUser/GitToken (401 otherwise). Pushes are accepted.
func (n *Internet) gitHandler(dir string) http.Handler {
	backend := "/usr/lib/git-core/git-http-backend"
	if out, err := exec.Command("git", "--exec-path").Output(); err == nil {
		backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	}
	cg := &cgi.Handler{
		Path: backend,
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Join(dir, "git"), "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + dir},
		InheritEnv: []string{"PATH"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != n.GitUser || subtle.ConstantTimeCompare([]byte(pass), []byte(n.GitToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="hxnet git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Del("Authorization")
		h := *cg
		h.Env = append(slices.Clone(cg.Env), "REMOTE_USER="+user)
		h.ServeHTTP(w, r2)
	})
}

// makeRepo creates dir/git/repo.git with one commit.
func (n *Internet) makeRepo(dir string) error {
	bare := filepath.Join(dir, "git", "repo.git")
	work := filepath.Join(dir, "work")
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-c", "user.name=hxnet", "-c", "user.email=hxnet@example.test", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := git("init", "-q", "--bare", bare); err != nil {
		return err
	}
	if err := git("-C", bare, "config", "http.receivepack", "true"); err != nil {
		return err
	}
	if err := git("init", "-q", work); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello from hxnet\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"-C", work, "add", "README"}, {"-C", work, "commit", "-qm", "init"}, {"-C", work, "push", "-q", bare, "HEAD:refs/heads/main"}} {
		if err := git(args...); err != nil {
			return err
		}
	}
	return git("-C", bare, "symbolic-ref", "HEAD", "refs/heads/main")
}

// serveTCP runs api's server-first TCP service: banner, then a line echo.
func (n *Internet) serveTCP(ln net.Listener) {
	n.acceptLoop(ln, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		io.WriteString(c, "hxnet-tcp\n")
		io.Copy(c, c)
	})
}

func (n *Internet) acceptLoop(ln net.Listener, handle func(net.Conn)) {
	n.servers = append(n.servers, func() { ln.Close() })
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				handle(c)
			}()
		}
	}()
}

// serveSink records everything sent to the sink's TCP and UDP ports. TCP clients that speak
// TLS get a handshake with the test certificate; HTTP requests are answered 200 "sink".
func (n *Internet) serveSink(ln net.Listener, pc net.PacketConn) {
	n.acceptLoop(ln, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		hit := &SinkHit{Proto: "tcp", From: c.RemoteAddr().(*net.TCPAddr).AddrPort()}
		if p, err := origPort(c.(*net.TCPConn)); err == nil {
			hit.Port = p
		}
		n.mu.Lock()
		n.sink = append(n.sink, hit)
		n.mu.Unlock()
		br := bufio.NewReader(c)
		var conn net.Conn = &bufConn{Conn: c, r: br}
		if b, err := br.Peek(1); err == nil && b[0] == 0x16 {
			tc := tls.Server(conn, n.tlsConfig())
			if err := tc.Handshake(); err != nil {
				return
			}
			n.mu.Lock()
			hit.SNI = tc.ConnectionState().ServerName
			n.mu.Unlock()
			conn = tc
		}
		rec := &recorder{n: n, hit: hit}
		rd := bufio.NewReader(io.TeeReader(conn, rec))
		for {
			req, err := http.ReadRequest(rd)
			if err != nil {
				io.Copy(io.Discard, rd) // not HTTP (or done): keep recording until EOF/deadline
				return
			}
			io.Copy(io.Discard, io.LimitReader(req.Body, maxRecorded))
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nsink")
		}
	})
	n.servers = append(n.servers, func() { pc.Close() })
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		buf := make([]byte, 65536)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			ua := from.(*net.UDPAddr).AddrPort()
			n.mu.Lock()
			n.sink = append(n.sink, &SinkHit{Proto: "udp", From: netip.AddrPortFrom(ua.Addr().Unmap(), ua.Port()), Data: bytes.Clone(buf[:k])})
			n.mu.Unlock()
		}
	}()
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

type recorder struct {
	n   *Internet
	hit *SinkHit
}

func (r *recorder) Write(p []byte) (int, error) {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	if room := maxRecorded - len(r.hit.Data); room > 0 {
		r.hit.Data = append(r.hit.Data, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// origPort reads the pre-DNAT destination port (SO_ORIGINAL_DST).
func origPort(tc *net.TCPConn) (int, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var mreq *unix.IPv6Mreq
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return int(binary.BigEndian.Uint16(mreq.Multiaddr[2:4])), nil
}
