package agent

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
)

// maxBufferedOutput caps each of stdout and stderr of a buffered exec, in bytes; more is
// dropped and the reply says "truncated": true. Use the streaming form for big output.
const maxBufferedOutput = 64 << 20

// execRequest is the body of both exec endpoints.
type execRequest struct {
	Command     string            `json:"command"`
	SessionID   string            `json:"sessionId"`
	TimeoutMs   int64             `json:"timeoutMs"`
	Env         map[string]string `json:"env"`
	Cwd         string            `json:"cwd"`
	Stdin       *string           `json:"stdin"`
	StdinBase64 *string           `json:"stdinBase64"`
}

// toSession validates the request and converts it.
func (e execRequest) toSession() (session.Request, error) {
	req := session.Request{Command: e.Command, Env: e.Env, Cwd: e.Cwd}
	if strings.TrimSpace(e.Command) == "" {
		return req, errdefs.New(errdefs.CodeInvalidCommand, "command is empty")
	}
	if strings.IndexByte(e.Command, 0) >= 0 {
		return req, errdefs.New(errdefs.CodeInvalidCommand, "command contains a NUL byte")
	}
	if e.TimeoutMs < 0 {
		return req, errdefs.Newf(errdefs.CodeInvalidArgument, "timeoutMs %d is negative", e.TimeoutMs)
	}
	req.Timeout = time.Duration(e.TimeoutMs) * time.Millisecond
	if err := validateEnv(e.Env); err != nil {
		return req, err
	}
	if strings.IndexByte(e.Cwd, 0) >= 0 {
		return req, errdefs.New(errdefs.CodeInvalidPath, "cwd contains a NUL byte").With("path", e.Cwd)
	}
	switch {
	case e.Stdin != nil && e.StdinBase64 != nil:
		return req, errdefs.New(errdefs.CodeInvalidArgument, "give stdin or stdinBase64, not both")
	case e.Stdin != nil:
		req.Stdin = []byte(*e.Stdin)
	case e.StdinBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*e.StdinBase64)
		if err != nil {
			return req, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "stdinBase64 is not valid base64")
		}
		req.Stdin = b
	}
	return req, nil
}

// validateEnv rejects names that cannot be in an environment.
func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid environment variable %q", k).With("name", k)
		}
	}
	return nil
}

// bufferOutput collects a command's output for the buffered exec.
type bufferOutput struct {
	stdout, stderr bytes.Buffer
	truncated      bool
}

func (b *bufferOutput) Start(int) error       { return nil }
func (b *bufferOutput) Stdout(p []byte) error { b.add(&b.stdout, p); return nil }
func (b *bufferOutput) Stderr(p []byte) error { b.add(&b.stderr, p); return nil }

func (b *bufferOutput) add(buf *bytes.Buffer, p []byte) {
	if room := maxBufferedOutput - buf.Len(); len(p) > room {
		p = p[:max(room, 0)]
		b.truncated = true
	}
	buf.Write(p)
}

// handleExecute: POST /api/execute → {success, exitCode, stdout, stderr, encoding?, command,
// duration (ms), sessionId, timestamp}. Timeout → 408 COMMAND_TIMEOUT with context
// {timeoutMs, stdout, stderr}.
func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) error {
	var body execRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	req, err := body.toSession()
	if err != nil {
		return err
	}
	sid := sessionOrDefault(body.SessionID)
	var out bufferOutput
	res, err := s.sessions.Exec(r.Context(), sid, req, &out)
	if err != nil {
		if errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
			return errdefs.Newf(errdefs.CodeCommandTimeout, "command timed out after %d ms", body.TimeoutMs).
				With("timeoutMs", body.TimeoutMs).
				With("stdout", strings.ToValidUTF8(out.stdout.String(), "\uFFFD")).
				With("stderr", strings.ToValidUTF8(out.stderr.String(), "\uFFFD")).
				With("sessionId", sid)
		}
		return err
	}
	reply := struct {
		Success   bool      `json:"success"`
		ExitCode  int       `json:"exitCode"`
		Stdout    string    `json:"stdout"`
		Stderr    string    `json:"stderr"`
		Encoding  string    `json:"encoding,omitempty"`
		Truncated bool      `json:"truncated,omitempty"`
		Command   string    `json:"command"`
		Duration  int64     `json:"duration"`
		SessionID string    `json:"sessionId"`
		Timestamp time.Time `json:"timestamp"`
	}{
		Success: true, ExitCode: res.ExitCode, Command: body.Command, Duration: res.Duration.Milliseconds(),
		SessionID: sid, Truncated: out.truncated, Timestamp: now(),
	}
	if utf8.Valid(out.stdout.Bytes()) && utf8.Valid(out.stderr.Bytes()) {
		reply.Stdout, reply.Stderr = out.stdout.String(), out.stderr.String()
	} else {
		reply.Encoding = "base64"
		reply.Stdout = base64.StdEncoding.EncodeToString(out.stdout.Bytes())
		reply.Stderr = base64.StdEncoding.EncodeToString(out.stderr.Bytes())
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

func sessionOrDefault(id string) string {
	if id == "" {
		return session.DefaultID
	}
	return id
}
