package egresstest

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ReflectIP and ReflectH1IP are the addresses of the reflecting servers StartReflector and
// StartReflectorH1 add to the fake internet.
const (
	ReflectIP   = "198.51.100.31"
	ReflectH1IP = "198.51.100.32"
)

// StartReflector adds ReflectIP to hxnet, points name (e.g. "reflect.example.test") at it in
// the DNS authority and serves, on ReflectIP:443 (TLS with the test leaf, h1 and h2) until t
// ends, an upstream that reflects a request header the way a careless or hostile API would
// (to test response redaction):
//
//	GET /reflect?h=NAME&from=A&to=B&pre=P&post=S&enc=E
//
// answers 200 with the body P + value[A:B] + S, where value is the request's header NAME
// (from and to default to the whole value and are clamped to it), encoded by E and labelled
// with Content-Encoding:
//
//	""            none
//	gzip, deflate one gzip or zlib layer (labelled "gzip", "deflate")
//	rawdeflate    a raw deflate stream labelled "deflate"
//	gzip-gzip     two gzip layers labelled "gzip, gzip"
//	gzip-in-gzip  two gzip layers labelled only "gzip"
//	br, zstd      the plain body labelled "br" or "zstd" (what matters is the label)
//	base64        standard base64 of the body, not labelled (a token inside base64 data)
//	upper, hex    the body upper-cased, or as lower-case hex, not labelled
//
// The response also carries the header X-Reflected: P + value[A:B] + S. More of the
// response reflects it on request, each place a header block the proxy must redact:
//
//	info=N           an informational response N (e.g. 103) comes first, with X-Reflected and
//	                 Link: </style.css?v=P+value[A:B]+S>; rel=preload
//	name=1           a field named "X-" + value[A:B] (as sent: not canonicalised) in the final
//	                 header and in the informational one; value[A:B] must be a token
//	trailer=declared the trailer X-Reflected-Trailer (and with name=1 one named
//	                 "X-T-" + value[A:B]) announced in a Trailer header field
//	trailer=undeclared the same trailers, not announced
//
// With a trailer the body is sent without Content-Length (chunked on HTTP/1.1).
//
// Two more ways a careless upstream hands a credential back:
//
//	upgrade=1        (HTTP/1.1) answers 101 Switching Protocols with the request's Upgrade and
//	                 then sends the body on the upgraded stream, in two writes split in its
//	                 middle, and closes; with ext=1 the 101 accepts permessage-deflate
//	store=1          remembers the body; GET /dump (on any name served by the same reflector)
//	                 answers 200 with the last body remembered
func (n *Internet) StartReflector(t testing.TB, name string) {
	t.Helper()
	n.startReflector(t, name, ReflectIP, []string{"h2", "http/1.1"})
}

// StartReflectorH1 is StartReflector on ReflectH1IP, speaking HTTP/1.1 only (so the proxy's
// upstream leg is HTTP/1.1 whatever the sandbox speaks: chunked trailers, 1xx lines).
func (n *Internet) StartReflectorH1(t testing.TB, name string) {
	t.Helper()
	n.startReflector(t, name, ReflectH1IP, []string{"http/1.1"})
}

func (n *Internet) startReflector(t testing.TB, name, ip string, protos []string) {
	t.Helper()
	if err := ipCmd("-n", InternetNS, "addr", "add", ip+"/32", "dev", "lo"); err != nil {
		t.Fatalf("egresstest: %v", err)
	}
	var ln net.Listener
	if err := n.inNS(func() error {
		var err error
		ln, err = net.Listen("tcp4", ip+":443")
		return err
	}); err != nil {
		ipCmd("-n", InternetNS, "addr", "del", ip+"/32", "dev", "lo")
		t.Fatalf("egresstest: reflector listener: %v", err)
	}
	n.SetRecord(name, ip)
	cfg := n.tlsConfig()
	cfg.NextProtos = protos
	rf := &reflector{}
	srv := &http.Server{Handler: rf, TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second}
	if !slices.Contains(protos, "h2") {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		ipCmd("-n", InternetNS, "addr", "del", ip+"/32", "dev", "lo")
	})
}

