package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
)

// The work directory of one Extract is WORKDIR/.hutch-restore-<base>-<random>/ (WORKDIR is the
// target's parent, or the target itself when it is a mount point) and holds:
//   - stateName: a marker written by Extract: its first line is markerMagic, its second the
//     work directory's own path, its third the phase (statePhase*);
//   - "new": the extracted tree;
//   - "old": the target's previous content, once the swap has moved it.
//
// Only a work directory whose marker says it is Extract's own and whose phase proves it holds
// no user data is removed by a later Extract (removeStale): "extracting" (the old content was
// never touched) and "done" (the swap succeeded: "old" is content the restore replaced). A
// "swapping" one may hold the only copy of the target's previous content and is left alone.
const (
	tmpPrefix   = ".hutch-restore-"
	stateName   = ".hutch-extract"
	markerMagic = "hutch-extract-work v1"

	phaseExtracting = "extracting"
	phaseSwapping   = "swapping"
	phaseDone       = "done"
)

// afterMoveOut, when set (tests only), runs in swapEntries once dir's entries are out: it plays
// a process that writes into dir during the swap.
var afterMoveOut func(dir string)

// work is the work directory of one Extract.
type work struct{ path string }

func (w work) newTree() string { return filepath.Join(w.path, "new") }
func (w work) oldTree() string { return filepath.Join(w.path, "old") }

// newWork makes a work directory in workDir for the target named base, in phase extracting,
// with an empty "new" directory.
func newWork(workDir, base string) (work, error) {
	p, err := os.MkdirTemp(workDir, tmpPrefix+base+"-")
	if err != nil {
		return work{}, err
	}
	w := work{p}
	if err := w.setPhase(phaseExtracting); err != nil {
		os.RemoveAll(p)
		return work{}, err
	}
	if err := os.Mkdir(w.newTree(), 0o700); err != nil {
		os.RemoveAll(p)
		return work{}, err
	}
	return w, nil
}

// setPhase records the phase in the marker (written aside and renamed over it, so the marker
// is always complete).
func (w work) setPhase(phase string) error {
	tmp := filepath.Join(w.path, stateName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\n%s\n%s\n", markerMagic, w.path, phase)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(w.path, stateName))
	}
	return err
}

// phaseOf returns the phase in the marker of directory p when p is a work directory of
// Extract's own (its marker names p), and ok false otherwise.
func phaseOf(p string) (phase string, ok bool) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return "", false
	}
	f, err := os.OpenFile(filepath.Join(p, stateName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b := make([]byte, 4096+len(markerMagic)+64)
	n, _ := f.Read(b)
	lines := bytes.Split(bytes.TrimSuffix(b[:n], []byte("\n")), []byte("\n"))
	if len(lines) != 3 || string(lines[0]) != markerMagic || string(lines[1]) != p {
		return "", false
	}
	return string(lines[2]), true
}

// disposable reports whether the directory p is a work directory of Extract's own that holds
// no user data (phase extracting or done).
func disposable(p string) bool {
	phase, ok := phaseOf(p)
	return ok && (phase == phaseExtracting || phase == phaseDone)
}

// removeStale removes the work directories an interrupted Extract into base left in workDir,
// when they are provably disposable (see disposable). Anything else with a similar name is
// left alone.
func removeStale(workDir, base string) {
	cands, _ := filepath.Glob(filepath.Join(workDir, tmpPrefix+base+"-*"))
	for _, p := range cands {
		if disposable(p) {
			os.RemoveAll(p)
		}
	}
}

// swap makes dir hold the tree in w's "new" (see Extract). inside: w is inside dir (dir is a
// mount point). root are the attributes of the archive's top entry, applied to dir. On error
// dir is as it was and w is removed, unless moving the old content back failed: then w is kept
// and named in the error's context ("kept").
func (w work) swap(dir string, inside bool, root dirAttr, chown bool) error {
	x := &extractor{ctx: context.Background(), dir: dir, chown: chown} //nolint:forbidigo // the swap moves local trees only and must not stop half-way
	tmp, old := w.newTree(), w.oldTree()
	if !inside {
		if err := x.apply(tmp, root); err != nil {
			os.RemoveAll(w.path)
			return err
		}
		if err := w.setPhase(phaseSwapping); err != nil {
			os.RemoveAll(w.path)
			return fserr.Map(err, w.path)
		}
		err := os.Rename(dir, old)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(tmp, dir); err != nil {
				os.RemoveAll(w.path)
				return fserr.Map(err, dir)
			}
			w.finish()
			return nil
		case err == nil:
			if err := os.Rename(tmp, dir); err != nil {
				if rerr := os.Rename(old, dir); rerr != nil {
					return w.kept(fserr.Map(err, dir), fmt.Errorf("put %s back: %w", dir, rerr))
				}
				os.RemoveAll(w.path)
				return fserr.Map(err, dir)
			}
			w.finish()
			return nil
		case !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EBUSY):
			os.RemoveAll(w.path)
			return fserr.Map(err, dir)
		}
	} else if err := w.setPhase(phaseSwapping); err != nil {
		os.RemoveAll(w.path)
		return fserr.Map(err, w.path)
	}
	return w.swapEntries(x, dir, root)
}

