package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// File watching end to end (issue 5): the watch stream through hutchd (SDK and CLI), its
// recursion, excludes, overflow accounting and end, bad input, the change journal, and the
// stream holding the sandbox awake.

// openWatch starts a watch and pumps its events into a channel (closed when the stream ends;
// a stream error is sent as an event of Kind "stream-error" with Err set).
func openWatch(t *testing.T, sb *client.Sandbox, path string, opts client.WatchOptions) (*client.Watcher, <-chan client.WatchEvent) {
	t.Helper()
	w, err := sb.Watch(ctxT(t, 10*time.Minute), path, opts)
	if err != nil {
		t.Fatalf("Watch(%s) = %v", path, err)
	}
	t.Cleanup(func() { w.Close() })
	ch := make(chan client.WatchEvent, 100000)
	go func() {
		defer close(ch)
		for ev, err := range w.Events() {
			if err != nil {
				ch <- client.WatchEvent{Kind: "stream-error", Err: err}
				return
			}
			ch <- ev
		}
	}()
	return w, ch
}

// until reads events until one satisfies stop (returned last) or 2 minutes pass.
func until(t *testing.T, ch <-chan client.WatchEvent, stop func(client.WatchEvent) bool) []client.WatchEvent {
	t.Helper()
	var evs []client.WatchEvent
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %d events", len(evs))
			}
			if ev.Kind == "stream-error" {
				t.Fatalf("stream failed after %d events: %v", len(evs), ev.Err)
			}
			evs = append(evs, ev)
			if stop(ev) {
				return evs
			}
		case <-timeout:
			t.Fatalf("no matching event after %d events (last %+v)", len(evs), evs[max(0, len(evs)-3):])
		}
	}
}

func isEvent(typ, path string) func(client.WatchEvent) bool {
	return func(ev client.WatchEvent) bool {
		return ev.Kind == client.WatchKindEvent && ev.EventType == typ && ev.Path == path
	}
}

