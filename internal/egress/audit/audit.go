// Package audit is the egress audit log (EGRESS.md §7): one JSON object per line per sandbox
// in <root>/<sandboxID>/egress.jsonl, rotated at 8 MiB into egress.jsonl.1 and .2 (so at most
// 3 files, 24 MiB, per sandbox; both figures are New's parameters), with a per-sandbox monotonically increasing Seq as the read
// cursor. Kinds: dns, conn, http, violation, policy.updated, limit.
//
// Emit never blocks the data path: events go through a bounded channel (DefaultQueue) to one
// writer goroutine; when it is full the event is dropped and counted (Dropped). Events never
// carry header values, bodies, cookies, secret values or placeholders (only secret NAMES), and
// query strings only as "redacted"; callers fill the fields below accordingly.
//
// Readers page with Read(sandboxID, since, max) and follow live with Subscribe; the server
// streams both as SSE (GET /v1/sandboxes/{id}/egress/events?since=&follow=).
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Event kinds.
const (
	KindDNS           = "dns"
	KindConn          = "conn"
	KindHTTP          = "http"
	KindViolation     = "violation"
	KindPolicyUpdated = "policy.updated"
	KindLimit         = "limit"
)

// Event is one audit record. Seq, TS and Sandbox are set by Emit.
type Event struct {
	Seq      uint64    `json:"seq"`
	TS       time.Time `json:"ts"`
	Sandbox  string    `json:"sandbox"`
	Kind     string    `json:"kind"`
	Decision string    `json:"decision,omitempty"` // allow, deny, intercept, tunnel, refused, closed, blocked
	Reason   string    `json:"reason,omitempty"`
	Rule     string    `json:"rule,omitempty"` // rule ID
	Mode     string    `json:"mode,omitempty"` // tunnel, intercept, http, tcp

	// DNS.
	QName   string `json:"qname,omitempty"`
	QType   string `json:"qtype,omitempty"`
	Rcode   string `json:"rcode,omitempty"`
	Answers int    `json:"answers,omitempty"`

	// Connections and requests.
	Host      string   `json:"host,omitempty"`
	Port      int      `json:"port,omitempty"`
	OrigDst   string   `json:"origDst,omitempty"`
	Proto     string   `json:"proto,omitempty"`
	Method    string   `json:"method,omitempty"`
	Path      string   `json:"path,omitempty"`
	Query     string   `json:"query,omitempty"` // "redacted" when the request had one
	Status    int      `json:"status,omitempty"`
	ReqBytes  int64    `json:"reqBytes,omitempty"`
	RespBytes int64    `json:"respBytes,omitempty"`
	DurMs     int64    `json:"durMs,omitempty"`
	Upstream  string   `json:"upstream,omitempty"`
	Handler   string   `json:"handler,omitempty"`
	Injected  []string `json:"injected,omitempty"` // header names
	Secrets   []string `json:"secrets,omitempty"`  // secret names involved (never values)
	Location  string   `json:"location,omitempty"` // violation: where the placeholder was found
	Redaction int      `json:"redactions,omitempty"`
	ECH       bool     `json:"ech,omitempty"`

	// policy.updated: the host lists before and after (never secret values).
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Closed  int      `json:"closed,omitempty"` // connections closed by the change

	// limit: what was limited ("dns", "connections").
	Limit string `json:"limit,omitempty"`
}

// Defaults.
const (
	DefaultMaxFile = 8 << 20 // bytes per file before rotation
	DefaultFiles   = 3       // egress.jsonl + .1 + .2
	DefaultQueue   = 4096    // events buffered between Emit and the writer
	fileName       = "egress.jsonl"
	subBuffer      = 256
)

var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Log is the audit log of every sandbox. Safe for concurrent use.
type Log struct {
	root    string
	maxFile int64
	nfiles  int // egress.jsonl and its rotated files
	log     *slog.Logger
	q       chan item
	done    chan struct{}
	dropped atomic.Uint64
	// qmu guards sends on q against Close closing it (read-locked by senders).
	qmu     sync.RWMutex
	qclosed bool

	mu sync.Mutex
	// seqs are the last Seq per sandbox (loaded lazily from the files).
	seqs map[string]uint64
	// subs are the live subscribers per sandbox.
	subs map[string]map[chan Event]struct{}
	// closed is set by Close.
	closed bool
	// sizes caches the current file size per sandbox.
	sizes map[string]int64
}

