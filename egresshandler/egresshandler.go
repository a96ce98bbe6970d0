// Package egresshandler is for operators who write the HTTP endpoints ("handlers") that
// hutchd forwards sandbox requests to (an egress rule with action "handler"). It verifies the
// request's Hutch-Signature and gives back the original destination.
//
// hutchd sends the sandbox's request with the same method, path and query to the handler's
// URL, with its headers (minus hop-by-hop and any Hutch-* the sandbox sent) and these added:
//
//	Hutch-Forwarded-Host, -Scheme, -Port, -Path   the original destination (Path includes the query)
//	Hutch-Sandbox                                 the sandbox ID
//	Hutch-Request-Id                              unique per request
//	Hutch-Timestamp                               unix seconds
//	Hutch-Signature                               "v1=" + hex HMAC-SHA256(key, Canonical(...))
//
// The body is streamed and not signed. Use:
//
//	fwd, err := egresshandler.Verify(r, key, time.Now())
//	if err != nil { http.Error(w, "bad signature", http.StatusUnauthorized); return }
//	// fwd.URL is the URL the sandbox asked for.
package egresshandler

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Header names.
const (
	HeaderHost      = "Hutch-Forwarded-Host"
	HeaderScheme    = "Hutch-Forwarded-Scheme"
	HeaderPort      = "Hutch-Forwarded-Port"
	HeaderPath      = "Hutch-Forwarded-Path"
	HeaderSandbox   = "Hutch-Sandbox"
	HeaderRequestID = "Hutch-Request-Id"
	HeaderTimestamp = "Hutch-Timestamp"
	HeaderSignature = "Hutch-Signature"
)

// Window is how far a request's timestamp may be from the verifier's clock.
const Window = 5 * time.Minute

// Forwarded is a verified request's origin.
type Forwarded struct {
	Sandbox   string
	RequestID string
	Time      time.Time
	Scheme    string // "https" or "http"
	Host      string
	Port      string
	Path      string // path and query as the sandbox sent them
	// URL is scheme://host[:port]path (the port omitted when it is the scheme's default).
	URL *url.URL
}

// Canonical is the signed string: ts "\n" requestID "\n" sandbox "\n" method "\n"
// scheme "://" host ":" port pathAndQuery.
func Canonical(ts, requestID, sandbox, method, scheme, host, port, pathAndQuery string) string {
	return ts + "\n" + requestID + "\n" + sandbox + "\n" + method + "\n" + scheme + "://" + host + ":" + port + pathAndQuery
}

// Sign returns the Hutch-Signature value for canonical under key.
func Sign(key []byte, canonical string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(canonical))
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// ErrSignature is wrapped by every verification failure.
var ErrSignature = errors.New("egresshandler: request not signed by hutchd")

// Verify checks r's Hutch-Signature under key and that its timestamp is within Window of now,
// and returns where the sandbox meant the request to go.
func Verify(r *http.Request, key []byte, now time.Time) (Forwarded, error) {
	h := r.Header
	f := Forwarded{
		Sandbox: h.Get(HeaderSandbox), RequestID: h.Get(HeaderRequestID),
		Scheme: h.Get(HeaderScheme), Host: h.Get(HeaderHost), Port: h.Get(HeaderPort), Path: h.Get(HeaderPath),
	}
	ts := h.Get(HeaderTimestamp)
	sig := h.Get(HeaderSignature)
	if ts == "" || sig == "" || f.RequestID == "" || f.Sandbox == "" || f.Host == "" || f.Scheme == "" || f.Port == "" || !strings.HasPrefix(f.Path, "/") {
		return Forwarded{}, fmt.Errorf("%w: Hutch-* headers missing", ErrSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Forwarded{}, fmt.Errorf("%w: bad timestamp", ErrSignature)
	}
	f.Time = time.Unix(sec, 0)
	if d := now.Sub(f.Time); d > Window || d < -Window {
		return Forwarded{}, fmt.Errorf("%w: timestamp outside %s", ErrSignature, Window)
	}
	want := Sign(key, Canonical(ts, f.RequestID, f.Sandbox, r.Method, f.Scheme, f.Host, f.Port, f.Path))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return Forwarded{}, fmt.Errorf("%w: signature mismatch", ErrSignature)
	}
	host := f.Host
	if !(f.Scheme == "https" && f.Port == "443") && !(f.Scheme == "http" && f.Port == "80") {
		host += ":" + f.Port
	}
	u, err := url.Parse(f.Scheme + "://" + host + f.Path)
	if err != nil {
		return Forwarded{}, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	f.URL = u
	return f, nil
}
