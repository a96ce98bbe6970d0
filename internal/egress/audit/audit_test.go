package audit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEmitReadRotate(t *testing.T) {
	root := t.TempDir()
	l, err := New(root, 4096, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch, cancel := l.Subscribe("sb1")
	defer cancel()
	for i := 0; i < 200; i++ {
		l.Emit("sb1", Event{Kind: KindDNS, QName: "a.example.test", QType: "A", Decision: "allow"})
	}
	l.Emit("sb2", Event{Kind: KindConn, Host: "x.test"})
	l.Emit("../evil", Event{Kind: KindConn}) // bad IDs are dropped
	l.Flush()
	evs, err := l.Read("sb1", 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	// Three files of 4 KiB hold fewer than 200 events: the oldest were rotated away, the rest
	// are contiguous and end at 200.
	if len(evs) == 0 || len(evs) >= 200 || evs[len(evs)-1].Seq != 200 {
		t.Fatalf("read %d events, last %+v", len(evs), evs[len(evs)-1])
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("gap at %d: %d → %d", i, evs[i-1].Seq, evs[i].Seq)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(root, "sb1", "egress.jsonl*"))
	if len(matches) != 3 {
		t.Errorf("files %v; want 3", matches)
	}
	for _, m := range matches {
		if fi, _ := os.Stat(m); fi.Size() > 4096 {
			t.Errorf("%s is %d bytes", m, fi.Size())
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "evil")); err == nil {
		t.Error("a bad sandbox ID escaped the root")
	}
	since, _ := l.Read("sb1", 195, 0)
	if len(since) != 5 || since[0].Seq != 196 {
		t.Errorf("Read since 195 = %d events", len(since))
	}
	got := 0
	timeout := time.After(5 * time.Second)
	for got < 200 {
		select {
		case e := <-ch:
			if e.Sandbox != "sb1" {
				t.Fatalf("subscriber got %+v", e)
			}
			got++
		case <-timeout:
			t.Fatalf("subscriber got %d of 200", got)
		}
	}
	// Seq continues across a restart.
	l.Close()
	l2, err := New(root, 4096, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	l2.Emit("sb1", Event{Kind: KindLimit, Limit: "dns"})
	l2.Flush()
	evs, _ = l2.Read("sb1", 200, 0)
	if len(evs) != 1 || evs[0].Seq != 201 {
		t.Errorf("after restart: %+v", evs)
	}
	l2.Remove("sb1")
	if _, err := os.Stat(filepath.Join(root, "sb1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove left %v", err)
	}
}

func TestEmitNeverBlocks(t *testing.T) {
	l, err := New(t.TempDir(), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				l.Emit("sb", Event{Kind: KindHTTP, Host: strings.Repeat("h", 50)})
			}
		}()
	}
	wg.Wait()
	l.Close()
	l.Emit("sb", Event{Kind: KindHTTP}) // after Close: dropped, no panic
	evs, _ := l.Read("sb", 0, 10000)
	if uint64(len(evs))+l.Dropped() < 40000 && len(evs) < 10000 {
		t.Errorf("written %d + dropped %d < emitted", len(evs), l.Dropped())
	}
}

// TestEventsBoundedUnderFlood: events whose sandbox-chosen strings are 60 KB (a request
// target, a DNS name) are cut to MaxField, so a flood leaves whole JSON lines of a few KiB in
// at most `files` files of maxFile bytes.
func TestEventsBoundedUnderFlood(t *testing.T) {
	root := t.TempDir()
	const maxFile, files = 64 << 10, 2
	l, err := New(root, maxFile, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := strings.Repeat("A", 60_000)
	injected := []string{big}
	for i := 0; i < 2000; i++ {
		l.Emit("sb1", Event{Kind: KindHTTP, Decision: "refused", Host: big, Path: "/" + big, QName: big, Injected: injected})
		if i%500 == 0 {
			l.Flush()
		}
	}
	l.Flush()
	if injected[0] != big {
		t.Error("Emit changed the caller's slice")
	}
	entries, err := os.ReadDir(filepath.Join(root, "sb1"))
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, "sb1", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if len(line) > 8<<10 {
				t.Fatalf("%s: an event of %d bytes; want fields cut at %d", e.Name(), len(line), MaxField)
			}
		}
	}
	if len(entries) != files || total > files*maxFile {
		t.Errorf("%d files, %d bytes; want %d files, at most %d bytes", len(entries), total, files, files*maxFile)
	}
	evs, err := l.Read("sb1", 0, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Read = %d events, %v", len(evs), err)
	}
	if want := "…[" + strconv.Itoa(60_001-MaxField) + " bytes cut]"; !strings.HasSuffix(evs[0].Path, want) || len(evs[0].Host) > MaxField+32 {
		t.Errorf("path %q…, host %d bytes; want cut with %q", evs[0].Path[:20], len(evs[0].Host), want)
	}
}
