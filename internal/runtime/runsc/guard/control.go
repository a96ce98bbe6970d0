package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The memory guard signals a sandbox's process groups through the Sentry's control socket,
// as `runsc kill --pgid` does, without the runsc command: runsc refuses to signal a paused
// sandbox (its container state says "paused"), while the Sentry delivers a signal to stopped
// tasks, which act on it before they run again. A fork bomb killed while paused forks no more
// once resumed; killed after the resume it forks until the kill reaches it, at up to one CPU's
// pace (measured: 165 MiB more on the host in the kill's 0.7 s). It also spares the runsc
// command's start for each round.
//
// The wire format is gVisor's urpc (gvisor.dev/gvisor/pkg/urpc, at the RUNSC_VERSION
// scripts/host-setup.sh pins): the client writes a JSON object {"method": NAME, "arg": ARG}
// on the stream socket <root>/runsc-<id>.sock (runsc/sandbox: controlSocketName, created in
// --root first), the Sentry answers {"success": BOOL, "err": TEXT, "result": …}. The method
// is runsc/boot's "containerManager.Signal" with boot.SignalArgs; mode 3 is
// boot.DeliverToProcessGroup, whose PID field holds the process group ID. When the socket is
// missing or the Sentry does not know the method (another runsc), the guard falls back to
// `runsc kill` (errNoControl).

// controlSignalMethod and deliverToProcessGroup are runsc/boot's ContMgrSignal and
// DeliverToProcessGroup.
const (
	controlSignalMethod   = "containerManager.Signal"
	deliverToProcessGroup = 3
)

// controlTimeout bounds a control call; controlReplyMax the reply read (a Sentry's reply is not
// trusted to end).
const (
	controlTimeout  = 10 * time.Second
	controlReplyMax = 1 << 20
)

// errNoControl wraps the failures after which `runsc kill` may still work: no control socket,
// no connection, a call the Sentry does not know.
var errNoControl = errors.New("runsc control socket unusable")

// ErrGroupGone is SignalGroup's error when the group has no process left to signal.
var ErrGroupGone = errors.New("no such process group")

// signalArgs is runsc/boot's SignalArgs (urpc encodes it with encoding/json, by field name).
type signalArgs struct {
	CID   string
	Signo int32
	PID   int32
	Mode  int
}

// controlSocket returns the path of id's control socket.
func (s *Supervisor) controlSocket(id string) string {
	return filepath.Join(s.root, "runsc-"+s.cliID(id)+".sock")
}

// SignalGroup sends sig to process group pgid of id through the control socket, whether the
// sandbox runs or is paused. Errors: ErrGroupGone (no such group, or none of its processes in
// the container); errNoControl (wrapped; `runsc kill` may work); another refusal of the Sentry.
func (s *Supervisor) SignalGroup(ctx context.Context, id string, pgid int, sig unix.Signal) error {
	arg := signalArgs{CID: s.cliID(id), Signo: int32(sig), PID: int32(pgid), Mode: deliverToProcessGroup}
	err := s.controlCall(ctx, id, controlSignalMethod, arg)
	if err != nil && strings.Contains(err.Error(), "no such process") { // "no such process group with PGID N"
		return fmt.Errorf("%w: %w", ErrGroupGone, err)
	}
	return err
}

// controlCall makes one urpc call on id's control socket and returns the Sentry's refusal, if
// any, as an error.
func (s *Supervisor) controlCall(ctx context.Context, id, method string, arg any) error {
	conn, err := dialControl(ctx, s.controlSocket(id))
	if err != nil {
		return fmt.Errorf("%w: %w", errNoControl, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(controlTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	req, err := json.Marshal(struct {
		Method string `json:"method"`
		Arg    any    `json:"arg"`
	}{method, arg})
	if err != nil {
		return err
	}
	if _, err := conn.Write(req); err != nil {
		return fmt.Errorf("%w: %s: %w", errNoControl, method, err)
	}
	var reply struct {
		Success bool   `json:"success"`
		Err     string `json:"err"`
	}
	if err := json.NewDecoder(io.LimitReader(conn, controlReplyMax)).Decode(&reply); err != nil {
		return fmt.Errorf("%w: %s: reply: %w", errNoControl, method, err)
	}
	if !reply.Success {
		if reply.Err == "unknown method" { // urpc's ErrUnknownMethod
			return fmt.Errorf("%w: %s: %s", errNoControl, method, reply.Err)
		}
		return fmt.Errorf("%s %s: %s", method, id, reply.Err)
	}
	return nil
}

// dialControl connects to the stream socket at path. A path too long for a socket address
// (108 bytes) is reached through /proc/self/fd, as runsc does.
func dialControl(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) < len(unix.RawSockaddrUnix{}.Path) {
		return d.DialContext(ctx, "unix", path)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
