package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// ProcessStatus is the state of a background process.
type ProcessStatus = v1.ProcessStatus

// Process states. A process is "starting" or "running" until it ends; then exit code 0 gives
// "completed", 137 or 143 (SIGKILL, SIGTERM) give "killed", any other exit code gives
// "failed", and a process that could not start or whose agent died gives "error".
// ProcessStatus.Done reports a final state.
const (
	ProcessStarting  = v1.ProcessStarting
	ProcessRunning   = v1.ProcessRunning
	ProcessCompleted = v1.ProcessCompleted
	ProcessFailed    = v1.ProcessFailed
	ProcessKilled    = v1.ProcessKilled
	ProcessError     = v1.ProcessError
)

// ProcessInfo is the agent's record of a background process.
type ProcessInfo = v1.Process

// ProcessOptions are the optional parameters of StartProcess. The zero value means all
// defaults.
type ProcessOptions struct {
	// ID is the process ID (1–128 characters of [A-Za-z0-9_.-], not "kill-all"); empty means
	// the agent picks "proc_<unix ms>_<random>". An ID the agent still knows (running or
	// retained after its end) → PROCESS_ALREADY_EXISTS.
	ID string
	// SessionID selects the session whose cwd and exported environment the process starts
	// with; empty means "default". Starting a process neither locks nor changes the session.
	// Ignored on a *Session, which always uses its own ID.
	SessionID string
	// Env is added to the process's environment.
	Env map[string]string
	// Cwd is the process's working directory; empty means the session's cwd.
	Cwd string
	// LogBufferBytes is how many bytes of each stream (stdout, stderr) the agent holds for
	// Logs and StreamLogs, 64 KiB–256 MiB; 0 means the agent's default (4 MiB). Older output
	// is dropped from the front.
	LogBufferBytes int
}

// StartProcess starts command (a bash command line, run with bash -c, stdin /dev/null, in its
// own process group) as a background process and returns a handle on it as soon as it has
// started (POST /v1/sandboxes/{id}/process/start). Its output is held by the agent: read it
// with Process.Logs or Process.StreamLogs, wait for readiness with Process.WaitForLog or
// Process.WaitForPort.
//
// Errors: INVALID_COMMAND for an empty command; VALIDATION_FAILED for a bad opts.ID or
// opts.LogBufferBytes; PROCESS_ALREADY_EXISTS (ErrAlreadyExists) for an ID in use;
// SANDBOX_NOT_FOUND for an unknown sandbox.
func (s *scope) StartProcess(ctx context.Context, command string, opts ProcessOptions) (*Process, error) {
	body := v1.StartProcessRequest{Command: command, ProcessID: opts.ID, SessionID: s.session(opts.SessionID),
		Env: opts.Env, Cwd: opts.Cwd, LogBufferBytes: opts.LogBufferBytes}
	var reply v1.StartProcessResult
	if err := s.do(ctx, http.MethodPost, "/process/start", body, &reply); err != nil {
		return nil, fmt.Errorf("start process in %s: %w", s.where(), err)
	}
	info := reply.Process
	if info.ID == "" {
		info.ID = reply.ProcessID
	}
	if info.PID == 0 {
		info.PID = reply.PID
	}
	if info.Command == "" {
		info.Command = reply.Command
	}
	p := newProcess(s.c, s.sandboxID, info.ID)
	p.setInfo(info)
	return p, nil
}

// ListProcesses returns the sandbox's processes, running and retained, in start order
// (GET /v1/sandboxes/{id}/process/list). status filters by state ("running"); empty means all.
func (s *Sandbox) ListProcesses(ctx context.Context, status string) ([]ProcessInfo, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var q url.Values
	if status != "" {
		q = url.Values{"status": {status}}
	}
	var reply struct {
		Processes []ProcessInfo `json:"processes"`
	}
	err := s.c.call(ctx, request{method: http.MethodGet, path: sandboxPath(s.sandboxID, "/process/list"), query: q}, &reply)
	if err != nil {
		return nil, fmt.Errorf("list processes of sandbox %q: %w", s.sandboxID, err)
	}
	return reply.Processes, nil
}

