package watch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/hutchdev/hutch/errdefs"
)

// Watcher is one running watch. Read its events with Next; Close it when done. It is safe for
// concurrent use.
type Watcher struct {
	id      string
	display string // the path as asked for (clean), prefix of reported paths
	root    string // display with its symlinks resolved: what inotify watches
	opts    Options
	filter  filter
	fw      *fsnotify.Watcher
	q       *queue
	log     *slog.Logger
	// onChange, if set, is called for every raw event that passes the filters, every
	// overflow and every error (the change journal); such a watcher queues nothing.
	onChange func()

	stopOnce sync.Once
	stopc    chan string // a stop request with its reason ("" = closed by the consumer)
	done     chan struct{}
	release  func() // gives the Manager's slot back; called once when run ends

	// Owned by the run goroutine (and by newWatcher before it starts).
	dirs    map[string]bool // resolved directory → watched (false: a known child of a non-recursive watch)
	watched atomic.Int64    // directories with a watch (read by Dirs from other goroutines)
	armed   bool            // the previous raw event was a move_from: a Create now is its move_to
	batch   []Event         // events of the current coalescing window
	index   map[string]int  // path → index of its last event in batch
}

// newWatcher starts watching root (resolved) for display (clean). Every watch is in place
// when it returns.
func newWatcher(id, display, root string, opts Options, log *slog.Logger, onChange func(), release func()) (*Watcher, error) {
	if opts.Exclude == nil {
		opts.Exclude = DefaultExcludes
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = DefaultCoalesce
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = DefaultMaxDirs
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, inotifyError(err, display)
	}
	w := &Watcher{
		id: id, display: display, root: root, opts: opts, log: log, onChange: onChange, release: release,
		filter: filter{include: opts.Include, exclude: opts.Exclude},
		fw:     fw, q: newQueue(opts.QueueSize),
		stopc: make(chan string, 1), done: make(chan struct{}),
		dirs: map[string]bool{}, index: map[string]int{},
	}
	if err := w.addTree(root, false, true); err != nil {
		fw.Close()
		return nil, err
	}
	go w.run()
	return w, nil
}

// ID returns the watch ID.
func (w *Watcher) ID() string { return w.id }

// Path returns the watched path as asked for (cleaned).
func (w *Watcher) Path() string { return w.display }

// Dirs returns how many directories are watched.
func (w *Watcher) Dirs() int { return int(w.watched.Load()) }

// Next returns the next event, waiting until there is one or ctx ends (ctx's error). After
// the KindStopped event it returns io.EOF.
func (w *Watcher) Next(ctx context.Context) (Event, error) { return w.q.next(ctx) }

// Close stops the watch and releases its inotify instance. Events not yet read are lost;
// Next then returns what was queued, a KindStopped event (reason "closed") and io.EOF.
func (w *Watcher) Close() { w.stop("closed") }

// stop asks the run loop to end with a stopped event of reason and waits for it.
func (w *Watcher) stop(reason string) {
	w.stopOnce.Do(func() { w.stopc <- reason })
	<-w.done
}

// run is the event loop: raw fsnotify events in, coalesced events out to the queue.
func (w *Watcher) run() {
	defer close(w.done)
	defer w.release()
	defer w.fw.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var flushC <-chan time.Time
	for {
		select {
		case reason := <-w.stopc:
			w.end(reason)
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				w.end("watcher closed")
				return
			}
			if reason := w.handle(ev); reason != "" {
				w.end(reason)
				return
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				w.end("watcher closed")
				return
			}
			w.handleError(err)
		case <-flushC:
			flushC = nil
			w.flush()
			continue
		}
		if len(w.batch) > 0 && flushC == nil {
			timer.Reset(w.opts.Coalesce)
			flushC = timer.C
		}
	}
}

// end flushes the window and queues the stopped event.
func (w *Watcher) end(reason string) {
	w.flush()
	w.q.push(Event{Kind: KindStopped, Reason: reason, Time: now()})
}

// handle processes one raw event. It returns a stop reason when the watched directory is gone.
func (w *Watcher) handle(ev fsnotify.Event) string {
	name := filepath.Clean(ev.Name)
	armed := w.armed
	w.armed = false
	if name == w.root {
		switch {
		case ev.Has(fsnotify.Remove):
			w.changed()
			return "the watched directory was deleted"
		case ev.Has(fsnotify.Rename):
			w.changed()
			return "the watched directory was moved"
		case ev.Has(fsnotify.Chmod):
			w.emit(Attrib, "", true)
		}
		return ""
	}
	rel, ok := w.rel(name)
	if !ok || w.filter.excluded(rel) {
		return ""
	}
	switch {
	case ev.Has(fsnotify.Remove):
		isDir := w.forget(name, false)
		w.emit(Delete, rel, isDir)
	case ev.Has(fsnotify.Rename):
		isDir := w.forget(name, true)
		w.emit(MoveFrom, rel, isDir)
		w.armed = true
	case ev.Has(fsnotify.Create):
		typ := Create
		if armed {
			typ = MoveTo
		}
		fi, err := os.Lstat(name)
		isDir := err == nil && fi.IsDir()
		w.emit(typ, rel, isDir)
		if isDir {
			if w.opts.Recursive {
				if err := w.addTree(name, true, false); err != nil {
					w.queueError(err)
				}
			} else {
				w.dirs[name] = false
			}
		}
	case ev.Has(fsnotify.Write):
		w.emit(Modify, rel, w.isDir(name))
	case ev.Has(fsnotify.Chmod):
		w.emit(Attrib, rel, w.isDir(name))
	}
	return ""
}