// New returns a Log writing under root (created when missing) and starts its writer.
// maxFile <= 0 means DefaultMaxFile; files (the current file and the rotated ones kept, at
// least 2) <= 0 means DefaultFiles.
func New(root string, maxFile int64, files int, log *slog.Logger) (*Log, error) {
	if maxFile <= 0 {
		maxFile = DefaultMaxFile
	}
	if files <= 0 {
		files = DefaultFiles
	}
	files = max(files, 2)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l := &Log{root: root, maxFile: maxFile, nfiles: files, log: log, q: make(chan item, DefaultQueue), done: make(chan struct{}),
		seqs: map[string]uint64{}, subs: map[string]map[chan Event]struct{}{}, sizes: map[string]int64{}}
	go l.run()
	return l, nil
}

// Emit queues e for sandboxID without blocking; when the queue is full the event is dropped
// and counted. A nil *Log discards.
func (l *Log) Emit(sandboxID string, e Event) {
	if l == nil || !idRe.MatchString(sandboxID) {
		return
	}
	e.Sandbox = sandboxID
	boundFields(&e)
	if e.TS.IsZero() {
		e.TS = time.Now().UTC()
	}
	l.qmu.RLock()
	defer l.qmu.RUnlock()
	if l.qclosed {
		return
	}
	select {
	case l.q <- item{e: e}:
	default:
		l.dropped.Add(1)
	}
}

// MaxField is the most bytes kept of any string of an event (host, path, DNS name, reason,
// …, most of them chosen by code in the sandbox); a longer one is cut at a UTF-8 boundary and
// ends with "…[N bytes cut]". So one event is a few KiB at most and a file's bound is reached
// by many events, not by a few huge ones.
const MaxField = 1 << 10

// boundFields cuts e's strings to MaxField.
func boundFields(e *Event) {
	for _, p := range []*string{&e.Decision, &e.Reason, &e.Rule, &e.Mode, &e.QName, &e.QType, &e.Rcode,
		&e.Host, &e.OrigDst, &e.Proto, &e.Method, &e.Path, &e.Query, &e.Upstream, &e.Handler,
		&e.Location, &e.Limit} {
		*p = cutField(*p)
	}
	for _, l := range []*[]string{&e.Injected, &e.Secrets, &e.Added, &e.Removed} {
		for i, v := range *l {
			if len(v) > MaxField {
				c := slices.Clone(*l) // the caller's slice stays as it is
				for j := i; j < len(c); j++ {
					c[j] = cutField(c[j])
				}
				*l = c
				break
			}
		}
	}
}

func cutField(s string) string {
	if len(s) <= MaxField {
		return s
	}
	n := MaxField
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[" + strconv.Itoa(len(s)-n) + " bytes cut]"
}

// item is a queued event, or a control request for the writer (flush, remove) with done
// closed once handled.
type item struct {
	e      Event
	remove string
	done   chan struct{}
}