// GetProcess returns a handle on process id with its current record
// (GET /v1/sandboxes/{id}/process/{pid}). Unknown id → PROCESS_NOT_FOUND (ErrNotFound).
func (s *Sandbox) GetProcess(ctx context.Context, id string) (*Process, error) {
	p := s.Process(id)
	if _, err := p.Refresh(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// KillAllProcesses kills every running process of the sandbox, each with its whole process
// tree and the agent's default grace, and returns how many it killed
// (DELETE /v1/sandboxes/{id}/process/kill-all).
func (s *Sandbox) KillAllProcesses(ctx context.Context) (int, error) {
	var reply struct {
		CleanedCount int `json:"cleanedCount"`
	}
	if err := s.do(ctx, http.MethodDelete, "/process/kill-all", nil, &reply); err != nil {
		return 0, fmt.Errorf("kill all processes of sandbox %q: %w", s.sandboxID, err)
	}
	return reply.CleanedCount, nil
}

// Process returns a handle on process id without any call; its Info is empty but for the ID
// until a call fills it. Calls on it fail with PROCESS_NOT_FOUND if the process is unknown.
func (s *Sandbox) Process(id string) *Process {
	return newProcess(s.c, s.sandboxID, id)
}

// Process is a handle on one background process of a sandbox. It caches the last record it
// saw (Info); every other method is a call to hutchd. It is safe for concurrent use.
type Process struct {
	c         *Client
	sandboxID string
	id        string

	mu   sync.Mutex
	info ProcessInfo // guarded by mu
}

func newProcess(c *Client, sandboxID, id string) *Process {
	return &Process{c: c, sandboxID: sandboxID, id: id, info: ProcessInfo{ID: id}}
}

// ID returns the process ID.
func (p *Process) ID() string { return p.id }

// SandboxID returns the ID of the process's sandbox.
func (p *Process) SandboxID() string { return p.sandboxID }

// Info returns the last record of the process seen by this handle (from StartProcess,
// GetProcess, Refresh, Kill, WaitForExit or the exit event of StreamLogs). ExitCode is a copy.
func (p *Process) Info() ProcessInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := p.info
	if info.ExitCode != nil {
		code := *info.ExitCode
		info.ExitCode = &code
	}
	return info
}

func (p *Process) setInfo(info ProcessInfo) {
	if info.ID == "" {
		info.ID = p.id
	}
	p.mu.Lock()
	p.info = info
	p.mu.Unlock()
}

// setExit records the end of the process seen by a wait or a stream.
func (p *Process) setExit(status ProcessStatus, exitCode int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.info.Status = status
	p.info.ExitCode = &exitCode
}

// path returns the escaped hutchd path of the process plus rest.
func (p *Process) path(rest string) string {
	return sandboxPath(p.sandboxID, "/process/"+url.PathEscape(p.id)+rest)
}

// where names the process in error messages.
func (p *Process) where() string {
	return fmt.Sprintf("process %q of sandbox %q", p.id, p.sandboxID)
}

// check rejects a handle whose IDs would make a malformed path.
func (p *Process) check() error {
	if err := checkID(p.sandboxID); err != nil {
		return err
	}
	if p.id == "" {
		return errdefs.New(errdefs.CodeInvalidArgument, "process ID is empty")
	}
	if p.id == "." || p.id == ".." {
		// A dot segment would be cleaned out of the URL: the call would address the sandbox.
		return errdefs.Newf(errdefs.CodeInvalidArgument, "process ID %q is not valid", p.id).With("processId", p.id)
	}
	return nil
}

func (p *Process) call(ctx context.Context, r request, out any) error {
	if err := p.check(); err != nil {
		return err
	}
	return p.c.call(ctx, r, out)
}

// Refresh fetches the process's record, caches it and returns it
// (GET /v1/sandboxes/{id}/process/{pid}). Unknown → PROCESS_NOT_FOUND (ErrNotFound).
func (p *Process) Refresh(ctx context.Context) (ProcessInfo, error) {
	var reply v1.ProcessReply
	if err := p.call(ctx, request{method: http.MethodGet, path: p.path("")}, &reply); err != nil {
		return ProcessInfo{}, fmt.Errorf("get %s: %w", p.where(), err)
	}
	p.setInfo(reply.Process)
	return p.Info(), nil
}

// Kill ends the process and its whole tree: SIGTERM to every descendant, then SIGKILL to
// whatever is left after grace (rounded up to whole milliseconds, at most 60 s; a negative
// grace means the agent's default, 5 s; 0 means SIGKILL at once)
// (DELETE /v1/sandboxes/{id}/process/{pid}?graceMs=N). It returns once the process has exited,
// with its final record. Killing a process that had already ended is not an error: the record
// is returned unchanged. Unknown → PROCESS_NOT_FOUND.
func (p *Process) Kill(ctx context.Context, grace time.Duration) (ProcessInfo, error) {
	var q url.Values
	if grace >= 0 {
		q = url.Values{"graceMs": {strconv.FormatInt(millis(grace), 10)}}
	}
	var reply v1.KillProcessResult
	if err := p.call(ctx, request{method: http.MethodDelete, path: p.path(""), query: q}, &reply); err != nil {
		return ProcessInfo{}, fmt.Errorf("kill %s: %w", p.where(), err)
	}
	p.setInfo(reply.Process)
	return p.Info(), nil
}

// ProcessLogs is the output of a process held by the agent, from Process.Logs.
//
// Offsets are absolute byte offsets in each stream: Offset is the first byte still held, End
// the number of bytes written so far, Dropped (= Offset) the bytes lost from the front because
// the stream passed its log buffer. When Dropped > 0 and the output is text, the data begins
// with the agent's marker line "[hutch: N earlier bytes of stdout were dropped (log buffer B
// bytes)]\n". Pass Next() to StreamLogs to follow the output from where these logs end.
type ProcessLogs struct {
	ProcessID string
	// Stdout and Stderr are the held bytes, binary included (decoded from base64 when the agent
	// sent them so).
	Stdout, Stderr                         []byte
	StdoutOffset, StdoutEnd, StdoutDropped int64
	StderrOffset, StderrEnd, StderrDropped int64
	Status                                 ProcessStatus
	// ExitCode is nil while the process runs.
	ExitCode *int
}

// Next returns the offsets just past these logs, for StreamLogs.
func (l ProcessLogs) Next() LogOffsets {
	return LogOffsets{Stdout: l.StdoutEnd, Stderr: l.StderrEnd}
}

// Logs returns the output the agent holds for the process
// (GET /v1/sandboxes/{id}/process/{pid}/logs). Unknown → PROCESS_NOT_FOUND.
func (p *Process) Logs(ctx context.Context) (ProcessLogs, error) {
	var reply v1.ProcessLogs
	if err := p.call(ctx, request{method: http.MethodGet, path: p.path("/logs")}, &reply); err != nil {
		return ProcessLogs{}, fmt.Errorf("logs of %s: %w", p.where(), err)
	}
	logs := ProcessLogs{
		ProcessID:    reply.ProcessID,
		StdoutOffset: reply.StdoutOffset, StdoutEnd: reply.StdoutEnd, StdoutDropped: reply.StdoutDropped,
		StderrOffset: reply.StderrOffset, StderrEnd: reply.StderrEnd, StderrDropped: reply.StderrDropped,
		Status:   reply.Status,
		ExitCode: reply.ExitCode,
	}
	var err error
	if logs.Stdout, err = decodeData(reply.Stdout, reply.Encoding); err != nil {
		return ProcessLogs{}, fmt.Errorf("logs of %s: %w", p.where(), errdefs.Wrap(errdefs.CodeInternal, err, "decode stdout"))
	}
	if logs.Stderr, err = decodeData(reply.Stderr, reply.Encoding); err != nil {
		return ProcessLogs{}, fmt.Errorf("logs of %s: %w", p.where(), errdefs.Wrap(errdefs.CodeInternal, err, "decode stderr"))
	}
	return logs, nil
}

// LogMatch is the line that satisfied WaitForLog or WaitForLogText.
type LogMatch struct {
	// Line is the whole line, without its "\n" and with ANSI escape sequences removed.
	Line string
	// Match is the match and its submatches: [whole, group1, …] (just [text] for a literal).
	Match []string
	// Groups maps the pattern's named groups to their values; nil without named groups.
	Groups map[string]string
	// Stream is "stdout" or "stderr".
	Stream string
}

// WaitForLog waits until a line of the process's output matches pattern (an RE2 regular
// expression, Go regexp syntax) and returns it (POST /v1/sandboxes/{id}/process/{pid}/wait-log).
// Lines are matched whole, without "\n" and with ANSI escape sequences removed, on both stdout
// and stderr; output already held is checked first, so a line printed before the call counts.
// timeout (rounded up to whole milliseconds) bounds the wait; 0 means no limit.
//
// Errors: INVALID_PATTERN (ErrInvalidArgument) for a pattern that does not compile (checked
// before any call); PROCESS_READY_TIMEOUT (ErrDeadlineExceeded, context {timeoutMs}) when
// timeout expires; PROCESS_EXITED_BEFORE_READY (ErrFailedPrecondition, context {exitCode,
// status, processId}) when the process ends without such a line; PROCESS_NOT_FOUND.
func (p *Process) WaitForLog(ctx context.Context, pattern string, timeout time.Duration) (LogMatch, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		e := errdefs.Wrap(errdefs.CodeInvalidPattern, err, "invalid pattern").With("pattern", pattern)
		return LogMatch{}, fmt.Errorf("wait for log of %s: %w", p.where(), e)
	}
	return p.waitLog(ctx, v1.WaitLogRequest{Pattern: pattern, TimeoutMs: millis(timeout)})
}

