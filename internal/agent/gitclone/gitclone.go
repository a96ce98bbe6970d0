// Package gitclone clones git repositories for the agent's git/checkout endpoint: it validates
// the URL, runs `git clone` in a session of its own, demoted like the sandbox's commands, with a
// timeout, and classifies failures from git's stderr into stable error codes, with credentials
// in URLs redacted. Command starts the agent's other git runs the same way.
package gitclone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// DefaultTimeout is the clone timeout when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Options describe one clone.
type Options struct {
	// URL of the repository: http, https, git, ssh or file scheme, or scp-like user@host:path.
	URL string
	// Branch to check out; empty means the remote's default branch.
	Branch string
	// Depth > 0 makes a shallow clone.
	Depth int
	// TargetDir is the absolute directory to clone into; it must be missing or empty.
	TargetDir string
	// Timeout kills git's process group when it expires (GIT_NETWORK_ERROR); 0 = DefaultTimeout.
	Timeout time.Duration
	// Env is git's environment ("KEY=value"); GIT_TERMINAL_PROMPT=0 is always added.
	Env []string
	// Dir is git's working directory.
	Dir string
	// Shim is the argv prefix git runs under (hutch-init's `shim --`, see Command); nil runs
	// git directly (tests).
	Shim []string
}

// Result is a finished clone.
type Result struct {
	// Branch is the checked-out branch.
	Branch string
}

var schemes = map[string]bool{"http": true, "https": true, "git": true, "ssh": true, "file": true}

// scpLike matches ssh's short form user@host:path.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:[^/-][^\s]*$|^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:/[^\s]*$`)

// ValidateURL accepts http, https, git, ssh and file URLs and scp-like user@host:path.
// Anything else, including an argument starting with "-", gives INVALID_GIT_URL.
func ValidateURL(raw string) error {
	bad := func(why string) error {
		return errdefs.Newf(errdefs.CodeInvalidGitURL, "invalid git URL %q: %s", Redact(raw), why).
			With("repoUrl", Redact(raw))
	}
	switch {
	case raw == "":
		return bad("empty")
	case strings.HasPrefix(raw, "-"):
		return bad("must not start with '-'")
	case strings.ContainsAny(raw, "\x00\n\r"):
		return bad("contains control characters")
	case scpLike.MatchString(raw) && !strings.Contains(raw, "://"):
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("does not parse")
	}
	if !schemes[strings.ToLower(u.Scheme)] {
		return bad("scheme must be http, https, git, ssh or file")
	}
	if u.Scheme != "file" && u.Host == "" {
		return bad("missing host")
	}
	return nil
}

// RepoName returns the directory name git would pick for url: its last path element without
// a ".git" suffix ("repo" when none can be found).
func RepoName(raw string) string {
	p := raw
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		p = u.Path
	} else if _, after, ok := strings.Cut(raw, ":"); ok {
		p = after
	}
	name := strings.TrimSuffix(path.Base(strings.TrimRight(p, "/")), ".git")
	if name == "" || name == "." || name == "/" || name == ".." {
		return "repo"
	}
	return name
}

var credentials = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// Redact replaces user:password@ in every URL of s with ***@.
func Redact(s string) string { return credentials.ReplaceAllString(s, "${1}***@") }