// swapEntries is the swap that keeps dir itself: its entries are moved into "old", the new
// ones in, then root's attributes applied. On failure everything is moved back.
func (w work) swapEntries(x *extractor, dir string, root dirAttr) error {
	tmp, old := w.newTree(), w.oldTree()
	var orig unix.Stat_t
	if err := unix.Lstat(dir, &orig); err != nil {
		os.RemoveAll(w.path)
		return fserr.Map(err, dir)
	}
	if err := os.Mkdir(old, 0o700); err != nil {
		os.RemoveAll(w.path)
		return fserr.Map(err, dir)
	}
	var out, in []string // names moved out of dir into old, and from tmp into dir
	fail := func(err error) error { return w.rollback(dir, &orig, out, in, err) }

	names, err := readPathNames(dir)
	if err != nil {
		return fail(fserr.Map(err, dir))
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if p == w.path {
			continue
		}
		if _, ok := phaseOf(p); ok && strings.HasPrefix(n, tmpPrefix) {
			continue // a kept work directory (dir is a mount point): not part of the content
		}
		if err := moveTree(p, filepath.Join(old, n)); err != nil {
			out = append(out, n) // a partial tree move is undone by moving it back
			return fail(fserr.Map(err, p))
		}
		out = append(out, n)
	}
	if afterMoveOut != nil {
		afterMoveOut(dir)
	}
	names, err = readPathNames(tmp)
	if err != nil {
		return fail(fserr.Map(err, dir))
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := renameNoReplace(filepath.Join(tmp, n), p); err != nil {
			// EEXIST: something created p in dir since the old entries were moved out.
			return fail(fserr.Map(err, p))
		}
		in = append(in, n)
	}
	if err := x.apply(dir, root); err != nil {
		return fail(err)
	}
	w.finish()
	return nil
}

// rollback undoes a failed swapEntries: the new entries (in) go back to "new", the old ones
// (out) back into dir, and dir's mode, owner and times are restored. It returns cause, with
// the work directory kept and named in the context when an old entry could not be put back.
func (w work) rollback(dir string, orig *unix.Stat_t, out, in []string, cause error) error {
	tmp, old := w.newTree(), w.oldTree()
	for i := len(in) - 1; i >= 0; i-- {
		// Failing to take a new entry out is not data loss; the old entry's return below
		// reports the conflict if there is one.
		_ = moveTree(filepath.Join(dir, in[i]), filepath.Join(tmp, in[i]))
	}
	var errs []error
	for _, n := range out {
		src := filepath.Join(old, n)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue // the move failed before anything of it was moved
		}
		if err := moveTree(src, filepath.Join(dir, n)); err != nil {
			errs = append(errs, fmt.Errorf("put back %s: %w", n, err))
		}
	}
	_ = unix.Lchown(dir, int(orig.Uid), int(orig.Gid))
	_ = unix.Fchmodat(unix.AT_FDCWD, dir, orig.Mode&0o7777, 0)
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, dir, []unix.Timespec{orig.Atim, orig.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	if len(errs) > 0 {
		return w.kept(cause, errors.Join(errs...))
	}
	os.RemoveAll(w.path)
	return cause
}

// kept reports a swap that failed and could not be fully undone: the work directory stays
// (its "old" holds what could not be put back) and is named in the context.
func (w work) kept(cause, undo error) error {
	var ee *errdefs.Error
	if !errors.As(cause, &ee) {
		ee = errdefs.Wrap(errdefs.CodeInternal, cause, "extract: swap failed")
	}
	e := &errdefs.Error{Code: ee.Code, Err: errors.Join(cause, undo),
		Message: fmt.Sprintf("%s; undoing the swap failed too (%v): the previous content that could not be put back is kept in %s",
			ee.Message, undo, w.oldTree())}
	for k, v := range ee.Context {
		e = e.With(k, v)
	}
	return e.With("kept", w.oldTree())
}

// finish removes the work directory of a successful swap. The phase goes to done first, so a
// removal cut short leaves something removeStale may remove.
func (w work) finish() {
	if w.setPhase(phaseDone) != nil {
		return // keep it: without the done marker nothing proves "old" is disposable
	}
	os.RemoveAll(w.oldTree())
	os.RemoveAll(w.newTree())
	os.RemoveAll(w.path)
}

// renameNoReplace renames src to dst, failing with EEXIST when dst exists.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, lerr := os.Lstat(dst); lerr == nil {
			return &os.LinkError{Op: "rename", Old: src, New: dst, Err: unix.EEXIST}
		}
		return os.Rename(src, dst)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

// moveTree moves src to dst. A directory that cannot be renamed (EXDEV: an overlayfs directory
// from a lower layer) or whose destination is a directory already (ENOTEMPTY, EEXIST: a move
// back onto a partly moved tree) is moved entry by entry: dst is made (or kept) with src's
// mode, owner and mtime, and src removed once empty. An error leaves every entry in src or in
// dst, so moving the other way undoes it.
func moveTree(src, dst string) error {
	err := os.Rename(src, dst)
	if err == nil || !(errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) {
		return err
	}
	var st unix.Stat_t
	if lerr := unix.Lstat(src, &st); lerr != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return err
	}
	if fi, lerr := os.Lstat(dst); errors.Is(lerr, fs.ErrNotExist) {
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
	} else if lerr != nil {
		return lerr
	} else if !fi.IsDir() {
		return err
	}
	names, err := readPathNames(src)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := moveTree(filepath.Join(src, n), filepath.Join(dst, n)); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 {
		if err := unix.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if err := unix.Fchmodat(unix.AT_FDCWD, dst, st.Mode&0o7777, 0); err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return os.Remove(src)
}
