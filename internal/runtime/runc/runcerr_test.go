package runc

import (
	"errors"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestRuncError(t *testing.T) {
	cause := errors.New("exit status 1")
	for _, tc := range []struct {
		stderr string
		want   error
	}{
		{`time="2026-11-29T19:54:32Z" level=error msg="container does not exist"`, errdefs.ErrNotFound},
		{`{"level":"error","msg":"container with given ID already exists","time":"x"}`, errdefs.ErrAlreadyExists},
		{`time="x" level=error msg="cannot delete container abc that is not stopped: running"`, errdefs.ErrFailedPrecondition},
		{`time="x" level=error msg="container not running"`, errdefs.ErrFailedPrecondition},
		{"something odd\n", errdefs.ErrInternal},
	} {
		err := runcError("op", "abc", cause, tc.stderr)
		if !errors.Is(err, tc.want) || !errors.Is(err, cause) {
			t.Errorf("%q: %v, want class %v", tc.stderr, err, tc.want)
		}
	}
	if got := lastErrorLine(`time="x" level=error msg="quote \"q\" here"` + "\n\n"); got != `quote "q" here` {
		t.Errorf("lastErrorLine = %q", got)
	}
}
