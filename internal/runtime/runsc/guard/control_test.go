package guard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeSentry serves id's control socket under root with reply (raw bytes) to every call, and
// sends each decoded request on got. Logic only: the real Sentry is TestSignalGroupWhilePaused.
func fakeSentry(t *testing.T, root, id string, reply []byte) <-chan map[string]any {
	t.Helper()
	s := testSupervisor(root)
	// Bound at a short path and moved: the socket's path may be too long for an address.
	short, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	l, err := net.Listen("unix", filepath.Join(short, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Rename(filepath.Join(short, "s"), s.controlSocket(id)); err != nil {
		t.Fatal(err)
	}
	got := make(chan map[string]any, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var req map[string]any
				if err := json.NewDecoder(c).Decode(&req); err != nil {
					return
				}
				got <- req
				if reply == nil { // an endless reply
					for {
						if _, err := c.Write([]byte(`{"success":true,"err":"`)); err != nil {
							return
						}
					}
				}
				c.Write(reply)
			}()
		}
	}()
	return got
}

func TestSignalGroup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   string // "" no socket; "endless" a reply that never ends
		longDir bool   // a root too long for a socket address
		wantErr error  // nil: success; errors.ErrUnsupported: another error than the sentinels
	}{
		{"delivered", `{"success":true,"err":"","result":{}}`, false, nil},
		{"delivered, long socket path", `{"success":true,"err":"","result":{}}`, true, nil},
		{"no such group", `{"success":false,"err":"no such process group with PGID 42","result":null}`, false, ErrGroupGone},
		{"group of exiting processes", `{"success":false,"err":"no such process","result":null}`, false, ErrGroupGone},
		{"another refusal", `{"success":false,"err":"process group 42 does not belong to container \"x.\"","result":null}`, false, errors.ErrUnsupported},
		{"unknown method: another runsc", `{"success":false,"err":"unknown method","result":null}`, false, errNoControl},
		{"not JSON", `<html>`, false, errNoControl},
		{"endless reply", "endless", false, errNoControl},
		{"no socket", "", false, errNoControl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.longDir {
				root = filepath.Join(root, strings.Repeat("d", 100))
				if err := os.Mkdir(root, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			s := testSupervisor(root)
			var got <-chan map[string]any
			switch tc.reply {
			case "":
			case "endless":
				got = fakeSentry(t, root, "sb", nil)
			default:
				got = fakeSentry(t, root, "sb", []byte(tc.reply))
			}
			if tc.longDir && len(s.controlSocket("sb")) < len(unix.RawSockaddrUnix{}.Path) {
				t.Fatalf("socket path %q is not too long for an address", s.controlSocket("sb"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := s.SignalGroup(ctx, "sb", 42, unix.SIGKILL)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("SignalGroup = %v, want success", err)
			case errors.Is(tc.wantErr, errors.ErrUnsupported) && (err == nil || errors.Is(err, ErrGroupGone) || errors.Is(err, errNoControl)):
				t.Fatalf("SignalGroup = %v, want the Sentry's refusal", err)
			case tc.wantErr != nil && !errors.Is(tc.wantErr, errors.ErrUnsupported) && !errors.Is(err, tc.wantErr):
				t.Fatalf("SignalGroup = %v, want %v", err, tc.wantErr)
			}
			if got == nil {
				return
			}
			req := <-got
			want := map[string]any{"method": "containerManager.Signal", "arg": map[string]any{"CID": "sb.", "Signo": 9.0, "PID": 42.0, "Mode": 3.0}}
			if b, w := mustJSON(t, req), mustJSON(t, want); b != w {
				t.Errorf("request = %s, want %s", b, w)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testSupervisor is a Supervisor with no driver whose control sockets are under root, for the
// logic of the control calls.
func testSupervisor(root string) *Supervisor {
	return &Supervisor{root: root, cliID: func(id string) string { return id + "." }, log: slog.New(slog.DiscardHandler)}
}
