package session

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// finalDrainCap bounds what is read from one pipe after bash has exited: what bash and its
// foreground children wrote fits in the pipe buffer (pipeSize); anything beyond comes from
// background processes that outlive the command and is not part of its output.
const finalDrainCap = 2 << 20

// pipeSize is the capacity asked for the output pipes (F_SETPIPE_SZ), readSize what one read
// takes at most. Not the 1 MiB maximum: Linux charges pipe buffers to their user, and past
// /proc/sys/fs/pipe-user-pages-soft (64 MiB) new pipes get one page; with 1 MiB pipes, 40
// background processes took the agent there.
const (
	pipeSize = 256 << 10
	readSize = pipeSize
)

// coalesceBelow and coalesceDelay batch output that arrives in small writes: after a read
// that returned data but less than coalesceBelow bytes, pump waits coalesceDelay before it
// polls again, so the writer fills the pipe meanwhile instead of waking the agent for every
// write. Output is never held back (what was read is emitted first); only the next read waits,
// by at most coalesceDelay. Measured on gVisor (systrap) in a lite sandbox, 1/16 of a CPU,
// where every wake-up of reader and writer costs the Sentry: `head -c 64M /dev/zero` (8 KiB
// writes) into a reader of 1 MiB reads took 12.8 s without the wait and 9.2 s with it (4.5 s
// into /dev/null); 64 KiB reads without it took 18.7 s.
const (
	coalesceBelow = 64 << 10
	coalesceDelay = 2 * time.Millisecond
)

// pump reads the non-blocking pipe read ends outR and errR from this one goroutine and calls
// emit for each chunk (≤ ChunkSize bytes; one read of up to readSize bytes makes several).
// When both pipes are readable, stdout is read first, so output keeps the program's order as
// far as it can be observed. wake is an eventfd poked when bash exits or the tree is killed. pump returns once bash has exited and the pipes are
// drained, or both pipes reached EOF and bash has exited.
func pump(outR, errR, wake int, exited <-chan struct{}, emit func(stderr bool, p []byte)) {
	buf := make([]byte, readSize)
	fds := [2]int{outR, errR}
	open := [2]bool{true, true}
	small := false // the last read returned less than coalesceBelow bytes
	// readOnce reads from pipe i; it reports whether data may remain.
	readOnce := func(i int) bool {
		for {
			n, err := unix.Read(fds[i], buf)
			switch {
			case n > 0:
				for p := buf[:n]; len(p) > 0; {
					c := p[:min(len(p), ChunkSize)]
					emit(i == 1, c)
					p = p[len(c):]
				}
				small = n < coalesceBelow
				return true
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.EAGAIN):
				return false
			default: // EOF or a read error: this pipe is done
				open[i] = false
				return false
			}
		}
	}
	set := make([]unix.PollFd, 0, 3)
	idx := make([]int, 0, 2)
	for {
		set, idx = set[:0], idx[:0]
		for i := range fds {
			if open[i] {
				set = append(set, unix.PollFd{Fd: int32(fds[i]), Events: unix.POLLIN})
				idx = append(idx, i)
			}
		}
		set = append(set, unix.PollFd{Fd: int32(wake), Events: unix.POLLIN})
		if small {
			small = false
			time.Sleep(coalesceDelay)
		}
		if _, err := unix.Poll(set, -1); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		for j, i := range idx {
			if set[j].Revents != 0 {
				readOnce(i)
			}
		}
		if set[len(set)-1].Revents != 0 {
			var b [8]byte
			_, _ = unix.Read(wake, b[:])
		}
		select {
		case <-exited:
			for i := range fds {
				for read := 0; open[i] && read < finalDrainCap; read += readSize {
					if !readOnce(i) {
						break
					}
				}
			}
			return
		default:
		}
		if !open[0] && !open[1] {
			break
		}
	}
	<-exited
}
