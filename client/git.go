package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// GitCheckoutOptions are the optional parameters of GitCheckout. A nil *GitCheckoutOptions
// means all defaults.
type GitCheckoutOptions struct {
	// Branch is the branch or tag to check out; empty means the remote's default branch.
	Branch string
	// Depth > 0 makes a shallow clone of that many commits.
	Depth int
	// TargetDir is where to clone; empty means /workspace/<repository name>. A relative path
	// resolves against the session's cwd. It must not exist or be empty.
	TargetDir string
	// Timeout bounds the clone (rounded up to whole milliseconds); 0 means the server default
	// of 10 minutes. On expiry the clone fails with GIT_NETWORK_ERROR.
	Timeout time.Duration
}

// GitCheckoutResult is the outcome of a clone.
type GitCheckoutResult = v1.GitCheckoutResult

// GitCheckout clones repoURL into the sandbox (POST /v1/sandboxes/{id}/git/checkout) with
// git clone [--branch B] [--depth N] -- URL DIR. Allowed URL schemes: http, https, git, ssh,
// file.
//
// Errors: INVALID_GIT_URL (ErrInvalidArgument), GIT_REPOSITORY_NOT_FOUND and
// GIT_BRANCH_NOT_FOUND (ErrNotFound), GIT_AUTH_FAILED (ErrPermissionDenied),
// GIT_NETWORK_ERROR (ErrUnavailable; also on timeout), GIT_TARGET_EXISTS (ErrAlreadyExists),
// GIT_CLONE_FAILED; the error's Context["stderr"] holds git's message, credentials redacted.
func (s *scope) GitCheckout(ctx context.Context, repoURL string, opts *GitCheckoutOptions) (*GitCheckoutResult, error) {
	body := v1.GitCheckoutRequest{RepoURL: repoURL, SessionID: s.sessionID}
	if opts != nil {
		body.Branch, body.TargetDir, body.Depth = opts.Branch, opts.TargetDir, opts.Depth
		body.TimeoutMs = millis(opts.Timeout)
	}
	var res GitCheckoutResult
	if err := s.do(ctx, http.MethodPost, "/git/checkout", body, &res); err != nil {
		return nil, fmt.Errorf("git checkout %s in %s: %w", repoURL, s.where(), err)
	}
	return &res, nil
}
