package egresshandler

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func signed(t *testing.T, key []byte, ts time.Time) *http.Request {
	t.Helper()
	r, _ := http.NewRequest("POST", "http://handler/v1/chat?x=1", nil)
	h := r.Header
	h.Set(HeaderHost, "api.example.test")
	h.Set(HeaderScheme, "https")
	h.Set(HeaderPort, "443")
	h.Set(HeaderPath, "/v1/chat?x=1")
	h.Set(HeaderSandbox, "sb1")
	h.Set(HeaderRequestID, "r-1")
	s := strconv.FormatInt(ts.Unix(), 10)
	h.Set(HeaderTimestamp, s)
	h.Set(HeaderSignature, Sign(key, Canonical(s, "r-1", "sb1", "POST", "https", "api.example.test", "443", "/v1/chat?x=1")))
	return r
}

func TestVerify(t *testing.T) {
	key := []byte("handler-key-0123456789")
	now := time.Now()
	f, err := Verify(signed(t, key, now), key, now)
	if err != nil || f.URL.String() != "https://api.example.test/v1/chat?x=1" || f.Sandbox != "sb1" {
		t.Fatalf("Verify = %+v, %v", f, err)
	}
	for name, mut := range map[string]func(r *http.Request){
		"other key":      func(r *http.Request) { r.Header.Set(HeaderSignature, Sign([]byte("x"), "y")) },
		"host changed":   func(r *http.Request) { r.Header.Set(HeaderHost, "internal") },
		"path changed":   func(r *http.Request) { r.Header.Set(HeaderPath, "/admin") },
		"method changed": func(r *http.Request) { r.Method = "DELETE" },
		"sandbox":        func(r *http.Request) { r.Header.Set(HeaderSandbox, "other") },
		"no signature":   func(r *http.Request) { r.Header.Del(HeaderSignature) },
		"old":            func(r *http.Request) { *r = *signed(t, key, now.Add(-6*time.Minute)) },
		"future":         func(r *http.Request) { *r = *signed(t, key, now.Add(6*time.Minute)) },
		"bad ts":         func(r *http.Request) { r.Header.Set(HeaderTimestamp, "soon") },
	} {
		r := signed(t, key, now)
		mut(r)
		if _, err := Verify(r, key, now); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
