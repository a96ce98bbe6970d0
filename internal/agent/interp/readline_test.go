package interp

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// An event line past the limit is refused without being held (a tester made the agent run
// out of memory with an endless line on the event descriptor).
func TestReadLineLimit(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("short\n"+strings.Repeat("x", 100)+"\nlast"), 16)
	if l, err := readLine(br, 50); err != nil || string(l) != "short\n" {
		t.Fatalf("first line = %q, %v", l, err)
	}
	if _, err := readLine(br, 50); !errors.Is(err, errLineTooLong) {
		t.Fatalf("long line: %v, want errLineTooLong", err)
	}
	br = bufio.NewReaderSize(strings.NewReader("end without newline"), 16)
	if l, err := readLine(br, 50); !errors.Is(err, io.EOF) || string(l) != "end without newline" {
		t.Fatalf("last line = %q, %v", l, err)
	}
}

// After a line past the limit, skipLine drops its rest and the next line reads whole (the
// agent skips an oversized event instead of closing the kernel).
func TestSkipLine(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\nnext\n"), 16)
	if _, err := readLine(br, 50); !errors.Is(err, errLineTooLong) {
		t.Fatalf("long line: %v", err)
	}
	if err := skipLine(br); err != nil {
		t.Fatal(err)
	}
	if l, err := readLine(br, 50); err != nil || string(l) != "next\n" {
		t.Fatalf("after skip: %q, %v", l, err)
	}
}
