package errdefs

import "net/http"

// Code is a stable, machine-readable error code sent on the wire. Codes never change meaning;
// new ones may be added. Names follow the reference system's table where it has one.
type Code string

// Codes. The table below gives each its class and HTTP status.
const (
	// Generic.
	CodeInternal         Code = "INTERNAL_ERROR"
	CodeInvalidArgument  Code = "VALIDATION_FAILED"
	CodeInvalidJSON      Code = "INVALID_JSON"
	CodeRequestTooLarge  Code = "REQUEST_TOO_LARGE"
	CodeNotFound         Code = "NOT_FOUND" // unknown route
	CodeMethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	CodeUnauthenticated  Code = "UNAUTHENTICATED"
	CodeUnavailable      Code = "UNAVAILABLE"
	CodeRateLimited      Code = "RATE_LIMITED" // too many requests from one client; see Retry-After
	CodeNotImplemented   Code = "NOT_IMPLEMENTED"

	// Sandboxes.
	CodeInvalidSandboxID   Code = "INVALID_SANDBOX_ID"
	CodeReservedSandboxID  Code = "RESERVED_SANDBOX_ID"
	CodeSandboxNotFound    Code = "SANDBOX_NOT_FOUND"
	CodeSandboxConflict    Code = "SANDBOX_OPTIONS_CONFLICT"
	CodeInvalidInstance    Code = "INVALID_INSTANCE_TYPE"
	CodeImageNotFound      Code = "IMAGE_NOT_FOUND"
	CodeImageBuildFailed   Code = "IMAGE_BUILD_FAILED"
	CodeSandboxStartFailed Code = "SANDBOX_START_FAILED"
	CodeAgentUnavailable   Code = "AGENT_UNAVAILABLE"
	// CodeSandboxInvalidTransition: a lifecycle move the sandbox's recorded state does not allow
	// (its state changed under the operation); context {id, from, to}. Nothing was changed.
	CodeSandboxInvalidTransition Code = "SANDBOX_INVALID_TRANSITION"
	// CodeAgentProtocol: the sandbox's agent speaks another agent protocol version than
	// hutchd (internal/agentapi.Version); context: want, got.
	CodeAgentProtocol Code = "AGENT_PROTOCOL_MISMATCH"

	// Runtimes. CodeInvalidRuntime: a runtime name hutch does not know (context:
	// runtime, known). CodeRuntimeNotAvailable: a known runtime this hutchd cannot run (e.g.
	// runsc is not installed); context: runtime, reason.
	CodeInvalidRuntime      Code = "INVALID_RUNTIME"
	CodeRuntimeNotAvailable Code = "RUNTIME_NOT_AVAILABLE"

	// Sessions.
	CodeSessionAlreadyExists Code = "SESSION_ALREADY_EXISTS"
	CodeSessionNotFound      Code = "SESSION_NOT_FOUND"
	CodeSessionDefault       Code = "SESSION_DEFAULT_UNDELETABLE"

	// Commands.
	CodeInvalidCommand   Code = "INVALID_COMMAND"
	CodeCommandFailed    Code = "COMMAND_EXECUTION_ERROR"
	CodeCommandTimeout   Code = "COMMAND_TIMEOUT"
	CodeStreamStartError Code = "STREAM_START_ERROR"
	// CodeStreamIncomplete is raised client-side (never sent by a server) when an event stream
	// ends (EOF, cut connection, cancelled context) before its terminal event.
	CodeStreamIncomplete Code = "STREAM_INCOMPLETE"

	// Files.
	CodeInvalidPath       Code = "INVALID_PATH"
	CodeFileNotFound      Code = "FILE_NOT_FOUND"
	CodeFileExists        Code = "FILE_EXISTS"
	CodeFileTooLarge      Code = "FILE_TOO_LARGE"
	CodeIsDirectory       Code = "IS_DIRECTORY"
	CodeNotDirectory      Code = "NOT_DIRECTORY"
	CodeNameTooLong       Code = "NAME_TOO_LONG"
	CodePermission        Code = "PERMISSION_DENIED"
	CodeNoSpace           Code = "NO_SPACE"
	CodeReadOnly          Code = "READ_ONLY"
	CodeResourceBusy      Code = "RESOURCE_BUSY"
	CodeDirectoryNotEmpty Code = "DIRECTORY_NOT_EMPTY"
	CodeFilesystem        Code = "FILESYSTEM_ERROR"

	// Git.
	CodeInvalidGitURL     Code = "INVALID_GIT_URL"
	CodeGitRepoNotFound   Code = "GIT_REPOSITORY_NOT_FOUND"
	CodeGitBranchNotFound Code = "GIT_BRANCH_NOT_FOUND"
	CodeGitAuthFailed     Code = "GIT_AUTH_FAILED"
	CodeGitNetwork        Code = "GIT_NETWORK_ERROR"
	CodeGitTargetExists   Code = "GIT_TARGET_EXISTS"
	CodeGitCloneFailed    Code = "GIT_CLONE_FAILED"

	// Background processes (api/agent.md "Processes").
	CodeProcessNotFound     Code = "PROCESS_NOT_FOUND"
	CodeProcessExists       Code = "PROCESS_ALREADY_EXISTS"
	CodeProcessReadyTimeout Code = "PROCESS_READY_TIMEOUT"       // a wait (log, port, exit) timed out
	CodeProcessExitedEarly  Code = "PROCESS_EXITED_BEFORE_READY" // context: exitCode, status
	CodeInvalidPattern      Code = "INVALID_PATTERN"             // a waitForLog regex that does not compile

	// Ports and preview URLs.
	CodeInvalidPort          Code = "INVALID_PORT"         // out of range (1024–65535) or reserved
	CodeInvalidToken         Code = "INVALID_TOKEN"        // a preview URL that does not route: bad token, unexposed port, unknown sandbox (404, as the reference)
	CodeBadPortToken         Code = "INVALID_PORT_TOKEN"   // a custom token at expose time that breaks the rules (1–16 of [a-z0-9_])
	CodeTokenInUse           Code = "PORT_TOKEN_IN_USE"    // the token already serves another port of the sandbox
	CodePortAlreadyExposed   Code = "PORT_ALREADY_EXPOSED" // exposed before with another token or name
	CodePortNotExposed       Code = "PORT_NOT_EXPOSED"
	CodeServiceNotResponding Code = "SERVICE_NOT_RESPONDING" // preview: nothing answers on the port in the sandbox

	// Egress (sandbox → world traffic through hutchd's proxy).
	CodeEgressDenied        Code = "EGRESS_DENIED"          // destination refused by policy or the address floor
	CodeEgressUpstream      Code = "EGRESS_UPSTREAM_FAILED" // allowed destination could not be reached
	CodeEgressPolicyInvalid Code = "EGRESS_POLICY_INVALID"  // a policy (Spec) that breaks the rules; context {pointer} is the JSON pointer of the bad field

	// Egress credentials (secrets, interception, placeholders, handlers).
	CodeSecretNotFound             Code = "SECRET_NOT_FOUND"             // unknown secret name
	CodeInvalidSecret              Code = "INVALID_SECRET"               // bad secret name or value; context {name?}
	CodeSecretInUse                Code = "SECRET_IN_USE"                // delete refused: sandbox policies use it; context {usedBy}
	CodeEgressPlaceholderViolation Code = "EGRESS_PLACEHOLDER_VIOLATION" // a placeholder sent where its secret may not go
	CodeEgressMisdirected          Code = "EGRESS_MISDIRECTED_REQUEST"   // Host differs from the TLS SNI of an intercepted connection (421)
	CodeEgressHandlerUnavailable   Code = "EGRESS_HANDLER_UNAVAILABLE"   // an operator handler could not be reached (502)
	CodeEgressHandlerTimeout       Code = "EGRESS_HANDLER_TIMEOUT"       // an operator handler sent no response headers in time (504)
	// CodeEgressUnredactable: a response that must be redacted (a secret was injected or
	// swapped into the request) arrived in a content encoding the proxy cannot decode and scan
	// (502; nothing of the body is sent).
	CodeEgressUnredactable Code = "EGRESS_RESPONSE_UNREDACTABLE"

	// Blob store (internal/blob: backups, snapshot layers).
	CodeBlobNotFound Code = "BLOB_NOT_FOUND" // no blob under the key

	// Backups (directory archives in the blob store).
	CodeBackupNotFound      Code = "BACKUP_NOT_FOUND"      // unknown backup ID
	CodeBackupExpired       Code = "BACKUP_EXPIRED"        // the backup's expiresAt has passed
	CodeInvalidBackupConfig Code = "INVALID_BACKUP_CONFIG" // bad dir, name, ttl or excludes
	CodeBackupCreateFailed  Code = "BACKUP_CREATE_FAILED"
	CodeBackupRestoreFailed Code = "BACKUP_RESTORE_FAILED"

	// Snapshots and forks (whole-disk layers in the blob store).
	CodeSnapshotNotFound Code = "SNAPSHOT_NOT_FOUND" // unknown snapshot ID or missing layer
	CodeSnapshotFailed   Code = "SNAPSHOT_FAILED"    // capture, upload or layer extraction failed
	CodeSnapshotTooDeep  Code = "SNAPSHOT_TOO_DEEP"  // the sandbox already has the most layers a disk may have
	// CodeSnapshotFrozenTooLong: the capture of a running sandbox did not finish within the
	// frozen-time bound (hutchd's snapshotMaxFrozen) and was abandoned; the sandbox was thawed
	// and runs on. Context {maxFrozen}.
	CodeSnapshotFrozenTooLong Code = "SNAPSHOT_FROZEN_TOO_LONG"
	// CodeSnapshotQuota: the sandbox's snapshots would hold more of the blob store than its
	// quota (hutchd's snapshotQuotaBytes), even after evicting its older sleep snapshots.
	// Context {quotaBytes, usedBytes, layerBytes}.
	CodeSnapshotQuota Code = "SNAPSHOT_QUOTA_EXCEEDED"
	CodeSandboxExists Code = "SANDBOX_ALREADY_EXISTS" // a fork's target ID is taken

	// Terminals (PTY shells over WebSocket) and browser access.
	CodeTerminalNotFound Code = "TERMINAL_NOT_FOUND" // unknown terminal ID
	CodeOriginNotAllowed Code = "ORIGIN_NOT_ALLOWED" // a WebSocket upgrade from another site's page

	// File watching.
	CodeWatchLimit Code = "WATCH_LIMIT_EXCEEDED" // too many watches or watched directories, or the kernel's inotify limits; context {limit, max?}

	// Code interpreter contexts.
	CodeInvalidLanguage    Code = "INVALID_LANGUAGE"          // a language with no interpreter; context {language, languages}
	CodeContextNotFound    Code = "CONTEXT_NOT_FOUND"         // unknown code context ID
	CodeContextLimit       Code = "CONTEXT_LIMIT_EXCEEDED"    // too many code contexts in the sandbox; context {max}
	CodeInterpreterMissing Code = "INTERPRETER_NOT_AVAILABLE" // the language's interpreter is missing from the image or failed to start
	// CodeInterpreterStartTimeout: the interpreter exists but did not become ready in time
	// (an overloaded sandbox); retrying later may work. Context {interpreter, timeout}.
	CodeInterpreterStartTimeout Code = "INTERPRETER_START_TIMEOUT"
)