func TestWatch(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-watch", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 10*time.Minute)

	t.Run("thousand files", func(t *testing.T) {
		mustExec(t, sb, "mkdir -p /workspace/many")
		_, ch := openWatch(t, sb, "/workspace/many", client.WatchOptions{})
		mustExec(t, sb, `cd /workspace/many && for i in $(seq 1 1000); do echo x > f$i; done && : > marker`)
		evs := until(t, ch, isEvent(client.WatchCreate, "/workspace/many/marker"))
		created := map[string]bool{}
		dropped, overflow := 0, false
		for _, ev := range evs {
			switch ev.Kind {
			case client.WatchKindEvent:
				if ev.EventType == client.WatchCreate && strings.HasPrefix(ev.Path, "/workspace/many/f") {
					created[ev.Path] = true
				}
			case client.WatchKindOverflow:
				overflow = true
				dropped += ev.Dropped
			case client.WatchKindError:
				t.Errorf("error event: %v", ev.Err)
			}
		}
		if !overflow {
			if len(created) != 1000 {
				t.Fatalf("%d of 1000 files reported as created and no overflow event", len(created))
			}
			for i := 1; i <= 1000; i++ {
				if !created[fmt.Sprintf("/workspace/many/f%d", i)] {
					t.Fatalf("f%d not reported", i)
				}
			}
			return
		}
		// Events were lost: the overflow event says so, with a count covering what is missing
		// (or -1: the kernel's queue overflowed).
		if missing := 1000 - len(created); missing > 0 && dropped >= 0 && dropped < missing {
			t.Fatalf("%d files missing but overflow reports %d dropped", missing, dropped)
		}
		t.Logf("overflow: %d reported, %d dropped", len(created), dropped)
	})

	t.Run("new subdirectory and excludes", func(t *testing.T) {
		mustExec(t, sb, "mkdir -p /workspace/proj/.git")
		_, ch := openWatch(t, sb, "/workspace/proj", client.WatchOptions{})
		mustExec(t, sb, `cd /workspace/proj && mkdir -p src/deep/er && echo a > src/deep/er/new.ts && mkdir -p node_modules/pkg && echo b > node_modules/pkg/index.js && echo c > .git/HEAD && echo d > src/deep/er/z.ts`)
		evs := until(t, ch, isEvent(client.WatchCreate, "/workspace/proj/src/deep/er/z.ts"))
		seen := false
		for _, ev := range evs {
			if strings.Contains(ev.Path, "node_modules") || strings.Contains(ev.Path, ".git") {
				t.Errorf("excluded path reported: %+v", ev)
			}
			seen = seen || (ev.EventType == client.WatchCreate && ev.Path == "/workspace/proj/src/deep/er/new.ts")
		}
		if !seen {
			t.Errorf("file in a new subdirectory not reported: %+v", evs)
		}
		// The new directory is watched from now on.
		mustExec(t, sb, "echo e > /workspace/proj/src/deep/er/later.ts")
		until(t, ch, isEvent(client.WatchCreate, "/workspace/proj/src/deep/er/later.ts"))
	})

	t.Run("delete ends the stream", func(t *testing.T) {
		mustExec(t, sb, "mkdir -p /workspace/gone/sub && touch /workspace/gone/sub/f")
		_, ch := openWatch(t, sb, "/workspace/gone", client.WatchOptions{})
		mustExec(t, sb, "rm -rf /workspace/gone")
		evs := until(t, ch, func(ev client.WatchEvent) bool { return ev.Kind == client.WatchKindStopped })
		if last := evs[len(evs)-1]; !strings.Contains(last.Reason, "deleted") {
			t.Errorf("stopped reason %q", last.Reason)
		}
		if _, ok := <-ch; ok {
			t.Error("events after stopped")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		mustExec(t, sb, "touch /workspace/afile && ln -sfn /etc /workspace/etclink")
		cases := []struct {
			path string
			code errdefs.Code
		}{
			{"workspace", errdefs.CodeInvalidPath},
			{"", errdefs.CodeInvalidPath},
			{"/etc", errdefs.CodeInvalidPath},
			{"/proc", errdefs.CodeInvalidPath},
			{"/workspace/../etc", errdefs.CodeInvalidPath},
			{"/workspace/etclink", errdefs.CodeInvalidPath},
			{"/workspace/missing", errdefs.CodeFileNotFound},
			{"/workspace/afile", errdefs.CodeNotDirectory},
		}
		for _, c := range cases {
			if _, err := sb.Watch(ctx, c.path, client.WatchOptions{}); !errdefs.IsCode(err, c.code) {
				t.Errorf("Watch(%q) = %v; want %s", c.path, err, c.code)
			}
			if _, err := sb.CheckChanges(ctx, c.path, ""); !errdefs.IsCode(err, c.code) {
				t.Errorf("CheckChanges(%q) = %v; want %s", c.path, err, c.code)
			}
		}
		_, err := sb.Watch(ctx, "/workspace", client.WatchOptions{Include: []string{"[bad"}})
		if !errdefs.IsCode(err, errdefs.CodeInvalidPattern) {
			t.Errorf("bad glob: %v", err)
		}
		for _, tok := range []string{"", "wrong"} { // hutchd's auth covers both routes
			for _, rest := range []string{"watch", "watch/check"} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.URL()+"/v1/sandboxes/"+sb.ID()+"/"+rest, strings.NewReader(`{"path":"/workspace"}`))
				if tok != "" {
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s with token %q: status %d, want 401", rest, tok, resp.StatusCode)
				}
			}
		}
		if _, err := d.Client().SandboxHandle("e2e-watch-nope").Watch(ctx, "/workspace", client.WatchOptions{}); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Errorf("unknown sandbox: %v", err)
		}
	})

	t.Run("check changes", func(t *testing.T) {
		mustExec(t, sb, "mkdir -p /workspace/j")
		c, err := sb.CheckChanges(ctx, "/workspace/j", "")
		if err != nil || c.Status != client.ChangesResync {
			t.Fatalf("first = %+v, %v", c, err)
		}
		v := c.Version
		if c, err = sb.CheckChanges(ctx, "/workspace/j", v); err != nil || c.Status != client.ChangesUnchanged || c.Version != v {
			t.Fatalf("unchanged = %+v, %v", c, err)
		}
		mustExec(t, sb, "echo x > /workspace/j/f")
		if c, err = sb.CheckChanges(ctx, "/workspace/j", v); err != nil || c.Status != client.ChangesChanged || c.Version == v {
			t.Fatalf("changed = %+v, %v", c, err)
		}
		if c, err = sb.CheckChanges(ctx, "/workspace/j", c.Version); err != nil || c.Status != client.ChangesUnchanged {
			t.Fatalf("unchanged again = %+v, %v", c, err)
		}
		if c, err = sb.CheckChanges(ctx, "/workspace/j", "v1.0123456789abcdef.1.0"); err != nil || c.Status != client.ChangesResync {
			t.Fatalf("unknown version = %+v, %v", c, err)
		}
	})

	t.Run("cli", func(t *testing.T) {
		mustExec(t, sb, "mkdir -p /workspace/cli")
		cmd := exec.CommandContext(ctx, filepath.Join(bins, "hutch"), "watch", sb.ID(), "/workspace/cli", "--json")
		cmd.Env = append(os.Environ(), "HUTCH_URL="+d.URL(), "HUTCH_TOKEN="+d.Token)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		next := func() map[string]any {
			t.Helper()
			if !sc.Scan() {
				t.Fatalf("hutch watch output ended: %v; stderr %s", sc.Err(), stderr.String())
			}
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			return m
		}
		if l := next(); l["type"] != "watching" || l["path"] != "/workspace/cli" {
			t.Fatalf("first line %v", l)
		}
		mustExec(t, sb, "echo hi > /workspace/cli/hello.txt")
		if l := next(); l["type"] != "event" || l["eventType"] != "create" || l["path"] != "/workspace/cli/hello.txt" {
			t.Fatalf("event line %v", l)
		}
		mustExec(t, sb, "rm -rf /workspace/cli")
		for {
			if l := next(); l["type"] == "stopped" {
				break
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("hutch watch: %v; stderr %s", err, stderr.String())
		}
	})
}

// TestWatchHoldsSandboxAwake: an open watch stream keeps the sandbox awake past its
// sleepAfter; once it is closed the sandbox sleeps.
func TestWatchHoldsSandboxAwake(t *testing.T) {
	requireEnv(t)
	const sleepAfter = 2 * time.Second
	sb := sandbox(t, "e2e-watch-held", &client.SandboxOptions{InstanceType: "lite", SleepAfter: sleepAfter})
	ctx := ctxT(t, 5*time.Minute)
	started, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, ch := openWatch(t, sb, "/workspace", client.WatchOptions{})
	time.Sleep(3 * sleepAfter)
	now, err := sb.Info(ctx)
	if err != nil || now.Status != client.StatusRunning || !now.StartedAt.Equal(started.StartedAt) {
		t.Fatalf("with a watch open: %+v, %v; want running, never restarted\nhutchd log:\n%s", now, err, d.LogTail())
	}
	select {
	case ev, ok := <-ch:
		if ok && ev.Kind != client.WatchKindEvent {
			t.Fatalf("watch ended while open: %+v", ev)
		}
	default:
	}
	w.Close()
	waitStatus(t, sb, client.StatusSleeping, 2*time.Minute)
}
