package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWebSocketAuth checks the browser rules of WebSocket handshakes: the token may come as the
// subprotocol bearer.<token> (upgrades only), and a foreign Origin is refused.
func TestWebSocketAuth(t *testing.T) {
	srv := portsServer(t, true)
	host := strings.TrimPrefix(srv.URL, "http://")
	upgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	for _, tc := range []struct {
		name    string
		method  string
		headers http.Header
		status  int
		code    string
	}{
		{"subprotocol token on an upgrade", "GET", merge(upgrade, "Sec-Websocket-Protocol", "hutch.v1, bearer."+testToken), 200, ""},
		{"subprotocol token, separate headers", "GET", merge(merge(upgrade, "Sec-Websocket-Protocol", "hutch.v1"), "Sec-Websocket-Protocol", "bearer."+testToken), 200, ""},
		{"wrong subprotocol token", "GET", merge(upgrade, "Sec-Websocket-Protocol", "hutch.v1, bearer.wrong"), 401, "UNAUTHENTICATED"},
		{"empty subprotocol token", "GET", merge(upgrade, "Sec-Websocket-Protocol", "bearer."), 401, "UNAUTHENTICATED"},
		{"wrong header token wins over the subprotocol", "GET", merge(merge(upgrade, "Sec-Websocket-Protocol", "bearer."+testToken), "Authorization", "Bearer wrong"), 401, "UNAUTHENTICATED"},
		{"subprotocol token without an upgrade", "GET", http.Header{"Sec-Websocket-Protocol": {"bearer." + testToken}}, 401, "UNAUTHENTICATED"},
		{"subprotocol token on a POST upgrade", "POST", merge(upgrade, "Sec-Websocket-Protocol", "bearer."+testToken), 401, "UNAUTHENTICATED"},
		{"same origin", "GET", merge(merge(upgrade, "Sec-Websocket-Protocol", "bearer."+testToken), "Origin", "http://"+host), 200, ""},
		{"cross origin", "GET", merge(merge(upgrade, "Sec-Websocket-Protocol", "bearer."+testToken), "Origin", "http://evil.example"), 403, "ORIGIN_NOT_ALLOWED"},
		{"cross origin, header token", "GET", merge(merge(upgrade, "Authorization", "Bearer "+testToken), "Origin", "https://evil.example:"+strings.Split(host, ":")[1]), 403, "ORIGIN_NOT_ALLOWED"},
		{"null origin", "GET", merge(merge(upgrade, "Sec-Websocket-Protocol", "bearer."+testToken), "Origin", "null"), 403, "ORIGIN_NOT_ALLOWED"},
		{"origin is not checked without an upgrade", "GET", http.Header{"Authorization": {"Bearer " + testToken}, "Origin": {"http://evil.example"}}, 200, ""},
		// The subprotocol token is for the terminal WebSocket only (a tester's finding).
		{"subprotocol token on another route's upgrade", "GET /v1/sandboxes", merge(upgrade, "Sec-Websocket-Protocol", "hutch.v1, bearer."+testToken), 401, "UNAUTHENTICATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path, _ := strings.Cut(tc.method, " ")
			if path == "" {
				path = "/v1/sandboxes/sb1/ports"
				// A token that only a WebSocket may carry is tried where it is meant for.
				if strings.Contains(strings.Join(tc.headers.Values("Sec-Websocket-Protocol"), ","), "bearer.") && tc.headers.Get("Authorization") == "" {
					path = "/v1/sandboxes/Not_Valid/terminals/t1" // refused after auth, before any sandbox
				}
			}
			req, _ := http.NewRequest(method, srv.URL+path, nil)
			req.Header = tc.headers.Clone()
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct{ Code string }
			b, _ := io.ReadAll(resp.Body)
			json.Unmarshal(b, &env)
			if tc.status == 200 && strings.HasSuffix(path, "/terminals/t1") {
				// Past auth, the terminal route fails later (no sandbox here): not 401 or 403.
				if resp.StatusCode == 401 || resp.StatusCode == 403 {
					t.Fatalf("status %d code %q (%s); want auth to pass", resp.StatusCode, env.Code, b)
				}
				return
			}
			if resp.StatusCode != tc.status || (tc.code != "" && env.Code != tc.code) {
				t.Fatalf("status %d code %q (%s); want %d %s", resp.StatusCode, env.Code, b, tc.status, tc.code)
			}
		})
	}
}

func merge(h http.Header, k, v string) http.Header {
	out := h.Clone()
	out.Add(k, v)
	return out
}

// TestTerminalRoutesRefuseBadInput checks the terminal endpoints' answers that need no sandbox.
func TestTerminalRoutesRefuseBadInput(t *testing.T) {
	srv := portsServer(t, true)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/sandboxes/sb1/terminals/main", 400, "VALIDATION_FAILED"}, // no upgrade
		{"GET", "/v1/sandboxes/sb1/terminals/BAD", 400, "VALIDATION_FAILED"},
		{"DELETE", "/v1/sandboxes/sb1/terminals/" + strings.Repeat("a", 65), 400, "VALIDATION_FAILED"},
		{"POST", "/v1/sandboxes/sb1/terminals/main", 405, "METHOD_NOT_ALLOWED"},
		{"POST", "/v1/sandboxes/sb1/terminals", 405, "METHOD_NOT_ALLOWED"},
	} {
		code, body := call(t, srv, tc.method, tc.path, "")
		if code != tc.status || body["code"] != tc.code {
			t.Errorf("%s %s = %d %v; want %d %s", tc.method, tc.path, code, body, tc.status, tc.code)
		}
	}
	// A real handshake with a bad terminal ID: refused before the upgrade, with the envelope.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, srv.URL+"/v1/sandboxes/sb1/terminals/Bad%20Id", &websocket.DialOptions{Subprotocols: []string{"hutch.v1", "bearer." + testToken}})
	if err == nil || resp == nil || resp.StatusCode != 400 {
		t.Fatalf("dial bad id = %v %v; want 400", resp, err)
	}
	_, resp, err = websocket.Dial(ctx, srv.URL+"/v1/sandboxes/sb1/terminals/main", &websocket.DialOptions{Subprotocols: []string{"hutch.v1", "bearer.nope"}})
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial wrong token = %v %v; want 401", resp, err)
	}
}