// WaitForLogText is WaitForLog for a literal substring text instead of a pattern. An empty
// text → VALIDATION_FAILED.
func (p *Process) WaitForLogText(ctx context.Context, text string, timeout time.Duration) (LogMatch, error) {
	if text == "" {
		e := errdefs.New(errdefs.CodeInvalidArgument, "wait-log text is empty")
		return LogMatch{}, fmt.Errorf("wait for log of %s: %w", p.where(), e)
	}
	return p.waitLog(ctx, v1.WaitLogRequest{Text: text, TimeoutMs: millis(timeout)})
}

func (p *Process) waitLog(ctx context.Context, body v1.WaitLogRequest) (LogMatch, error) {
	var reply v1.WaitLogResult
	if err := p.call(ctx, request{method: http.MethodPost, path: p.path("/wait-log"), json: body}, &reply); err != nil {
		return LogMatch{}, fmt.Errorf("wait for log of %s: %w", p.where(), err)
	}
	return LogMatch{Line: reply.Line, Match: reply.Match, Groups: reply.Groups, Stream: reply.Stream}, nil
}

// Port check modes of PortWaitOptions.Mode.
const (
	PortModeHTTP = "http"
	PortModeTCP  = "tcp"
)

// PortWaitOptions are the optional parameters of WaitForPort. The zero value means an HTTP
// check of "/" accepting 200–399 every 500 ms with no time limit.
type PortWaitOptions struct {
	// Mode is "http" (default: GET http://localhost:<port><Path> must answer within 5 s with a
	// status in StatusMin–StatusMax) or "tcp" (a connection must be accepted).
	Mode string
	// Path is the HTTP path to check; empty means "/".
	Path string
	// StatusMin and StatusMax bound the accepted HTTP status, inclusive. A zero StatusMin means
	// 200; a zero StatusMax means 399, or StatusMin if that is larger.
	StatusMin, StatusMax int
	// Interval is the time between checks (rounded up to whole milliseconds; the agent clamps
	// it to 100 ms–10 s); 0 means 500 ms.
	Interval time.Duration
	// Timeout bounds the wait (rounded up to whole milliseconds); 0 means no limit.
	Timeout time.Duration
}