// reflector serves the reflecting upstream and holds what store=1 remembers.
type reflector struct {
	mu     sync.Mutex
	stored []byte
}

func (rf *reflector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/dump" {
		rf.mu.Lock()
		b := rf.stored
		rf.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.Write(b)
		return
	}
	if r.URL.Path != "/reflect" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	v := r.Header.Get(q.Get("h"))
	from, to := 0, len(v)
	if s := q.Get("from"); s != "" {
		from, _ = strconv.Atoi(s)
	}
	if s := q.Get("to"); s != "" {
		to, _ = strconv.Atoi(s)
	}
	to = max(0, min(to, len(v)))
	from = max(0, min(from, to))
	body := []byte(q.Get("pre") + v[from:to] + q.Get("post"))
	if q.Get("store") == "1" {
		rf.mu.Lock()
		rf.stored = body
		rf.mu.Unlock()
	}
	if q.Get("upgrade") == "1" {
		serveUpgraded(w, r, body)
		return
	}
	named := q.Get("name") == "1"
	if code, _ := strconv.Atoi(q.Get("info")); code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.Header().Set("X-Reflected", string(body))
		w.Header().Set("Link", "</style.css?v="+string(body)+">; rel=preload")
		if named {
			w.Header()["X-"+v[from:to]] = []string{"1"}
		}
		w.WriteHeader(code)
		// A 1xx does not clear the header map: what follows is the final response's.
		clear(w.Header())
	}
	if named {
		w.Header()["X-"+v[from:to]] = []string{"1"}
	}
	trailers := []string{"X-Reflected-Trailer"}
	if named {
		trailers = append(trailers, "X-T-"+v[from:to])
	}
	trailer := q.Get("trailer")
	if trailer == "declared" {
		w.Header().Set("Trailer", strings.Join(trailers, ", "))
	}
	w.Header().Set("X-Reflected", string(body))
	w.Header().Set("Content-Type", "text/plain")
	label := ""
	switch q.Get("enc") {
	case "gzip":
		body, label = gzipped(body), "gzip"
	case "deflate":
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body, label = b.Bytes(), "deflate"
	case "rawdeflate":
		var b bytes.Buffer
		fw, _ := flate.NewWriter(&b, flate.DefaultCompression)
		fw.Write(body)
		fw.Close()
		body, label = b.Bytes(), "deflate"
	case "gzip-gzip":
		body, label = gzipped(gzipped(body)), "gzip, gzip"
	case "gzip-in-gzip":
		body, label = gzipped(gzipped(body)), "gzip"
	case "base64":
		body = []byte(base64.StdEncoding.EncodeToString(body))
	case "upper":
		body = bytes.ToUpper(body)
	case "hex":
		body = []byte(hex.EncodeToString(body))
	case "br", "zstd":
		label = q.Get("enc")
	}
	if label != "" {
		w.Header().Set("Content-Encoding", label)
	}
	if trailer == "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.Write(body)
	if trailer == "undeclared" {
		// Else a short body is sent with a Content-Length the server works out itself, and
		// trailers are not sent at all.
		http.NewResponseController(w).Flush()
	}
	for _, k := range trailers {
		val := string(body)
		if k != "X-Reflected-Trailer" {
			val = "1"
		}
		switch trailer {
		case "declared":
			w.Header().Set(k, val) // servers look declared trailers up canonicalised
		case "undeclared":
			w.Header()[http.TrailerPrefix+k] = []string{val}
		}
	}
}

// serveUpgraded answers 101 and sends body on the upgraded stream in two writes.
func serveUpgraded(w http.ResponseWriter, r *http.Request, body []byte) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "upgrade needs HTTP/1.1: "+err.Error(), http.StatusHTTPVersionNotSupported)
		return
	}
	defer c.Close()
	ext := ""
	if r.URL.Query().Get("ext") == "1" {
		ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n"
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + r.Header.Get("Upgrade") + "\r\n" + ext + "\r\n")
	brw.Write(body[:len(body)/2])
	brw.Flush()
	time.Sleep(50 * time.Millisecond) // the halves arrive in separate reads
	brw.Write(body[len(body)/2:])
	brw.Flush()
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}
