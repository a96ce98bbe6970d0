package session

import (
	"errors"

	"golang.org/x/sys/unix"
)

// finalDrainCap bounds what is read from one pipe after bash has exited: what bash and its
// foreground children wrote fits in the pipe buffer (at most 1 MiB by default); anything beyond
// comes from background processes that outlive the command and is not part of its output.
const finalDrainCap = 2 << 20

// pump reads the non-blocking pipe read ends outR and errR from this one goroutine and calls
// emit for each chunk (≤ ChunkSize bytes). When both pipes are readable, stdout is read first,
// so output keeps the program's order as far as it can be observed. wake is an eventfd poked
// when bash exits or the tree is killed. pump returns once bash has exited and the pipes are
// drained, or both pipes reached EOF and bash has exited.
func pump(outR, errR, wake int, exited <-chan struct{}, emit func(stderr bool, p []byte)) {
	buf := make([]byte, ChunkSize)
	fds := [2]int{outR, errR}
	open := [2]bool{true, true}
	// readOnce reads one chunk from pipe i; it reports whether data may remain.
	readOnce := func(i int) bool {
		for {
			n, err := unix.Read(fds[i], buf)
			switch {
			case n > 0:
				emit(i == 1, buf[:n])
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
				for read := 0; open[i] && read < finalDrainCap; read += ChunkSize {
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