// PortReady is the outcome of a successful WaitForPort.
type PortReady struct {
	Port int
	// StatusCode is the HTTP status of the check that succeeded; 0 in tcp mode.
	StatusCode int
}

// WaitForPort waits until port answers inside the sandbox, checked from the sandbox itself
// (127.0.0.1, then ::1), while the process runs (POST /v1/sandboxes/{id}/process/{pid}/wait-port).
//
// Errors: INVALID_PORT (ErrInvalidArgument) for a port outside 1–65535;
// PROCESS_READY_TIMEOUT (ErrDeadlineExceeded) when opts.Timeout expires;
// PROCESS_EXITED_BEFORE_READY (ErrFailedPrecondition, context {exitCode, status, processId})
// when the process ends first; PROCESS_NOT_FOUND.
func (p *Process) WaitForPort(ctx context.Context, port int, opts PortWaitOptions) (PortReady, error) {
	body := v1.WaitPortRequest{Port: port, Mode: opts.Mode, Path: opts.Path, IntervalMs: millis(opts.Interval), TimeoutMs: millis(opts.Timeout)}
	if opts.StatusMin != 0 || opts.StatusMax != 0 {
		r := v1.StatusRange{Min: opts.StatusMin, Max: opts.StatusMax}
		if r.Min == 0 {
			r.Min = 200
		}
		if r.Max == 0 {
			r.Max = max(399, r.Min)
		}
		body.Status = &r
	}
	var reply v1.WaitPortResult
	if err := p.call(ctx, request{method: http.MethodPost, path: p.path("/wait-port"), json: body}, &reply); err != nil {
		return PortReady{}, fmt.Errorf("wait for port %d of %s: %w", port, p.where(), err)
	}
	if reply.Port == 0 {
		reply.Port = port
	}
	return PortReady{Port: reply.Port, StatusCode: reply.StatusCode}, nil
}

