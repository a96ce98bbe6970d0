package egresstest

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// ReflectIP is the address of the reflecting server StartReflector adds to the fake internet.
const ReflectIP = "198.51.100.31"

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
//
// The response also carries the header X-Reflected: P + value[A:B] + S.
func (n *Internet) StartReflector(t testing.TB, name string) {
	t.Helper()
	if err := ipCmd("-n", InternetNS, "addr", "add", ReflectIP+"/32", "dev", "lo"); err != nil {
		t.Fatalf("egresstest: %v", err)
	}
	var ln net.Listener
	if err := n.inNS(func() error {
		var err error
		ln, err = net.Listen("tcp4", ReflectIP+":443")
		return err
	}); err != nil {
		ipCmd("-n", InternetNS, "addr", "del", ReflectIP+"/32", "dev", "lo")
		t.Fatalf("egresstest: reflector listener: %v", err)
	}
	n.SetRecord(name, ReflectIP)
	cfg := n.tlsConfig()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	srv := &http.Server{Handler: http.HandlerFunc(serveReflect), TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		ipCmd("-n", InternetNS, "addr", "del", ReflectIP+"/32", "dev", "lo")
	})
}

func serveReflect(w http.ResponseWriter, r *http.Request) {
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
	case "br", "zstd":
		label = q.Get("enc")
	}
	if label != "" {
		w.Header().Set("Content-Encoding", label)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}