type codeInfo struct {
	class  error
	status int
}

// codes is the one place where a code gets its class and HTTP status.
var codes = map[Code]codeInfo{
	CodeInternal:         {ErrInternal, http.StatusInternalServerError},
	CodeInvalidArgument:  {ErrInvalidArgument, http.StatusBadRequest},
	CodeInvalidJSON:      {ErrInvalidArgument, http.StatusBadRequest},
	CodeRequestTooLarge:  {ErrResourceExhausted, http.StatusRequestEntityTooLarge},
	CodeNotFound:         {ErrNotFound, http.StatusNotFound},
	CodeMethodNotAllowed: {ErrInvalidArgument, http.StatusMethodNotAllowed},
	CodeUnauthenticated:  {ErrUnauthenticated, http.StatusUnauthorized},
	CodeUnavailable:      {ErrUnavailable, http.StatusServiceUnavailable},
	CodeNotImplemented:   {ErrNotImplemented, http.StatusNotImplemented},

	CodeInvalidSandboxID:   {ErrInvalidArgument, http.StatusBadRequest},
	CodeReservedSandboxID:  {ErrInvalidArgument, http.StatusBadRequest},
	CodeSandboxNotFound:    {ErrNotFound, http.StatusNotFound},
	CodeSandboxConflict:    {ErrConflict, http.StatusConflict},
	CodeInvalidInstance:    {ErrInvalidArgument, http.StatusBadRequest},
	CodeImageNotFound:      {ErrNotFound, http.StatusNotFound},
	CodeImageBuildFailed:   {ErrInternal, http.StatusInternalServerError},
	CodeSandboxStartFailed: {ErrUnavailable, http.StatusServiceUnavailable},
	CodeAgentUnavailable:   {ErrUnavailable, http.StatusServiceUnavailable},
	CodeAgentProtocol:      {ErrFailedPrecondition, http.StatusServiceUnavailable},

	CodeSandboxInvalidTransition: {ErrConflict, http.StatusConflict},

	CodeInvalidRuntime:      {ErrInvalidArgument, http.StatusBadRequest},
	CodeRuntimeNotAvailable: {ErrFailedPrecondition, http.StatusServiceUnavailable},

	CodeSessionAlreadyExists: {ErrAlreadyExists, http.StatusConflict},
	CodeSessionNotFound:      {ErrNotFound, http.StatusNotFound},
	CodeSessionDefault:       {ErrFailedPrecondition, http.StatusBadRequest},

	CodeInvalidCommand:   {ErrInvalidArgument, http.StatusBadRequest},
	CodeCommandFailed:    {ErrInternal, http.StatusInternalServerError},
	CodeCommandTimeout:   {ErrDeadlineExceeded, http.StatusRequestTimeout},
	CodeStreamStartError: {ErrInternal, http.StatusInternalServerError},
	CodeStreamIncomplete: {ErrUnavailable, http.StatusBadGateway},

	CodeInvalidPath:       {ErrInvalidArgument, http.StatusBadRequest},
	CodeFileNotFound:      {ErrNotFound, http.StatusNotFound},
	CodeFileExists:        {ErrAlreadyExists, http.StatusConflict},
	CodeFileTooLarge:      {ErrResourceExhausted, http.StatusRequestEntityTooLarge},
	CodeIsDirectory:       {ErrInvalidArgument, http.StatusBadRequest},
	CodeNotDirectory:      {ErrInvalidArgument, http.StatusBadRequest},
	CodeNameTooLong:       {ErrInvalidArgument, http.StatusBadRequest},
	CodePermission:        {ErrPermissionDenied, http.StatusForbidden},
	CodeNoSpace:           {ErrResourceExhausted, http.StatusInsufficientStorage},
	CodeReadOnly:          {ErrPermissionDenied, http.StatusForbidden},
	CodeResourceBusy:      {ErrConflict, http.StatusConflict},
	CodeDirectoryNotEmpty: {ErrConflict, http.StatusConflict},
	CodeFilesystem:        {ErrInternal, http.StatusInternalServerError},

	CodeInvalidGitURL:     {ErrInvalidArgument, http.StatusBadRequest},
	CodeGitRepoNotFound:   {ErrNotFound, http.StatusNotFound},
	CodeGitBranchNotFound: {ErrNotFound, http.StatusNotFound},
	CodeGitAuthFailed:     {ErrPermissionDenied, http.StatusUnauthorized},
	CodeGitNetwork:        {ErrUnavailable, http.StatusBadGateway},
	CodeGitTargetExists:   {ErrAlreadyExists, http.StatusConflict},
	CodeGitCloneFailed:    {ErrInternal, http.StatusInternalServerError},

	CodeInvalidLanguage:         {ErrInvalidArgument, http.StatusBadRequest},
	CodeContextNotFound:         {ErrNotFound, http.StatusNotFound},
	CodeContextLimit:            {ErrResourceExhausted, http.StatusTooManyRequests},
	CodeInterpreterMissing:      {ErrUnavailable, http.StatusServiceUnavailable},
	CodeInterpreterStartTimeout: {ErrUnavailable, http.StatusServiceUnavailable},

	CodeProcessNotFound:     {ErrNotFound, http.StatusNotFound},
	CodeProcessExists:       {ErrAlreadyExists, http.StatusConflict},
	CodeProcessReadyTimeout: {ErrDeadlineExceeded, http.StatusRequestTimeout},
	CodeProcessExitedEarly:  {ErrFailedPrecondition, http.StatusConflict},
	CodeInvalidPattern:      {ErrInvalidArgument, http.StatusBadRequest},

	CodeInvalidPort:          {ErrInvalidArgument, http.StatusBadRequest},
	CodeInvalidToken:         {ErrNotFound, http.StatusNotFound},
	CodeBadPortToken:         {ErrInvalidArgument, http.StatusBadRequest},
	CodeTokenInUse:           {ErrConflict, http.StatusConflict},
	CodePortAlreadyExposed:   {ErrConflict, http.StatusConflict},
	CodePortNotExposed:       {ErrNotFound, http.StatusNotFound},
	CodeServiceNotResponding: {ErrUnavailable, http.StatusBadGateway},

	CodeEgressDenied:        {ErrPermissionDenied, http.StatusForbidden},
	CodeEgressUpstream:      {ErrUnavailable, http.StatusBadGateway},
	CodeEgressPolicyInvalid: {ErrInvalidArgument, http.StatusBadRequest},

	CodeSecretNotFound:             {ErrNotFound, http.StatusNotFound},
	CodeInvalidSecret:              {ErrInvalidArgument, http.StatusBadRequest},
	CodeSecretInUse:                {ErrConflict, http.StatusConflict},
	CodeEgressPlaceholderViolation: {ErrPermissionDenied, http.StatusForbidden},
	CodeEgressMisdirected:          {ErrInvalidArgument, http.StatusMisdirectedRequest},
	CodeEgressHandlerUnavailable:   {ErrUnavailable, http.StatusBadGateway},
	CodeEgressHandlerTimeout:       {ErrDeadlineExceeded, http.StatusGatewayTimeout},
	CodeEgressUnredactable:         {ErrUnavailable, http.StatusBadGateway},

	CodeBlobNotFound: {ErrNotFound, http.StatusNotFound},

	CodeBackupNotFound:      {ErrNotFound, http.StatusNotFound},
	CodeBackupExpired:       {ErrFailedPrecondition, http.StatusBadRequest},
	CodeInvalidBackupConfig: {ErrInvalidArgument, http.StatusBadRequest},
	CodeBackupCreateFailed:  {ErrInternal, http.StatusInternalServerError},
	CodeBackupRestoreFailed: {ErrInternal, http.StatusInternalServerError},

	CodeSnapshotNotFound:      {ErrNotFound, http.StatusNotFound},
	CodeSnapshotFailed:        {ErrInternal, http.StatusInternalServerError},
	CodeSnapshotTooDeep:       {ErrFailedPrecondition, http.StatusConflict},
	CodeSnapshotFrozenTooLong: {ErrFailedPrecondition, http.StatusConflict},
	CodeSnapshotQuota:         {ErrFailedPrecondition, http.StatusInsufficientStorage},
	CodeSandboxExists:         {ErrAlreadyExists, http.StatusConflict},

	CodeTerminalNotFound: {ErrNotFound, http.StatusNotFound},
	CodeOriginNotAllowed: {ErrPermissionDenied, http.StatusForbidden},

	CodeWatchLimit: {ErrResourceExhausted, http.StatusTooManyRequests},

	CodeRateLimited: {ErrResourceExhausted, http.StatusTooManyRequests},
}