// handleError processes an error from fsnotify: a kernel queue overflow becomes an overflow
// event (and the tree is walked again for directories whose creation was lost), anything else
// an error event.
func (w *Watcher) handleError(err error) {
	w.changed()
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.flush()
		w.q.push(Event{Kind: KindOverflow, Dropped: -1, Time: now()})
		if w.opts.Recursive {
			if err := w.addTree(w.root, false, false); err != nil {
				w.queueError(err)
			}
		}
		return
	}
	w.queueError(errdefs.Wrap(errdefs.CodeFilesystem, err, "inotify"))
}

// queueError flushes the window and queues an error event.
func (w *Watcher) queueError(err error) {
	w.log.Warn("watch: error", "watch", w.id, "path", w.display, "err", err)
	if w.onChange != nil {
		return
	}
	w.flush()
	w.q.push(Event{Kind: KindError, Err: err, Time: now()})
}

// rel returns name relative to the watched root, slash-separated; false for a name outside it
// (an event under a directory that was moved away).
func (w *Watcher) rel(name string) (string, bool) {
	prefix := strings.TrimSuffix(w.root, "/") + "/"
	if !strings.HasPrefix(name, prefix) {
		return "", false
	}
	return filepath.ToSlash(name[len(prefix):]), true
}

// isDir reports whether name is a known directory.
func (w *Watcher) isDir(name string) bool { _, ok := w.dirs[name]; return ok }

// forget drops name and every directory below it from the known directories, removing their
// watches when unwatch (a directory moved away keeps its inotify watch, which would report
// under the old path; a deleted one loses it by itself). It reports whether name was a
// known directory.
func (w *Watcher) forget(name string, unwatch bool) bool {
	if _, ok := w.dirs[name]; !ok {
		return false
	}
	prefix := name + "/"
	for d, wd := range w.dirs {
		if d != name && !strings.HasPrefix(d, prefix) {
			continue
		}
		delete(w.dirs, d)
		if wd {
			w.watched.Add(-1)
			if unwatch {
				_ = w.fw.Remove(d) // fails harmlessly when the kernel already dropped it
			}
		}
	}
	return true
}

// addTree watches dir and, when recursive, every directory below it that is not excluded and
// not yet watched. With emit, what dir holds is reported as create events (a directory that
// appeared may have been filled before its watch was in place). With initial (the watch's
// start) any error is returned; later, a directory that cannot be watched is reported as an
// error event and the walk goes on, and one that vanished is skipped. The directory limit
// (Options.MaxDirs) and the kernel's limits are WATCH_LIMIT_EXCEEDED.
func (w *Watcher) addTree(dir string, emit, initial bool) error {
	if !w.dirs[dir] {
		if w.watched.Load() >= int64(w.opts.MaxDirs) {
			return limitError("directories", w.opts.MaxDirs, "watch %s: more than %d directories to watch", w.display, w.opts.MaxDirs).
				With("path", w.displayOf(dir))
		}
		if err := w.fw.Add(dir); err != nil {
			if !initial && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return inotifyError(err, w.displayOf(dir))
		}
		w.dirs[dir] = true
		w.watched.Add(1)
	}
	if !w.opts.Recursive && !initial && !emit {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !initial && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return inotifyError(err, w.displayOf(dir))
	}
	for _, e := range entries {
		child := filepath.Join(dir, e.Name())
		rel, _ := w.rel(child)
		if w.filter.excluded(rel) {
			continue
		}
		isDir := e.IsDir()
		if emit {
			w.emit(Create, rel, isDir)
		}
		if !isDir {
			continue
		}
		if !w.opts.Recursive {
			if _, known := w.dirs[child]; !known {
				w.dirs[child] = false
			}
			continue
		}
		if err := w.addTree(child, emit, initial); err != nil {
			if initial || errdefs.IsCode(err, errdefs.CodeWatchLimit) {
				return err
			}
			w.queueError(err)
		}
	}
	return nil
}

// displayOf maps a resolved path below the root to the path as the client named it.
func (w *Watcher) displayOf(name string) string {
	rel, ok := w.rel(name)
	if !ok {
		return w.display
	}
	return filepath.Join(w.display, filepath.FromSlash(rel))
}

// changed tells the journal, if any, that something happened.
func (w *Watcher) changed() {
	if w.onChange != nil {
		w.onChange()
	}
}

// emit adds an event for rel (relative to the root, "" for the root itself) to the current
// window, coalescing it with the last event of the same path.
func (w *Watcher) emit(typ Type, rel string, isDir bool) {
	if !w.filter.reported(rel) {
		return
	}
	if w.onChange != nil {
		w.onChange()
		return
	}
	p := w.display
	if rel != "" {
		p = filepath.Join(w.display, filepath.FromSlash(rel))
	}
	if i, ok := w.index[p]; ok && absorbs(w.batch[i].Type, typ) {
		if isDir {
			w.batch[i].IsDir = true
		}
		return
	}
	w.batch = append(w.batch, Event{Kind: KindEvent, Type: typ, Path: p, IsDir: isDir, Time: now()})
	w.index[p] = len(w.batch) - 1
}

// absorbs reports whether an event of type next on a path is merged into the path's previous
// event of type last in the same window.
func absorbs(last, next Type) bool {
	if last == next {
		return true
	}
	switch last {
	case Create, MoveTo, Modify:
		return next == Modify || next == Attrib
	}
	return false
}

// flush queues the events of the current window, in order of first appearance.
func (w *Watcher) flush() {
	for _, ev := range w.batch {
		w.q.push(ev)
	}
	clear(w.batch)
	w.batch = w.batch[:0]
	clear(w.index)
}

func now() time.Time { return time.Now().UTC() }
