package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Files: paths are absolute or relative to the session's cwd, 1–4096 bytes, no NUL. Errors of
// every file route carry context.path: 400 INVALID_PATH, IS_DIRECTORY, NOT_DIRECTORY,
// NAME_TOO_LONG; 403 PERMISSION_DENIED, READ_ONLY; 404 FILE_NOT_FOUND; 409 FILE_EXISTS,
// DIRECTORY_NOT_EMPTY, RESOURCE_BUSY; 413 FILE_TOO_LARGE; 507 NO_SPACE; 500 FILESYSTEM_ERROR.
// Upload (PUT files) and download (GET files) stream raw bytes and are not JSON.

// File content encodings (WriteFileRequest.Encoding, ReadFileResult.Encoding).
const (
	EncodingUTF8 = "utf-8"
	// EncodingBase64 (exec.go) is the other.
)

// WriteFileRequest is the body of POST write: the file is replaced atomically, parent
// directories are created. Content is text, or base64 when Encoding is "base64".
type WriteFileRequest struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding"`
	SessionID string `json:"sessionId,omitempty"`
}

// WriteFileResult is the reply of write and of PUT files: the path as resolved and its size in
// bytes.
type WriteFileResult struct {
	Reply
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// ReadFileRequest is the body of POST read and read/stream. Files over 32 MiB fail read with
// FILE_TOO_LARGE; read/stream and GET files have no limit.
type ReadFileRequest struct {
	Path string `json:"path"`
	// Encoding forces "utf-8" or "base64"; empty lets the server choose by content.
	Encoding  string `json:"encoding,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// ReadFileResult is the reply of read. IsBinary: not text/*, JSON, XML, JavaScript or empty;
// then Content is base64.
type ReadFileResult struct {
	Reply
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	IsBinary bool   `json:"isBinary"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
}

// FileStreamEvent is one SSE frame of read/stream, as the reference system's readFileStream:
// "metadata" {mimeType, size, isBinary, encoding}, then "chunk" {data} frames of at most
// 65,535 source bytes (base64 when binary), then "complete" {bytesRead}, or an "error" frame
// {code, error, timestamp} (StreamError).
type FileStreamEvent struct {
	Type      string         `json:"type"`
	MimeType  string         `json:"mimeType,omitempty"`
	Size      int64          `json:"size,omitempty"`
	IsBinary  bool           `json:"isBinary,omitempty"`
	Encoding  string         `json:"encoding,omitempty"`
	Data      string         `json:"data,omitempty"`
	BytesRead int64          `json:"bytesRead,omitempty"`
	Code      errdefs.Code   `json:"code,omitempty"`
	Error     string         `json:"error,omitempty"`
	Context   map[string]any `json:"context,omitempty"`
	Timestamp time.Time      `json:"timestamp,omitzero"`
}

// ListFilesRequest is the body of POST list-files.
type ListFilesRequest struct {
	Path      string           `json:"path"`
	Options   ListFilesOptions `json:"options"`
	SessionID string           `json:"sessionId,omitempty"`
}

// ListFilesOptions: Recursive lists the whole tree; IncludeHidden lists dot files too.
type ListFilesOptions struct {
	Recursive     bool `json:"recursive"`
	IncludeHidden bool `json:"includeHidden"`
}

// ListFilesResult is the reply of list-files.
type ListFilesResult struct {
	Reply
	Path  string     `json:"path"`
	Files []FileInfo `json:"files"`
	Count int        `json:"count"`
}

// FileType is the kind of a directory entry.
type FileType string

// File types.
const (
	FileTypeFile      FileType = "file"
	FileTypeDirectory FileType = "directory"
	FileTypeSymlink   FileType = "symlink"
	FileTypeOther     FileType = "other"
)

// FileInfo is one entry of list-files.
type FileInfo struct {
	Name         string `json:"name"`
	AbsolutePath string `json:"absolutePath"`
	// RelativePath is relative to the listed directory.
	RelativePath string    `json:"relativePath"`
	Type         FileType  `json:"type"`
	Size         int64     `json:"size"` // bytes
	ModifiedAt   time.Time `json:"modifiedAt"`
	// Mode is the permission bits as in ls -l ("rwxr-xr-x").
	Mode string `json:"mode"`
	// Permissions is what the sandbox user may do with it.
	Permissions FilePermissions `json:"permissions"`
}

// FilePermissions is what the sandbox user may do with a file.
type FilePermissions struct {
	Readable   bool `json:"readable"`
	Writable   bool `json:"writable"`
	Executable bool `json:"executable"`
}

// MkdirRequest is the body of POST mkdir (Recursive: like mkdir -p), and DeleteFileRequest of
// POST delete (Recursive: a directory and its contents). Both reply PathResult.
type MkdirRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
	SessionID string `json:"sessionId,omitempty"`
}

// DeleteFileRequest is the body of POST delete.
type DeleteFileRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
	SessionID string `json:"sessionId,omitempty"`
}

// PathResult is the reply of mkdir and delete (with recursive) and, with NewPath, of rename
// and move.
type PathResult struct {
	Reply
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	NewPath   string `json:"newPath,omitempty"`
}

// RenameFileRequest is the body of POST rename.
type RenameFileRequest struct {
	OldPath   string `json:"oldPath"`
	NewPath   string `json:"newPath"`
	SessionID string `json:"sessionId,omitempty"`
}

// MoveFileRequest is the body of POST move.
type MoveFileRequest struct {
	SourcePath      string `json:"sourcePath"`
	DestinationPath string `json:"destinationPath"`
	SessionID       string `json:"sessionId,omitempty"`
}

// ExistsRequest is the body of POST exists, and ExistsResult its reply.
type ExistsRequest struct {
	Path      string `json:"path"`
	SessionID string `json:"sessionId,omitempty"`
}

// ExistsResult is the reply of exists.
type ExistsResult struct {
	Reply
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
}
