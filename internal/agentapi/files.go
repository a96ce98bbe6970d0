package agentapi

import "time"

// Files (POST /api/list-files, mkdir, delete, rename, move, exists, write, read, read/stream;
// PUT /api/files replies WriteReply). A request's sessionId selects the session whose cwd
// resolves a relative path.

// ListFilesRequest is the body of list-files.
type ListFilesRequest struct {
	Path      string           `json:"path"`
	Options   ListFilesOptions `json:"options"`
	SessionID string           `json:"sessionId"`
}

// ListFilesOptions are list-files' options.
type ListFilesOptions struct {
	Recursive     bool `json:"recursive"`
	IncludeHidden bool `json:"includeHidden"`
}

// ListFilesReply is the reply of list-files.
type ListFilesReply struct {
	Success   bool       `json:"success"`
	Path      string     `json:"path"`
	Files     []FileInfo `json:"files"`
	Count     int        `json:"count"`
	Timestamp time.Time  `json:"timestamp"`
}

// FileInfo is one entry of a listing.
type FileInfo struct {
	Name         string `json:"name"`
	AbsolutePath string `json:"absolutePath"`
	// RelativePath is relative to the listed directory.
	RelativePath string `json:"relativePath"`
	// Type is file, directory, symlink or other (the entry itself; symlinks are not followed).
	Type string `json:"type"`
	// Size in bytes.
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modifiedAt"`
	// Mode is the permission bits as ls shows them, e.g. "rwxr-xr-x".
	Mode        string          `json:"mode"`
	Permissions FilePermissions `json:"permissions"`
}

// FilePermissions say what the agent's user may do with an entry.
type FilePermissions struct {
	Readable   bool `json:"readable"`
	Writable   bool `json:"writable"`
	Executable bool `json:"executable"`
}

// MkdirRequest is the body of mkdir (Recursive: like mkdir -p).
type MkdirRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
	SessionID string `json:"sessionId"`
}

// MkdirReply is the reply of mkdir.
type MkdirReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	Recursive bool      `json:"recursive"`
	Timestamp time.Time `json:"timestamp"`
}

// DeleteRequest is the body of delete (Recursive: a directory and its contents).
type DeleteRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
	SessionID string `json:"sessionId"`
}

// PathReply is the reply of delete.
type PathReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	Timestamp time.Time `json:"timestamp"`
}

// RenameRequest is the body of rename.
type RenameRequest struct {
	OldPath   string `json:"oldPath"`
	NewPath   string `json:"newPath"`
	SessionID string `json:"sessionId"`
}

// MoveRequest is the body of move.
type MoveRequest struct {
	SourcePath      string `json:"sourcePath"`
	DestinationPath string `json:"destinationPath"`
	SessionID       string `json:"sessionId"`
}

// MoveReply is the reply of rename and move: the source as resolved and where it went.
type MoveReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	NewPath   string    `json:"newPath"`
	Timestamp time.Time `json:"timestamp"`
}

// ExistsRequest is the body of exists.
type ExistsRequest struct {
	Path      string `json:"path"`
	SessionID string `json:"sessionId"`
}

// ExistsReply is the reply of exists.
type ExistsReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	Exists    bool      `json:"exists"`
	Timestamp time.Time `json:"timestamp"`
}

// WriteRequest is the body of write: Content is text, or base64 when Encoding is "base64".
type WriteRequest struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding"`
	SessionID string `json:"sessionId"`
}

// WriteReply is the reply of write and of PUT files: the path as resolved and its size.
type WriteReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	Timestamp time.Time `json:"timestamp"`
}

// ReadRequest is the body of read (Encoding "utf-8" or "base64" forces one; empty lets the
// agent choose by content).
type ReadRequest struct {
	Path      string `json:"path"`
	Encoding  string `json:"encoding"`
	SessionID string `json:"sessionId"`
}

// ReadReply is the reply of read.
type ReadReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	Content   string    `json:"content"`
	Encoding  string    `json:"encoding"`
	IsBinary  bool      `json:"isBinary"`
	MimeType  string    `json:"mimeType"`
	Size      int64     `json:"size"`
	Timestamp time.Time `json:"timestamp"`
}

// ReadStreamRequest is the body of read/stream.
type ReadStreamRequest struct {
	Path      string `json:"path"`
	SessionID string `json:"sessionId"`
}

// ReadMetadataEvent is the first event of read/stream.
type ReadMetadataEvent struct {
	Type     string `json:"type"` // "metadata"
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
	IsBinary bool   `json:"isBinary"`
	Encoding string `json:"encoding"` // of the chunks: "utf-8" or "base64"
}

// ReadChunkEvent is a "chunk" event of read/stream; Encoding "base64" marks a text chunk that
// is not valid UTF-8.
type ReadChunkEvent struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
}

// ReadCompleteEvent is the last event of a read/stream that read the whole file.
type ReadCompleteEvent struct {
	Type      string `json:"type"` // "complete"
	BytesRead int64  `json:"bytesRead"`
}
