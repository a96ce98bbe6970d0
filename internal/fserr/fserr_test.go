package fserr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestCodeOf(t *testing.T) {
	tests := []struct {
		err  error
		want errdefs.Code
	}{
		{&os.PathError{Op: "open", Path: "p", Err: syscall.ENOENT}, errdefs.CodeFileNotFound},
		{fs.ErrNotExist, errdefs.CodeFileNotFound},
		{syscall.EISDIR, errdefs.CodeIsDirectory},
		{syscall.ENOTDIR, errdefs.CodeNotDirectory},
		{fmt.Errorf("x: %w", syscall.EEXIST), errdefs.CodeFileExists},
		{syscall.EACCES, errdefs.CodePermission},
		{syscall.EPERM, errdefs.CodePermission},
		{syscall.ENOSPC, errdefs.CodeNoSpace},
		{syscall.EDQUOT, errdefs.CodeNoSpace},
		{syscall.EROFS, errdefs.CodeReadOnly},
		{syscall.ENAMETOOLONG, errdefs.CodeNameTooLong},
		{syscall.EBUSY, errdefs.CodeResourceBusy},
		{syscall.ENOTEMPTY, errdefs.CodeDirectoryNotEmpty},
		{syscall.EIO, errdefs.CodeFilesystem},
		{errors.New("other"), errdefs.CodeFilesystem},
	}
	for _, tt := range tests {
		if got := CodeOf(tt.err); got != tt.want {
			t.Errorf("CodeOf(%v) = %s; want %s", tt.err, got, tt.want)
		}
	}
}

func TestMap(t *testing.T) {
	already := errdefs.New(errdefs.CodeInvalidPath, "bad")
	tests := []struct {
		name string
		err  error
		code errdefs.Code // "" for nil
		same bool         // returned as is
	}{
		{"nil", nil, "", false},
		{"errno", syscall.EROFS, errdefs.CodeReadOnly, false},
		{"path error", &fs.PathError{Op: "mkdir", Path: "/y", Err: syscall.ENOSPC}, errdefs.CodeNoSpace, false},
		{"already classified", already, errdefs.CodeInvalidPath, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Map(tt.err, "/x")
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Map(nil) = %v", err)
				}
				return
			}
			var e *errdefs.Error
			if !errors.As(err, &e) || e.Code != tt.code || !errors.Is(err, tt.err) {
				t.Fatalf("Map = %#v; want code %s wrapping %v", err, tt.code, tt.err)
			}
			if tt.same {
				if err != tt.err { //nolint:errorlint // identity: the error is returned as is
					t.Errorf("Map changed an *errdefs.Error: %#v", err)
				}
				return
			}
			if e.Context["path"] != "/x" {
				t.Errorf("context.path = %v; want /x", e.Context["path"])
			}
		})
	}
}
