package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// scope is what *Sandbox and *Session share: the operations that run inside a sandbox, bound
// to a session (sessionID "" means the default session, or ExecOptions.SessionID).
type scope struct {
	c         *Client
	sandboxID string
	sessionID string
}

// do performs a forwarded call to /v1/sandboxes/{id}{rest} with a JSON body and reply.
func (s *scope) do(ctx context.Context, method, rest string, body, out any) error {
	if err := checkID(s.sandboxID); err != nil {
		return err
	}
	return s.c.call(ctx, request{method: method, path: sandboxPath(s.sandboxID, rest), json: body}, out)
}

// session returns the session ID to send: the bound one, else fallback.
func (s *scope) session(fallback string) string {
	if s.sessionID != "" {
		return s.sessionID
	}
	return fallback
}

// where names the sandbox (and session) in error messages.
func (s *scope) where() string {
	if s.sessionID != "" {
		return fmt.Sprintf("sandbox %q session %q", s.sandboxID, s.sessionID)
	}
	return fmt.Sprintf("sandbox %q", s.sandboxID)
}

// ExecOptions are the optional parameters of Exec and ExecStream. A nil *ExecOptions means
// all defaults.
type ExecOptions struct {
	// SessionID selects the session whose cwd and exported environment the command sees and
	// updates; empty means "default". An unknown session is created on first use. Ignored on
	// a *Session, which always uses its own ID.
	SessionID string
	// Env is added to the environment of this command only.
	Env map[string]string
	// Cwd is the working directory of this command only; empty means the session's cwd. A
	// directory that does not exist makes the command exit 1 with a message on stderr.
	Cwd string
	// Timeout bounds the command's run time (rounded up to whole milliseconds); 0 means no
	// limit. On expiry the command's whole process tree is killed and the call fails with
	// COMMAND_TIMEOUT (errors.Is(err, errdefs.ErrDeadlineExceeded)).
	Timeout time.Duration
	// Stdin is the command's standard input. nil means none (/dev/null, immediate EOF). It is
	// sent in the JSON body, so it must stay well under the 48 MiB request limit; for big
	// inputs write a file with WriteFileFrom and redirect from it.
	Stdin []byte
}

// ExecResult is the outcome of a command that ran to its end.
type ExecResult struct {
	// ExitCode follows the shell: 0 success, 128+N for death by signal N (137 = SIGKILL, e.g.
	// the memory limit).
	ExitCode int
	// Stdout and Stderr are the exact bytes the command wrote, binary included.
	Stdout, Stderr []byte
	// Duration is the command's run time as measured in the sandbox (millisecond resolution).
	Duration time.Duration
	// SessionID is the session the command ran in.
	SessionID string
	// Command is the command line as run.
	Command string
	// Truncated reports that Stdout or Stderr passed the 16 MiB cap of the buffered form and
	// was cut there (the command still ran to its end). Use ExecStream for large output.
	Truncated bool
	// Reason says why a command killed by a signal died (ExitCode 137), when the sandbox knows:
	// "oom-killed" (the memory limit's OOM killer ended it), or on gVisor "process-limit" or
	// "cpu-starved" (hutchd's guard killed it: a sandbox near its process limit, or busy
	// processes that starved the agent).
	Reason string
}

func (s *scope) execRequest(command string, opts *ExecOptions) v1.ExecRequest {
	r := v1.ExecRequest{Command: command, SessionID: s.sessionID}
	if opts == nil {
		return r
	}
	r.SessionID = s.session(opts.SessionID)
	r.TimeoutMs = millis(opts.Timeout)
	r.Env = opts.Env
	r.Cwd = opts.Cwd
	if opts.Stdin != nil {
		if utf8.Valid(opts.Stdin) {
			text := string(opts.Stdin)
			r.Stdin = &text
		} else {
			b64 := base64.StdEncoding.EncodeToString(opts.Stdin)
			r.StdinBase64 = &b64
		}
	}
	return r
}

// Exec runs command (a bash command line, run with bash -c in the session's cwd and exported
// environment) and waits for it to end (POST /v1/sandboxes/{id}/execute). A non-zero exit code
// is not an error: it is in ExecResult.ExitCode.
//
// Errors: INVALID_COMMAND for an empty command; COMMAND_TIMEOUT (ErrDeadlineExceeded) when
// opts.Timeout expires, with the partial output in the error's Context["stdout"] and
// Context["stderr"] (text, invalid UTF-8 replaced); SANDBOX_NOT_FOUND for an unknown sandbox.
func (s *scope) Exec(ctx context.Context, command string, opts *ExecOptions) (*ExecResult, error) {
	var reply v1.ExecResult
	if err := s.do(ctx, http.MethodPost, "/execute", s.execRequest(command, opts), &reply); err != nil {
		return nil, fmt.Errorf("exec in %s: %w", s.where(), err)
	}
	res := &ExecResult{
		ExitCode:  reply.ExitCode,
		Stdout:    []byte(reply.Stdout),
		Stderr:    []byte(reply.Stderr),
		Duration:  time.Duration(reply.Duration) * time.Millisecond,
		SessionID: reply.SessionID,
		Command:   reply.Command,
		Truncated: reply.Truncated,
		Reason:    reply.Reason,
	}
	if reply.Encoding == "base64" {
		var err error
		if res.Stdout, err = base64.StdEncoding.DecodeString(reply.Stdout); err != nil {
			return nil, fmt.Errorf("exec in %s: %w", s.where(), errdefs.Wrap(errdefs.CodeInternal, err, "decode stdout"))
		}
		if res.Stderr, err = base64.StdEncoding.DecodeString(reply.Stderr); err != nil {
			return nil, fmt.Errorf("exec in %s: %w", s.where(), errdefs.Wrap(errdefs.CodeInternal, err, "decode stderr"))
		}
	}
	return res, nil
}
