package client

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestSessions(t *testing.T) {
	sessions := map[string]string{"default": "/workspace"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/session/create", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		id, _ := body["id"].(string)
		if id == "" {
			id = "session-1"
		}
		if _, ok := sessions[id]; ok {
			writeEnvelope(w, errdefs.New(errdefs.CodeSessionAlreadyExists, "session exists"))
			return
		}
		cwd, _ := body["cwd"].(string)
		sessions[id] = cwd
		writeJSON(w, 200, map[string]any{"success": true, "id": id, "cwd": cwd})
	})
	mux.HandleFunc("GET /v1/sandboxes/box/session/list", func(w http.ResponseWriter, r *http.Request) {
		var list []map[string]any
		for id, cwd := range sessions {
			list = append(list, map[string]any{"id": id, "cwd": cwd})
		}
		writeJSON(w, 200, map[string]any{"success": true, "sessions": list})
	})
	mux.HandleFunc("POST /v1/sandboxes/box/session/delete", func(w http.ResponseWriter, r *http.Request) {
		id, _ := readJSON(t, r)["sessionId"].(string)
		switch _, ok := sessions[id]; {
		case id == "default":
			writeEnvelope(w, errdefs.New(errdefs.CodeSessionDefault, "cannot delete default"))
		case !ok:
			writeEnvelope(w, errdefs.New(errdefs.CodeSessionNotFound, "no session"))
		default:
			delete(sessions, id)
			writeJSON(w, 200, map[string]any{"success": true, "sessionId": id})
		}
	})
	mux.HandleFunc("POST /v1/sandboxes/box/git/checkout", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		if body["sessionId"] != "s1" || body["branch"] != "main" || body["depth"] != float64(1) ||
			body["targetDir"] != "repo" || body["timeoutMs"] != float64(60000) {
			t.Errorf("checkout body = %v", body)
		}
		if body["repoUrl"] == "https://example.invalid/missing.git" {
			writeEnvelope(w, errdefs.New(errdefs.CodeGitRepoNotFound, "repository not found").
				With("stderr", "fatal: repository not found"))
			return
		}
		writeJSON(w, 200, map[string]any{"success": true, "repoUrl": body["repoUrl"], "branch": "main",
			"targetDir": "/workspace/repo"})
	})
	c := newTestClient(t, mux)
	sb := c.SandboxHandle("box")
	ctx := t.Context()

	s, err := sb.CreateSession(ctx, &SessionOptions{ID: "s1", Cwd: "/tmp", Env: map[string]string{"A": "b"}})
	if err != nil || s.ID() != "s1" || s.SandboxID() != "box" {
		t.Fatalf("CreateSession(s1) = %v, %v", s, err)
	}
	if _, err := sb.CreateSession(ctx, &SessionOptions{ID: "s1"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("CreateSession(s1) again = %v; want SESSION_ALREADY_EXISTS", err)
	}
	s2, err := sb.CreateSession(ctx, nil)
	if err != nil || s2.ID() != "session-1" {
		t.Errorf("CreateSession(nil) = %v, %v; want session-1", s2, err)
	}
	list, err := sb.ListSessions(ctx)
	if err != nil || len(list) != 3 {
		t.Errorf("ListSessions = %v, %v", list, err)
	}
	if err := sb.DeleteSession(ctx, "default"); !errdefs.IsCode(err, errdefs.CodeSessionDefault) {
		t.Errorf("DeleteSession(default) = %v; want SESSION_DEFAULT_UNDELETABLE", err)
	}
	if err := s2.Delete(ctx); err != nil {
		t.Errorf("Session.Delete = %v", err)
	}
	if err := sb.DeleteSession(ctx, "session-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("DeleteSession(deleted) = %v; want SESSION_NOT_FOUND", err)
	}
	if got := sb.Session("").ID(); got != DefaultSession {
		t.Errorf("Session(\"\").ID() = %q", got)
	}

	opts := &GitCheckoutOptions{Branch: "main", Depth: 1, TargetDir: "repo", Timeout: time.Minute}
	res, err := s.GitCheckout(ctx, "https://example.invalid/r.git", opts)
	if err != nil || res.TargetDir != "/workspace/repo" || res.Branch != "main" {
		t.Errorf("GitCheckout = %+v, %v", res, err)
	}
	_, err = s.GitCheckout(ctx, "https://example.invalid/missing.git", opts)
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeGitRepoNotFound || e.Context["stderr"] == nil {
		t.Errorf("GitCheckout(missing) = %v; want GIT_REPOSITORY_NOT_FOUND with stderr", err)
	}
}
