package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// logLine is one line of hutchd's text log (log/slog TextHandler: key=value, values quoted with
// strconv.Quote when needed).
type logLine struct {
	time  time.Time
	attrs map[string]string
}

// parseLogLine splits a slog text line into its attributes; ok is false for other lines.
func parseLogLine(s string) (logLine, bool) {
	l := logLine{attrs: map[string]string{}}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(s, " ") {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return logLine{}, false
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return logLine{}, false
			}
			val, _ = strconv.Unquote(q)
			s = s[len(q):]
		} else {
			end := strings.IndexByte(s, ' ')
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		l.attrs[key] = val
	}
	t, err := time.Parse(time.RFC3339Nano, l.attrs["time"])
	if err != nil {
		return logLine{}, false
	}
	l.time = t
	return l, true
}

// createTrace is what hutchd's debug log tells about one cold create → first exec.
type createTrace struct {
	created, netReady, egressAdded, started, running, reqEnd time.Time
	took, reqDur, execDur                                    time.Duration
}

func (t createTrace) complete() bool {
	return !t.created.IsZero() && !t.netReady.IsZero() && !t.egressAdded.IsZero() && !t.started.IsZero() &&
		!t.running.IsZero() && !t.reqEnd.IsZero() && t.took > 0 && t.reqDur > 0 && t.execDur > 0
}

// readTraces collects the create traces of the given sandbox IDs from hutchd's log.
func readTraces(path string, ids []string) (map[string]*createTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	traces := map[string]*createTrace{}
	for _, id := range ids {
		traces[id] = &createTrace{}
	}
	var lastRunning string // the create request that ends next belongs to this sandbox
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		l, ok := parseLogLine(sc.Text())
		if !ok {
			continue
		}
		a := l.attrs
		id := a["sandbox_id"]
		if id == "" {
			id = a["id"]
		}
		switch a["msg"] {
		case "request":
			d, _ := time.ParseDuration(a["duration"])
			switch {
			case a["method"] == "POST" && a["path"] == "/v1/sandboxes" && lastRunning != "":
				if t := traces[lastRunning]; t != nil && t.reqEnd.IsZero() {
					t.reqEnd, t.reqDur = l.time, d
				}
				lastRunning = ""
			case a["method"] == "POST" && strings.HasPrefix(a["path"], "/v1/sandboxes/") && strings.HasSuffix(a["path"], "/execute"):
				sid := strings.TrimSuffix(strings.TrimPrefix(a["path"], "/v1/sandboxes/"), "/execute")
				if t := traces[sid]; t != nil && t.execDur == 0 {
					t.execDur = d
				}
			}
			continue
		}
		t := traces[id]
		if t == nil {
			continue
		}
		switch a["msg"] {
		case "sandbox created":
			t.created = l.time
		case "sandbox network ready":
			t.netReady = l.time
		case "egress sandbox added":
			t.egressAdded = l.time
		case "container started":
			t.started = l.time
			t.took, _ = time.ParseDuration(a["took"])
		case "sandbox running":
			t.running = l.time
			lastRunning = id
		}
	}
	return traces, sc.Err()
}

// printCreateBreakdown splits hutch's cold create → first exec into the steps hutchd logs.
func (b *bench) printCreateBreakdown(out io.Writer) {
	traces, err := readTraces(b.d.LogPath, b.coldIDs)
	if err != nil {
		fmt.Fprintf(out, "\ncreate breakdown: %v\n", err)
		return
	}
	rows := []*series{
		{name: "client → hutchd, until record inserted"},
		{name: "dirs + overlay mount + netns/veth setup"},
		{name: "etc files, spec, bundle"},
		{name: "runc run -d (log: took)"},
		{name: "wait for agent ping + store update"},
		{name: "reply"},
		{name: "= hutchd create handler (log: duration)"},
		{name: "first exec: hutchd handler (log: duration)"},
		{name: "first exec: client + HTTP outside handler"},
		{name: "(egress registration, nft: alongside the start)"},
	}
	for i, id := range b.coldIDs {
		t := traces[id]
		if t == nil || !t.complete() {
			continue
		}
		reqStart := t.reqEnd.Add(-t.reqDur)
		// Before "sandbox created" the handler decoded the request, resolved the image and
		// inserted the record; the client's own share is in the difference to the SDK timing.
		clientSide := b.hCreate.samples[i] - t.reqDur
		vals := []time.Duration{
			t.created.Sub(reqStart) + clientSide,
			t.netReady.Sub(t.created),
			t.started.Add(-t.took).Sub(t.netReady),
			t.took,
			t.running.Sub(t.started),
			t.reqEnd.Sub(t.running),
			t.reqDur,
			t.execDur,
			b.hFirstExec.samples[i] - t.execDur,
			t.egressAdded.Sub(t.netReady),
		}
		for k, v := range vals {
			rows[k].add(max(v, 0))
		}
	}
	printTable(out, "Create path breakdown, from hutchd's debug log (ms; step boundaries have 1 ms log resolution, durations are exact)", rows)
}
