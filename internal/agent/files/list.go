package files

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
)

// Info is one entry of a listing.
type Info struct {
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
	Mode        string      `json:"mode"`
	Permissions Permissions `json:"permissions"`
}

// Permissions say what the agent's user may do with an entry.
type Permissions struct {
	Readable   bool `json:"readable"`
	Writable   bool `json:"writable"`
	Executable bool `json:"executable"`
}

// ListOptions select what List returns.
type ListOptions struct {
	// Recursive descends into subdirectories (symlinked directories are not followed).
	Recursive bool
	// IncludeHidden includes names starting with "." (and descends into hidden directories).
	IncludeHidden bool
}

// List returns the entries of directory dir in lexical order (depth-first when recursive).
// Errors: NOT_DIRECTORY when dir is not a directory, and the mapped OS codes.
func List(dir string, opts ListOptions) ([]Info, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fserr.Map(err, dir)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fserr.Map(err, dir)
	}
	if !fi.IsDir() {
		return nil, errdefs.Newf(errdefs.CodeNotDirectory, "%s is not a directory", dir).With("path", dir)
	}
	out := []Info{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p == root {
			return err
		}
		if err != nil {
			return err
		}
		hidden := strings.HasPrefix(d.Name(), ".")
		if hidden && !opts.IncludeHidden {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // vanished meanwhile
		}
		rel, _ := filepath.Rel(root, p)
		abs := filepath.Join(dir, rel)
		out = append(out, Info{
			Name:         d.Name(),
			AbsolutePath: abs,
			RelativePath: rel,
			Type:         typeOf(info.Mode()),
			Size:         info.Size(),
			ModifiedAt:   info.ModTime().UTC(),
			Mode:         info.Mode().Perm().String()[1:],
			Permissions: Permissions{
				Readable:   unix.Access(p, unix.R_OK) == nil,
				Writable:   unix.Access(p, unix.W_OK) == nil,
				Executable: unix.Access(p, unix.X_OK) == nil,
			},
		})
		if d.IsDir() && !opts.Recursive {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fserr.Map(err, dir)
	}
	return out, nil
}

func typeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "other"
	}
}