// Clone runs git clone as described by opts. Errors: VALIDATION_FAILED (bad branch or depth),
// INVALID_GIT_URL, GIT_TARGET_EXISTS, GIT_REPOSITORY_NOT_FOUND, GIT_BRANCH_NOT_FOUND,
// GIT_AUTH_FAILED, GIT_NETWORK_ERROR (also on timeout), GIT_CLONE_FAILED; context.stderr has
// git's redacted stderr. A failed clone removes the target directory if Clone created it.
func Clone(ctx context.Context, opts Options) (Result, error) {
	if err := ValidateURL(opts.URL); err != nil {
		return Result{}, err
	}
	if strings.HasPrefix(opts.Branch, "-") || strings.ContainsAny(opts.Branch, "\x00\n") {
		return Result{}, errdefs.Newf(errdefs.CodeInvalidArgument, "invalid branch %q", opts.Branch)
	}
	if opts.Depth < 0 {
		return Result{}, errdefs.Newf(errdefs.CodeInvalidArgument, "depth %d is negative", opts.Depth)
	}
	existed := false
	if entries, err := os.ReadDir(opts.TargetDir); err == nil {
		existed = true
		if len(entries) > 0 {
			return Result{}, errdefs.Newf(errdefs.CodeGitTargetExists, "target %s exists and is not empty", opts.TargetDir).
				With("targetDir", opts.TargetDir)
		}
	} else if _, serr := os.Lstat(opts.TargetDir); serr == nil {
		return Result{}, errdefs.Newf(errdefs.CodeGitTargetExists, "target %s exists and is not a directory", opts.TargetDir).
			With("targetDir", opts.TargetDir)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	args := []string{"clone"}
	if opts.Branch != "" {
		args = append(args, "--branch", opts.Branch)
	}
	if opts.Depth > 0 {
		args = append(args, "--depth", strconv.Itoa(opts.Depth))
	}
	args = append(args, "--", opts.URL, opts.TargetDir)

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd, err := Command(cctx, opts.Shim, args...)
	if err != nil {
		return Result{}, errdefs.Wrap(errdefs.CodeGitCloneFailed, err, "run git").With("repoUrl", Redact(opts.URL))
	}
	cmd.Dir = opts.Dir
	cmd.Env = append(append([]string{}, opts.Env...), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err != nil {
		if !existed {
			os.RemoveAll(opts.TargetDir)
		}
		msg := Redact(strings.TrimSpace(stderr.String()))
		if cctx.Err() != nil && ctx.Err() == nil {
			return Result{}, errdefs.Newf(errdefs.CodeGitNetwork, "git clone timed out after %s", timeout).
				With("stderr", msg).With("repoUrl", Redact(opts.URL))
		}
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("git clone: %w", context.Cause(ctx))
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return Result{}, errdefs.Wrap(errdefs.CodeGitCloneFailed, err, "run git").With("repoUrl", Redact(opts.URL))
		}
		code := Classify(msg)
		return Result{}, errdefs.Newf(code, "git clone %s failed: %s", Redact(opts.URL), summary(msg)).
			With("stderr", msg).With("repoUrl", Redact(opts.URL))
	}
	branch := opts.Branch
	if branch == "" {
		if cmd, err := Command(ctx, opts.Shim, "-c", "core.fsmonitor=false", "-C", opts.TargetDir, "branch", "--show-current"); err == nil {
			if out, err := cmd.Output(); err == nil {
				branch = strings.TrimSpace(string(out))
			}
		}
	}
	return Result{Branch: branch}, nil
}

// Command returns git (found in the agent's PATH) with args, to run as the sandbox's commands
// run, since git runs code of the repository and of the sandbox (hooks, filters, fsmonitor,
// credential helpers) and a large repository costs much CPU and memory:
//   - under shim, the argv prefix of hutch-init's `shim --` (nil: git directly), which
//     starts it at nice 19 and oom_score_adj 500 (reaper.CommandNice, reaper.CommandOOMScoreAdj)
//     so that it cannot starve the agent and the OOM killer picks it before the agent;
//   - in a session of its own, not only a group: a process of the agent's session could join
//     the agent's process group, which gVisor's guard does not kill;
//   - and when ctx ends, its whole process group is SIGKILLed, and Wait gives up on its
//     output 5 s later.
//
// The caller sets Dir, Env and the output. The error wraps exec.ErrNotFound when git is not
// installed.
func Command(ctx context.Context, shim []string, args ...string) (*exec.Cmd, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git: %w", err)
	}
	argv := append(append(append([]string{}, shim...), git), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// Classify maps git's stderr to an error code.
func Classify(stderr string) errdefs.Code {
	s := strings.ToLower(stderr)
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("remote branch") && has("not found"), has("could not find remote branch"):
		return errdefs.CodeGitBranchNotFound
	case has("already exists and is not an empty directory"):
		return errdefs.CodeGitTargetExists
	case has("authentication failed", "could not read username", "could not read password",
		"permission denied (publickey", "returned error: 401", "returned error: 403", "invalid username or password",
		"terminal prompts disabled"):
		return errdefs.CodeGitAuthFailed
	case has("repository not found", "does not appear to be a git repository", "not found", "returned error: 404",
		"does not exist"):
		return errdefs.CodeGitRepoNotFound
	case has("could not resolve host", "connection refused", "timed out", "network is unreachable",
		"no route to host", "connection reset", "unable to access", "could not connect", "ssl",
		"failed to connect", "temporary failure in name resolution"):
		return errdefs.CodeGitNetwork
	default:
		return errdefs.CodeGitCloneFailed
	}
}

// summary returns git's first "fatal:" or "error:" line, else its last line.
func summary(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "fatal: ") || strings.HasPrefix(l, "error: ") {
			return l
		}
	}
	if l := lines[len(lines)-1]; l != "" {
		return l
	}
	return "no output from git"
}
