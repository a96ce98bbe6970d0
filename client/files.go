package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"unicode/utf8"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// File paths: absolute, or relative to the session's cwd (the default session's for a
// *Sandbox). Errors of every file operation carry stable codes: FILE_NOT_FOUND (ErrNotFound),
// IS_DIRECTORY, NOT_DIRECTORY, INVALID_PATH (ErrInvalidArgument), FILE_EXISTS
// (ErrAlreadyExists), PERMISSION_DENIED, READ_ONLY (ErrPermissionDenied), NO_SPACE,
// FILE_TOO_LARGE (ErrResourceExhausted), DIRECTORY_NOT_EMPTY, RESOURCE_BUSY (ErrConflict),
// NAME_TOO_LONG, FILESYSTEM_ERROR; the error's Context["path"] names the path.

// FileContent is a whole file read by ReadFile.
type FileContent struct {
	// Path is the file's path as the server resolved it.
	Path string
	// Content is the file's exact bytes.
	Content []byte
	// MimeType is the detected type, e.g. "text/plain; charset=utf-8" or "image/png".
	MimeType string
	// IsBinary reports whether the server classed the content as binary (not text/*, JSON,
	// XML, JavaScript, or empty).
	IsBinary bool
	// Size is the file size in bytes.
	Size int64
}

// FileMeta describes a file opened with OpenFile, from the reply headers.
type FileMeta struct {
	Path     string
	MimeType string // Content-Type
	Size     int64  // Content-Length in bytes; -1 when the server did not send it
	IsBinary bool   // X-Hutch-Binary
}

// FileType is the kind of a directory entry.
type FileType = v1.FileType

// File types.
const (
	FileTypeFile      = v1.FileTypeFile
	FileTypeDirectory = v1.FileTypeDirectory
	FileTypeSymlink   = v1.FileTypeSymlink
	FileTypeOther     = v1.FileTypeOther
)

// FileInfo is one entry of ListFiles.
type FileInfo = v1.FileInfo

// FilePermissions are what the sandbox user may do with a file.
type FilePermissions = v1.FilePermissions

// ListOptions are the parameters of ListFiles. A nil *ListOptions lists one level without
// hidden files.
type ListOptions struct {
	// Recursive lists the whole tree below the path.
	Recursive bool
	// IncludeHidden includes names that start with a dot.
	IncludeHidden bool
}

// WriteFile writes data to path, creating parent directories (POST /v1/sandboxes/{id}/write).
// The file is replaced atomically: a failed write never leaves a half file. data travels in a
// JSON body (base64 when it is not valid UTF-8), so it must stay well under the 48 MiB request
// limit (REQUEST_TOO_LARGE); use WriteFileFrom for big files.
func (s *scope) WriteFile(ctx context.Context, path string, data []byte) error {
	body := v1.WriteFileRequest{Path: path, Content: string(data), Encoding: v1.EncodingUTF8, SessionID: s.sessionID}
	if !utf8.Valid(data) {
		body.Content, body.Encoding = base64.StdEncoding.EncodeToString(data), v1.EncodingBase64
	}
	if err := s.do(ctx, http.MethodPost, "/write", body, nil); err != nil {
		return fmt.Errorf("write %s in %s: %w", path, s.where(), err)
	}
	return nil
}

// WriteFileFrom streams r to path (PUT /v1/sandboxes/{id}/files, raw body of any size) and
// returns the number of bytes written. Parents are created and the file is replaced
// atomically. r is read to EOF or until an error; if r is an io.Closer it is not closed.
func (s *scope) WriteFileFrom(ctx context.Context, path string, r io.Reader) (int64, error) {
	if err := checkID(s.sandboxID); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	resp, err := s.c.send(ctx, request{
		method:      http.MethodPut,
		path:        sandboxPath(s.sandboxID, "/files"),
		query:       s.fileQuery(path),
		body:        io.NopCloser(r),
		contentType: "application/octet-stream",
	})
	if err != nil {
		return 0, fmt.Errorf("write %s in %s: %w", path, s.where(), err)
	}
	defer resp.Body.Close()
	var reply v1.WriteFileResult
	if err := decodeJSON(resp.Body, &reply); err != nil {
		return 0, fmt.Errorf("write %s in %s: %w", path, s.where(), err)
	}
	return reply.Size, nil
}

func (s *scope) fileQuery(path string) url.Values {
	q := url.Values{"path": {path}}
	if s.sessionID != "" {
		q.Set("sessionId", s.sessionID)
	}
	return q
}

