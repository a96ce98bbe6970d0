package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// portServer is a stand-in for hutchd's /ports endpoints following the contract's rules.
func portServer(t *testing.T) http.Handler {
	var mu sync.Mutex
	type exposed struct{ name, token string }
	ports := map[int]exposed{}
	url := func(port int, token string) string {
		return fmt.Sprintf("https://%d-box-%s.preview.test/", port, token)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{id}/ports", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "box" {
			writeEnvelope(w, errdefs.New(errdefs.CodeSandboxNotFound, "sandbox not found"))
			return
		}
		body := readJSON(t, r)
		port := int(body["port"].(float64))
		name, _ := body["name"].(string)
		token, _ := body["token"].(string)
		mu.Lock()
		defer mu.Unlock()
		if port < 1024 || port > 65535 {
			writeEnvelope(w, errdefs.New(errdefs.CodeInvalidPort, "invalid port").With("port", port))
			return
		}
		if old, ok := ports[port]; ok {
			if token != "" && token != old.token {
				writeEnvelope(w, errdefs.New(errdefs.CodePortAlreadyExposed, "port already exposed"))
				return
			}
			writeJSON(w, 200, okReply(map[string]any{"port": port, "name": old.name, "url": url(port, old.token), "token": old.token}))
			return
		}
		if token == "" {
			token = "r4nd0mt0k3n_abcd"
		}
		for p, e := range ports {
			if e.token == token && p != port {
				writeEnvelope(w, errdefs.New(errdefs.CodeTokenInUse, "token in use"))
				return
			}
		}
		ports[port] = exposed{name, token}
		writeJSON(w, 200, okReply(map[string]any{"port": port, "name": name, "url": url(port, token), "token": token}))
	})
	mux.HandleFunc("GET /v1/sandboxes/box/ports", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		list := []any{}
		for p, e := range ports {
			list = append(list, map[string]any{"port": p, "name": e.name, "url": url(p, e.token), "token": e.token,
				"exposedAt": "2025-01-01T00:00:00Z"})
		}
		writeJSON(w, 200, okReply(map[string]any{"ports": list}))
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box/ports/{port}", func(w http.ResponseWriter, r *http.Request) {
		port, _ := strconv.Atoi(r.PathValue("port"))
		mu.Lock()
		defer mu.Unlock()
		if _, ok := ports[port]; !ok {
			writeEnvelope(w, errdefs.New(errdefs.CodePortNotExposed, "port not exposed"))
			return
		}
		delete(ports, port)
		writeJSON(w, 200, okReply(map[string]any{"port": port}))
	})
	return mux
}

func TestPorts(t *testing.T) {
	c := newTestClient(t, portServer(t))
	sb := c.SandboxHandle("box")
	ctx := t.Context()

	p, err := sb.ExposePort(ctx, 3000, ExposeOptions{Name: "web"})
	want := ExposedPort{Port: 3000, Name: "web", URL: "https://3000-box-r4nd0mt0k3n_abcd.preview.test/", Token: "r4nd0mt0k3n_abcd"}
	if err != nil || p != want {
		t.Fatalf("ExposePort(3000) = %+v, %v; want %+v", p, err, want)
	}
	// Idempotent without a token; another token is a conflict.
	if again, err := sb.ExposePort(ctx, 3000, ExposeOptions{}); err != nil || again.Token != p.Token {
		t.Errorf("ExposePort(3000) again = %+v, %v", again, err)
	}
	p2, err := sb.ExposePort(ctx, 8080, ExposeOptions{Token: "mytok"})
	if err != nil || p2.Token != "mytok" || p2.URL != "https://8080-box-mytok.preview.test/" {
		t.Errorf("ExposePort(8080, mytok) = %+v, %v", p2, err)
	}
	tests := []struct {
		port  int
		opts  ExposeOptions
		code  errdefs.Code
		class error
	}{
		{80, ExposeOptions{}, errdefs.CodeInvalidPort, errdefs.ErrInvalidArgument},
		{3000, ExposeOptions{Token: "other"}, errdefs.CodePortAlreadyExposed, errdefs.ErrConflict},
		{9000, ExposeOptions{Token: "mytok"}, errdefs.CodeTokenInUse, errdefs.ErrConflict},
	}
	for _, tt := range tests {
		_, err := sb.ExposePort(ctx, tt.port, tt.opts)
		if !errdefs.IsCode(err, tt.code) || !errors.Is(err, tt.class) {
			t.Errorf("ExposePort(%d, %+v) = %v; want %s", tt.port, tt.opts, err, tt.code)
		}
	}
	var e *errdefs.Error
	if _, err := sb.ExposePort(ctx, 22, ExposeOptions{}); !errors.As(err, &e) || e.Context["port"] != 22.0 {
		t.Errorf("INVALID_PORT context = %v", err)
	}
	if _, err := c.SandboxHandle("nope").ExposePort(ctx, 3000, ExposeOptions{}); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Errorf("ExposePort on an unknown sandbox = %v", err)
	}

	list, err := sb.ExposedPorts(ctx)
	if err != nil || len(list) != 2 || list[0].ExposedAt != time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) {
		t.Errorf("ExposedPorts = %+v, %v", list, err)
	}
	if err := sb.UnexposePort(ctx, 3000); err != nil {
		t.Errorf("UnexposePort(3000) = %v", err)
	}
	if err := sb.UnexposePort(ctx, 3000); !errdefs.IsCode(err, errdefs.CodePortNotExposed) || !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("UnexposePort(3000) twice = %v; want PORT_NOT_EXPOSED", err)
	}
	if list, err := sb.ExposedPorts(ctx); err != nil || len(list) != 1 || list[0].Port != 8080 {
		t.Errorf("ExposedPorts after unexpose = %+v, %v", list, err)
	}
}