// classDefaults gives the code used for a bare class sentinel, in match order.
var classDefaults = []struct {
	class error
	code  Code
}{
	{ErrInvalidArgument, CodeInvalidArgument},
	{ErrNotFound, CodeNotFound},
	{ErrUnauthenticated, CodeUnauthenticated},
	{ErrUnavailable, CodeUnavailable},
	{ErrNotImplemented, CodeNotImplemented},
	{ErrResourceExhausted, CodeRequestTooLarge},
	{ErrDeadlineExceeded, CodeCommandTimeout},
}

// Class returns the class sentinel of c; unknown codes are ErrInternal.
func (c Code) Class() error {
	if info, ok := codes[c]; ok {
		return info.class
	}
	return ErrInternal
}

// HTTPStatus returns the HTTP status of c; unknown codes are 500.
func (c Code) HTTPStatus() int {
	if info, ok := codes[c]; ok {
		return info.status
	}
	return http.StatusInternalServerError
}

// Known reports whether c is a code of this build.
func (c Code) Known() bool { _, ok := codes[c]; return ok }

func classForStatus(status int) error {
	switch {
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusUnauthorized:
		return ErrUnauthenticated
	case status == http.StatusForbidden:
		return ErrPermissionDenied
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusRequestTimeout:
		return ErrDeadlineExceeded
	case status == http.StatusRequestEntityTooLarge:
		return ErrResourceExhausted
	case status == http.StatusGone:
		return ErrGone
	case status == http.StatusNotImplemented:
		return ErrNotImplemented
	case status == http.StatusServiceUnavailable, status == http.StatusBadGateway:
		return ErrUnavailable
	case status >= 400 && status < 500:
		return ErrInvalidArgument
	default:
		return ErrInternal
	}
}