// ReadFile reads the whole file at path (POST /v1/sandboxes/{id}/read). Files over 32 MiB
// fail with FILE_TOO_LARGE (ErrResourceExhausted): use OpenFile for those.
func (s *scope) ReadFile(ctx context.Context, path string) (*FileContent, error) {
	body := v1.ReadFileRequest{Path: path, SessionID: s.sessionID}
	var reply v1.ReadFileResult
	if err := s.do(ctx, http.MethodPost, "/read", body, &reply); err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, s.where(), err)
	}
	content, err := decodeData(reply.Content, reply.Encoding)
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, s.where(), errdefs.Wrap(errdefs.CodeInternal, err, "decode content"))
	}
	return &FileContent{
		Path:     reply.Path,
		Content:  content,
		MimeType: reply.MimeType,
		IsBinary: reply.IsBinary,
		Size:     reply.Size,
	}, nil
}

// OpenFile opens the file at path for streaming (GET /v1/sandboxes/{id}/files), for files of
// any size. The caller must close the returned body. A transfer cut short shows as a read
// error (io.ErrUnexpectedEOF) from the body.
func (s *scope) OpenFile(ctx context.Context, path string) (io.ReadCloser, *FileMeta, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	resp, err := s.c.send(ctx, request{
		method: http.MethodGet,
		path:   sandboxPath(s.sandboxID, "/files"),
		query:  s.fileQuery(path),
		accept: "*/*",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s in %s: %w", path, s.where(), err)
	}
	meta := &FileMeta{
		Path:     path,
		MimeType: resp.Header.Get("Content-Type"),
		Size:     resp.ContentLength,
		IsBinary: resp.Header.Get("X-Hutch-Binary") == "true",
	}
	return resp.Body, meta, nil
}

// ListFiles lists the directory at path (POST /v1/sandboxes/{id}/list-files). opts may be nil.
// A path that is not a directory → NOT_DIRECTORY.
func (s *scope) ListFiles(ctx context.Context, path string, opts *ListOptions) ([]FileInfo, error) {
	body := v1.ListFilesRequest{Path: path, SessionID: s.sessionID}
	if opts != nil {
		body.Options = v1.ListFilesOptions{Recursive: opts.Recursive, IncludeHidden: opts.IncludeHidden}
	}
	var reply v1.ListFilesResult
	if err := s.do(ctx, http.MethodPost, "/list-files", body, &reply); err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", path, s.where(), err)
	}
	return reply.Files, nil
}

// Mkdir creates the directory path (POST /v1/sandboxes/{id}/mkdir); with recursive, parents
// are created too and an existing directory is not an error. Without recursive, an existing
// path → FILE_EXISTS (ErrAlreadyExists).
func (s *scope) Mkdir(ctx context.Context, path string, recursive bool) error {
	body := v1.MkdirRequest{Path: path, Recursive: recursive, SessionID: s.sessionID}
	if err := s.do(ctx, http.MethodPost, "/mkdir", body, nil); err != nil {
		return fmt.Errorf("mkdir %s in %s: %w", path, s.where(), err)
	}
	return nil
}

// DeleteFile deletes the file or symlink at path (POST /v1/sandboxes/{id}/delete); with
// recursive it also deletes a directory and its contents. A directory without recursive →
// IS_DIRECTORY.
func (s *scope) DeleteFile(ctx context.Context, path string, recursive bool) error {
	body := v1.DeleteFileRequest{Path: path, Recursive: recursive, SessionID: s.sessionID}
	if err := s.do(ctx, http.MethodPost, "/delete", body, nil); err != nil {
		return fmt.Errorf("delete %s in %s: %w", path, s.where(), err)
	}
	return nil
}

// RenameFile renames oldPath to newPath (POST /v1/sandboxes/{id}/rename).
func (s *scope) RenameFile(ctx context.Context, oldPath, newPath string) error {
	body := v1.RenameFileRequest{OldPath: oldPath, NewPath: newPath, SessionID: s.sessionID}
	if err := s.do(ctx, http.MethodPost, "/rename", body, nil); err != nil {
		return fmt.Errorf("rename %s to %s in %s: %w", oldPath, newPath, s.where(), err)
	}
	return nil
}

// MoveFile moves sourcePath to destinationPath (POST /v1/sandboxes/{id}/move). Like mv, moving
// onto an existing directory puts the source inside it.
func (s *scope) MoveFile(ctx context.Context, sourcePath, destinationPath string) error {
	body := v1.MoveFileRequest{SourcePath: sourcePath, DestinationPath: destinationPath, SessionID: s.sessionID}
	if err := s.do(ctx, http.MethodPost, "/move", body, nil); err != nil {
		return fmt.Errorf("move %s to %s in %s: %w", sourcePath, destinationPath, s.where(), err)
	}
	return nil
}

// Exists reports whether path exists (POST /v1/sandboxes/{id}/exists).
func (s *scope) Exists(ctx context.Context, path string) (bool, error) {
	body := v1.ExistsRequest{Path: path, SessionID: s.sessionID}
	var reply v1.ExistsResult
	if err := s.do(ctx, http.MethodPost, "/exists", body, &reply); err != nil {
		return false, fmt.Errorf("exists %s in %s: %w", path, s.where(), err)
	}
	return reply.Exists, nil
}
