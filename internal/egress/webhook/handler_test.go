package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/egresshandler"
	"github.com/hutchdev/hutch/errdefs"
)

var key = []byte("hmac-key-for-tests-0123")

// verifying is an operator handler: it checks the signature and echoes what it saw.
func verifying(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := egresshandler.Verify(r, key, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Hutch-Internal", "must not reach the sandbox")
		json.NewEncoder(w).Encode(map[string]any{"url": f.URL.String(), "path": r.URL.Path, "body": string(body), "sandbox": f.Sandbox})
	})
}

func forward(t *testing.T, h *Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	w := httptest.NewRecorder()
	h.Forward(w, r, Origin{Sandbox: "sb1", Scheme: "https", Host: "api.example.test", Port: 443}, key, func(w http.ResponseWriter, err error) {
		w.WriteHeader(errdefs.HTTPStatus(err))
		io.WriteString(w, string(errdefs.CodeOf(err)))
	})
	return w
}

func TestForwardSignedOverUnixAndHTTP(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	us := &http.Server{Handler: verifying(t)}
	go us.Serve(ln)
	defer us.Close()
	hs := httptest.NewServer(verifying(t))
	defer hs.Close()
	for _, u := range []string{"unix:" + sock, hs.URL + "/base"} {
		h, err := New("ops", Config{URL: u, SigningSecret: "HMAC"})
		if err != nil {
			t.Fatal(err)
		}
		w := forward(t, h, "POST", "https://api.example.test/v1/chat?x=1", "hello")
		var got map[string]any
		json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != 200 || got["url"] != "https://api.example.test/v1/chat?x=1" || got["body"] != "hello" || got["sandbox"] != "sb1" {
			t.Fatalf("%s: %d %s", u, w.Code, w.Body)
		}
		if strings.HasPrefix(u, "http") && got["path"] != "/base/v1/chat" {
			t.Fatalf("base path not kept: %v", got["path"])
		}
		if w.Header().Get("Hutch-Internal") != "" {
			t.Fatal("handler's Hutch-* header reached the sandbox")
		}
		h.Close()
	}
}

func TestForwardFailures(t *testing.T) {
	h, _ := New("gone", Config{URL: "unix:" + filepath.Join(t.TempDir(), "none.sock"), SigningSecret: "K"})
	if w := forward(t, h, "GET", "https://api.example.test/", ""); w.Code != 502 || w.Body.String() != string(errdefs.CodeEgressHandlerUnavailable) {
		t.Fatalf("unavailable: %d %s", w.Code, w.Body)
	}
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	h, _ = New("slow", Config{URL: slow.URL, SigningSecret: "K", HeaderTimeout: "200ms"})
	if w := forward(t, h, "GET", "https://api.example.test/", ""); w.Code != 504 || w.Body.String() != string(errdefs.CodeEgressHandlerTimeout) {
		t.Fatalf("timeout: %d %s", w.Code, w.Body)
	}
	for _, bad := range []Config{
		{URL: "ftp://x", SigningSecret: "K"}, {URL: "unix:rel.sock", SigningSecret: "K"}, {URL: "http://x"},
		{URL: "http://u:p@x/", SigningSecret: "K"}, {URL: "http://x", SigningSecret: "K", HeaderTimeout: "-1s"},
	} {
		if _, err := New("bad", bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// TestForwardDropsHutchFieldsInEveryBlock: a handler's Hutch-* fields are dropped from every
// header block the sandbox gets, not only the final header: a 103 (written from the
// ReverseProxy's trace hook, before ModifyResponse) and trailers, declared and undeclared,
// over HTTP/1.1 (chunked) and HTTP/2 on the sandbox side.
func TestForwardDropsHutchFieldsInEveryBlock(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set("Hutch-Egress-Denied", "1")
		w.WriteHeader(http.StatusEarlyHints)
		clear(w.Header())
		w.Header().Set("Trailer", "X-Done, Hutch-Declared")
		io.WriteString(w, "body")
		w.Header().Set("X-Done", "yes")
		w.Header().Set("Hutch-Declared", "forged")
		w.Header().Set(http.TrailerPrefix+"Hutch-Undeclared", "forged")
		w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
	}))
	defer hs.Close()
	h, err := New("ops", Config{URL: hs.URL, SigningSecret: "HMAC"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Forward(w, r, Origin{Sandbox: "sb1", Scheme: "https", Host: "api.example.test", Port: 443}, key, func(w http.ResponseWriter, err error) {
			w.WriteHeader(errdefs.HTTPStatus(err))
		})
	}))
	front.EnableHTTP2 = true
	front.StartTLS()
	defer front.Close()
	for _, h2 := range []bool{false, true} {
		tr := front.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.NextProtos = nil // the Protocols below choose
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP1(!h2)
		tr.Protocols.SetHTTP2(h2)
		var info []http.Header
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, hdr textproto.MIMEHeader) error {
			info = append(info, http.Header(hdr).Clone())
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", front.URL+"/x", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] || string(body) != "body" {
			t.Fatalf("h2 %v: %s %q", h2, resp.Proto, body)
		}
		if len(info) != 1 || info[0].Get("Link") == "" || info[0].Get("Hutch-Egress-Denied") != "" {
			t.Errorf("%s: 1xx blocks %v; want one 103 with Link and no Hutch-*", resp.Proto, info)
		}
		if resp.Trailer.Get("X-Done") != "yes" || resp.Trailer.Get("X-Late") != "yes" {
			t.Errorf("%s: trailers %v; want X-Done and X-Late", resp.Proto, resp.Trailer)
		}
		// Declared names are keys of resp.Trailer from the header on: none may be Hutch-*.
		for k := range resp.Trailer {
			if strings.HasPrefix(k, "Hutch-") {
				t.Errorf("%s: trailer %s reached the sandbox: %v", resp.Proto, k, resp.Trailer)
			}
		}
	}
}

// TestNewAll: every declared handler by name, or the first bad one's error.
func TestNewAll(t *testing.T) {
	for _, c := range []struct {
		name string
		cfgs map[string]Config
		want []string // the names; nil = an error
	}{
		{"none", nil, []string{}},
		{"two", map[string]Config{"ops": {URL: "http://127.0.0.1:9555/hook", SigningSecret: "K"},
			"audit": {URL: "unix:/run/audit.sock", SigningSecret: "K"}}, []string{"audit", "ops"}},
		{"one bad", map[string]Config{"ops": {URL: "http://x", SigningSecret: "K"}, "bad": {URL: "ftp://x", SigningSecret: "K"}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs, err := NewAll(c.cfgs)
			if c.want == nil {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `"bad"`) {
					t.Fatalf("NewAll = %v, %v; want the bad handler's error", hs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(maps.Keys(hs))
			if !slices.Equal(got, c.want) {
				t.Fatalf("handlers %v, want %v", got, c.want)
			}
			for name, h := range hs {
				if h.Name != name {
					t.Errorf("handler %q named %q", name, h.Name)
				}
			}
		})
	}
}
