package client

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestExec(t *testing.T) {
	binary := []byte{0xff, 0x00, 'a', 0xc3}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/execute", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		switch body["command"] {
		case "text":
			if body["sessionId"] != "s1" || body["cwd"] != "/tmp" || body["timeoutMs"] != float64(1501) {
				t.Errorf("text request = %v", body)
			}
			if env, _ := body["env"].(map[string]any); env["X"] != "y" {
				t.Errorf("env = %v", body["env"])
			}
			if body["stdin"] != "héllo\n" || body["stdinBase64"] != nil {
				t.Errorf("stdin fields = %v / %v", body["stdin"], body["stdinBase64"])
			}
			writeJSON(w, 200, map[string]any{"success": true, "exitCode": 3, "stdout": "out\n\n",
				"stderr": " err ", "command": "text", "duration": 42, "sessionId": "s1",
				"timestamp": "2025-01-01T00:00:00Z"})
		case "binary":
			if got, _ := body["stdinBase64"].(string); got != base64.StdEncoding.EncodeToString(binary) || body["stdin"] != nil {
				t.Errorf("binary stdin fields = %v / %v", body["stdin"], body["stdinBase64"])
			}
			if _, ok := body["sessionId"]; ok {
				t.Errorf("sessionId sent for the default session: %v", body)
			}
			writeJSON(w, 200, map[string]any{"success": true, "exitCode": 0,
				"stdout": base64.StdEncoding.EncodeToString(binary), "stderr": base64.StdEncoding.EncodeToString([]byte("é")),
				"encoding": "base64", "command": "binary", "duration": 1, "sessionId": "default"})
		case "session":
			if body["sessionId"] != "bound" {
				t.Errorf("session request sessionId = %v; want bound", body["sessionId"])
			}
			writeJSON(w, 200, map[string]any{"success": true, "exitCode": 0, "stdout": "", "stderr": "", "sessionId": "bound"})
		case "slow":
			writeEnvelope(w, errdefs.New(errdefs.CodeCommandTimeout, "command timed out after 100ms").
				With("timeoutMs", 100).With("stdout", "partial").With("stderr", ""))
		case "":
			writeEnvelope(w, errdefs.New(errdefs.CodeInvalidCommand, "command is empty"))
		}
	})
	c := newTestClient(t, mux)
	sb := c.SandboxHandle("box")
	ctx := t.Context()

	res, err := sb.Exec(ctx, "text", &ExecOptions{SessionID: "s1", Env: map[string]string{"X": "y"}, Cwd: "/tmp",
		Timeout: 1500*time.Millisecond + time.Microsecond, Stdin: []byte("héllo\n")})
	if err != nil {
		t.Fatalf("Exec(text) = %v", err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\n\n" || string(res.Stderr) != " err " ||
		res.Duration != 42*time.Millisecond || res.SessionID != "s1" || res.Command != "text" {
		t.Errorf("Exec(text) = %+v", res)
	}

	res, err = sb.Exec(ctx, "binary", &ExecOptions{Stdin: binary})
	if err != nil {
		t.Fatalf("Exec(binary) = %v", err)
	}
	if !bytes.Equal(res.Stdout, binary) || string(res.Stderr) != "é" {
		t.Errorf("Exec(binary) stdout %q stderr %q; want %q, é", res.Stdout, res.Stderr, binary)
	}

	if _, err := sb.Session("bound").Exec(ctx, "session", &ExecOptions{SessionID: "ignored"}); err != nil {
		t.Errorf("Session.Exec = %v", err)
	}

	_, err = sb.Exec(ctx, "slow", &ExecOptions{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) || !errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
		t.Fatalf("Exec(slow) = %v; want COMMAND_TIMEOUT", err)
	}
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Context["stdout"] != "partial" {
		t.Errorf("timeout error context = %v; want partial stdout", e)
	}

	if _, err := sb.Exec(ctx, "", nil); !errdefs.IsCode(err, errdefs.CodeInvalidCommand) {
		t.Errorf("Exec(\"\") = %v; want INVALID_COMMAND", err)
	}
}

func TestMillis(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Millisecond, 1},
		{time.Millisecond + 1, 2}, {30 * time.Second, 30000},
	}
	for _, tt := range tests {
		if got := millis(tt.d); got != tt.want {
			t.Errorf("millis(%v) = %d; want %d", tt.d, got, tt.want)
		}
	}
}