// control queues a control item and waits (bounded) for the writer to handle it. It reports
// whether it was handled.
func (l *Log) control(it item) bool {
	it.done = make(chan struct{})
	l.qmu.RLock()
	if l.qclosed {
		l.qmu.RUnlock()
		return false
	}
	select {
	case l.q <- it:
		l.qmu.RUnlock()
	case <-time.After(10 * time.Second):
		l.qmu.RUnlock()
		return false
	}
	select {
	case <-it.done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// Dropped returns how many events were dropped because the queue was full.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Close stops the writer after it has written what is queued. Subscribers' channels close.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.qmu.Lock()
	l.qclosed = true
	close(l.q)
	l.qmu.Unlock()
	<-l.done
	l.mu.Lock()
	for id, set := range l.subs {
		for ch := range set {
			close(ch)
		}
		delete(l.subs, id)
	}
	l.mu.Unlock()
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	for it := range l.q {
		switch {
		case it.remove != "":
			l.mu.Lock()
			delete(l.seqs, it.remove)
			delete(l.sizes, it.remove)
			l.mu.Unlock()
			if err := os.RemoveAll(l.dir(it.remove)); err != nil {
				l.log.Warn("egress audit remove failed", "sandbox_id", it.remove, "err", err)
			}
		case it.done == nil:
			if err := l.write(it.e); err != nil {
				l.log.Warn("egress audit write failed", "sandbox_id", it.e.Sandbox, "err", err)
			}
		}
		if it.done != nil {
			close(it.done)
		}
	}
}

func (l *Log) dir(id string) string { return filepath.Join(l.root, id) }

// write assigns Seq, appends e to the sandbox's file (rotating first when it is full) and
// fans it out to subscribers. Runs on the writer goroutine only.
func (l *Log) write(e Event) error {
	id := e.Sandbox
	l.mu.Lock()
	seq, ok := l.seqs[id]
	l.mu.Unlock()
	if !ok {
		seq = l.lastSeq(id)
	}
	seq++
	e.Seq = seq
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	dir := l.dir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, fileName)
	l.mu.Lock()
	size, known := l.sizes[id]
	l.mu.Unlock()
	if !known {
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
	}
	if size > 0 && size+int64(len(line)) > l.maxFile {
		for i := l.nfiles - 1; i >= 1; i-- {
			from := path
			if i > 1 {
				from = path + "." + strconv.Itoa(i-1)
			}
			_ = os.Rename(from, path+"."+strconv.Itoa(i)) // a missing older file is normal
		}
		size = 0
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(line)
	cerr := f.Close()
	l.mu.Lock()
	l.seqs[id] = seq
	l.sizes[id] = size + int64(len(line))
	for ch := range l.subs[id] {
		select {
		case ch <- e:
		default: // a slow subscriber loses events; it can re-read from the files by Seq
		}
	}
	l.mu.Unlock()
	return errors.Join(werr, cerr)
}

// files returns the sandbox's files, oldest first.
func (l *Log) files(id string) []string {
	path := filepath.Join(l.dir(id), fileName)
	var out []string
	for i := l.nfiles - 1; i >= 1; i-- {
		out = append(out, path+"."+strconv.Itoa(i))
	}
	return append(out, path)
}

// lastSeq reads the last Seq written for id (0 when none).
func (l *Log) lastSeq(id string) uint64 {
	fs := l.files(id)
	for i := len(fs) - 1; i >= 0; i-- {
		b, err := os.ReadFile(fs[i])
		if err != nil || len(b) == 0 {
			continue
		}
		b = bytes.TrimRight(b, "\n")
		if j := bytes.LastIndexByte(b, '\n'); j >= 0 {
			b = b[j+1:]
		}
		var e Event
		if json.Unmarshal(b, &e) == nil {
			return e.Seq
		}
	}
	return 0
}

// Read returns up to max (1–10000; other values mean 1000) events of sandboxID with Seq >
// since, oldest first, from the files still on disk. Unknown sandboxes have none.
func (l *Log) Read(sandboxID string, since uint64, max int) ([]Event, error) {
	if max <= 0 || max > 10000 {
		max = 1000
	}
	if !idRe.MatchString(sandboxID) {
		return nil, nil
	}
	var out []Event
	for _, f := range l.files(sandboxID) {
		fh, err := os.Open(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Seq <= since {
				continue
			}
			out = append(out, e)
			if len(out) == max {
				fh.Close()
				return out, nil
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	return out, nil
}

// Subscribe returns a channel of sandboxID's events written from now on, and a cancel func
// that must be called. The channel is buffered; a subscriber that falls behind loses events
// (it can fill the gap with Read by Seq). It is closed by cancel or Close.
func (l *Log) Subscribe(sandboxID string) (<-chan Event, func()) {
	ch := make(chan Event, subBuffer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		close(ch)
		return ch, func() {}
	}
	set := l.subs[sandboxID]
	if set == nil {
		set = map[chan Event]struct{}{}
		l.subs[sandboxID] = set
	}
	set[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if s := l.subs[sandboxID]; s != nil {
				if _, ok := s[ch]; ok {
					delete(s, ch)
					close(ch)
				}
				if len(s) == 0 {
					delete(l.subs, sandboxID)
				}
			}
		})
	}
}

// Flush waits (at most 10 s) until every event emitted before the call has been written.
func (l *Log) Flush() {
	if l != nil {
		l.control(item{})
	}
}

// Remove deletes sandboxID's audit files (the sandbox was destroyed), after the events queued
// before the call. Closed logs and bad IDs are a no-op.
func (l *Log) Remove(sandboxID string) {
	if l == nil || !idRe.MatchString(sandboxID) {
		return
	}
	l.control(item{remove: sandboxID})
}
