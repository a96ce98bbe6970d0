package ratelimit

import (
	"testing"
	"time"
)

// TestBuckets: a key gets its burst at once, then one token per 1/rate; keys do not share
// buckets; Take reports when the next token is back.
func TestBuckets(t *testing.T) {
	l := New(2, 3, 10*time.Minute)
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.Take("a", now); !ok {
			t.Fatalf("take %d refused within the burst", i)
		}
	}
	ok, wait := l.Take("a", now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: %v %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Take("b", now); !ok {
		t.Fatal("another key is limited by a's bucket")
	}
	if ok, _ := l.Take("a", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("no token after 1/rate")
	}
	// Tokens never pile up past the burst.
	for i := range 3 {
		if ok, _ := l.Take("b", now.Add(time.Minute)); !ok {
			t.Fatalf("take %d after a minute refused", i)
		}
	}
	if ok, _ := l.Take("b", now.Add(time.Minute)); ok {
		t.Fatal("a bucket held more than its burst")
	}
}

// TestBucketsIdleAndForget: with an idle bound, buckets untouched that long are dropped;
// without one they stay until Forget.
func TestBucketsIdleAndForget(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(2, 3, 10*time.Minute)
	l.Take("a", now)
	l.Take("b", now)
	l.Take("c", now.Add(time.Hour))
	if n := l.Len(); n != 1 {
		t.Fatalf("%d buckets after an hour; want 1", n)
	}
	k := New(2, 1, 0)
	k.Take("a", now)
	k.Take("b", now.Add(24*time.Hour))
	if n := k.Len(); n != 2 {
		t.Fatalf("%d buckets without an idle bound; want 2", n)
	}
	if ok, _ := k.Take("a", now); ok {
		t.Fatal("a's empty bucket gave a token")
	}
	k.Forget("a")
	if ok, _ := k.Take("a", now); !ok {
		t.Fatal("a forgotten bucket did not start full")
	}
}
