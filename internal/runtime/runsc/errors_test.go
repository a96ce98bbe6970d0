package runsc

import (
	"errors"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestRunscError(t *testing.T) {
	cause := errors.New("exit status 128")
	for _, tc := range []struct {
		stderr string
		want   error
	}{
		{`loading container "x": file does not exist`, errdefs.ErrNotFound},
		{"creating container: container with id x already exists", errdefs.ErrAlreadyExists},
		{"pausing container: container x is not running", errdefs.ErrFailedPrecondition},
		{"cannot pause container \"x\" in state Paused", errdefs.ErrFailedPrecondition},
		{"something odd\n", errdefs.ErrInternal},
	} {
		err := runscError("op", "x", cause, tc.stderr)
		if !errors.Is(err, tc.want) || !errors.Is(err, cause) {
			t.Errorf("%q: %v, want class %v", tc.stderr, err, tc.want)
		}
	}
	log := "I1130 03:27:46.0 1 main.go:1] starting\n" +
		`{"msg":"running container: failed to load /x: no such file or directory","level":"error","time":"t"}` + "\n"
	if got := errorLines(log); got != "running container: failed to load /x: no such file or directory" {
		t.Errorf("errorLines = %q", got)
	}
}
