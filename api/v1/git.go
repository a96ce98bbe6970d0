package v1

// GitCheckoutRequest is the body of POST git/checkout: clone RepoURL (https, or git@ for SSH
// remotes) into TargetDir, as the reference system's gitCheckout(). Errors: 400
// INVALID_GIT_URL; 404 GIT_REPOSITORY_NOT_FOUND, GIT_BRANCH_NOT_FOUND; 401 GIT_AUTH_FAILED;
// 409 GIT_TARGET_EXISTS; 502 GIT_NETWORK_ERROR; 500 GIT_CLONE_FAILED; 408 COMMAND_TIMEOUT.
type GitCheckoutRequest struct {
	RepoURL string `json:"repoUrl"`
	// Branch is the branch to check out; empty: the remote's default.
	Branch string `json:"branch,omitempty"`
	// TargetDir is where to clone; empty: the repository's name in the session's cwd.
	TargetDir string `json:"targetDir,omitempty"`
	// Depth > 0 makes a shallow clone.
	Depth     int    `json:"depth,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// GitCheckoutResult is the outcome of git/checkout: the branch checked out and the clone's
// absolute path.
type GitCheckoutResult struct {
	RepoURL   string `json:"repoUrl"`
	Branch    string `json:"branch"`
	TargetDir string `json:"targetDir"`
}

// GitCheckoutReply is the reply of git/checkout.
type GitCheckoutReply struct {
	Reply
	GitCheckoutResult
}