// ExitInfo is how a process ended, from WaitForExit.
type ExitInfo struct {
	ProcessID string
	// ExitCode follows the shell: 128+N for death by signal N.
	ExitCode int
	Status   ProcessStatus
}

// WaitForExit waits until the process has ended and returns how
// (POST /v1/sandboxes/{id}/process/{pid}/wait-exit); it returns at once for a process that
// already ended. timeout (rounded up to whole milliseconds) bounds the wait; 0 means no limit.
// Errors: PROCESS_READY_TIMEOUT (ErrDeadlineExceeded) when timeout expires; PROCESS_NOT_FOUND.
func (p *Process) WaitForExit(ctx context.Context, timeout time.Duration) (ExitInfo, error) {
	body := v1.WaitExitRequest{TimeoutMs: millis(timeout)}
	var reply v1.WaitExitResult
	if err := p.call(ctx, request{method: http.MethodPost, path: p.path("/wait-exit"), json: body}, &reply); err != nil {
		return ExitInfo{}, fmt.Errorf("wait for exit of %s: %w", p.where(), err)
	}
	if reply.ProcessID == "" {
		reply.ProcessID = p.id
	}
	code := 0
	if reply.ExitCode != nil {
		code = *reply.ExitCode
	}
	p.setExit(reply.Status, code)
	return ExitInfo{ProcessID: reply.ProcessID, ExitCode: code, Status: reply.Status}, nil
}
