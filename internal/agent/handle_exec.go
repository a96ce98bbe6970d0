package agent

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/oom"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/envlimit"
)

// maxBufferedOutput caps each of stdout and stderr of a buffered exec, in bytes; more is
// dropped and the reply says "truncated": true. Use the streaming form for big output. The cap
// keeps the agent's own memory small: it shares the sandbox's memory limit (256 MiB on lite)
// with the command, and an agent killed for memory takes the sandbox down.
const maxBufferedOutput = 16 << 20

// maxContextOutput caps the partial output carried in a timeout error's context, in bytes.
const maxContextOutput = 1 << 20

// execSession validates the body of both exec endpoints and converts it.
func execSession(e agentapi.ExecRequest) (session.Request, error) {
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

// validateEnv rejects names that cannot be in an environment, and entries or a whole env the
// kernel would refuse to execve (envlimit).
func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid environment variable %q", k).With("name", k)
		}
	}
	return envlimit.Check("env", env)
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

// handleExecute: POST /api/execute → agentapi.ExecReply {success, exitCode, stdout, stderr,
// encoding?, truncated?, reason? ("oom-killed", see package oom), command, duration (ms),
// sessionId, timestamp}. Timeout → 408 COMMAND_TIMEOUT with context {timeoutMs, stdout, stderr}.
func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) error {
	var body agentapi.ExecRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	req, err := execSession(body)
	if err != nil {
		return err
	}
	sid := sessionOrDefault(body.SessionID)
	var out bufferOutput
	oomWatch := oom.Default.Start()
	res, err := s.sessions.Exec(r.Context(), sid, req, &out)
	if err != nil {
		if errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
			return errdefs.Newf(errdefs.CodeCommandTimeout, "command timed out after %d ms", body.TimeoutMs).
				With("timeoutMs", body.TimeoutMs).
				With("stdout", strings.ToValidUTF8(string(head(out.stdout.Bytes(), maxContextOutput)), "\uFFFD")).
				With("stderr", strings.ToValidUTF8(string(head(out.stderr.Bytes(), maxContextOutput)), "\uFFFD")).
				With("sessionId", sid)
		}
		return err
	}
	// The reply is encoded straight from the buffers (no string copies, no escaped copy in
	// memory): with 16 MiB of NUL bytes, a json.Marshal would hold ~100 MiB at once.
	encoding := ""
	if !utf8.Valid(out.stdout.Bytes()) || !utf8.Valid(out.stderr.Bytes()) {
		encoding = "base64"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, `{"success":true,"exitCode":%d,"stdout":`, res.ExitCode)
	writeJSONBytes(bw, out.stdout.Bytes(), encoding)
	bw.WriteString(`,"stderr":`)
	writeJSONBytes(bw, out.stderr.Bytes(), encoding)
	if encoding != "" {
		bw.WriteString(`,"encoding":"base64"`)
	}
	if out.truncated {
		bw.WriteString(`,"truncated":true`)
	}
	if reason := oomWatch.Reason(res.ExitCode); reason != "" {
		bw.WriteString(`,"reason":"` + reason + `"`)
	}
	tail, _ := json.Marshal(agentapi.ExecReplyTail{Command: body.Command, Duration: res.Duration.Milliseconds(), SessionID: sid,
		Timestamp: now()})
	bw.WriteByte(',')
	bw.Write(tail[1:]) // the object's fields and closing brace
	bw.WriteByte('\n')
	return bw.Flush()
}

func head(b []byte, n int) []byte { return b[:min(len(b), n)] }

// writeJSONBytes writes b as a JSON string: base64 when encoding is "base64", else b (valid
// UTF-8) with the escapes JSON requires.
func writeJSONBytes(w *bufio.Writer, b []byte, encoding string) {
	w.WriteByte('"')
	defer w.WriteByte('"')
	if encoding == "base64" {
		enc := base64.NewEncoder(base64.StdEncoding, w)
		_, _ = enc.Write(b) // its errors are w's, which keeps them for Flush
		enc.Close()
		return
	}
	const hexDigits = "0123456789abcdef"
	start := 0
	for i, c := range b {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.Write(b[start:i])
		switch c {
		case '"', '\\':
			w.WriteByte('\\')
			w.WriteByte(c)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		default:
			w.WriteString(`\u00`)
			w.WriteByte(hexDigits[c>>4])
			w.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	w.Write(b[start:])
}

func sessionOrDefault(id string) string {
	if id == "" {
		return session.DefaultID
	}
	return id
}
