package session

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strings"
)

// MarkerEnv is the environment variable that marks every process of one command with the
// command's random exec ID, so its whole tree (even processes that called setsid) can be found
// in /proc and killed.
const MarkerEnv = "HUTCH_EXEC_ID"

// shellScript is run as `bash --norc --noprofile -c shellScript hutch STATEFILE`, with the
// command's payload (see payload) arriving on fd 3 and the command's stdin, when it has one, on
// fd 4. The shell can be started long before its command is known: it blocks reading fd 3
// (`source` reads the pipe to EOF), closes it, checks that the payload is complete (an
// agent that died or a discarded shell gives EOF without one: exit 125, nothing saved), then
// evals the user's command here, on line 17 like the one-shot wrapper before it, so bash's
// "hutch: line N:" messages keep their numbers. An EXIT trap writes the resulting logical cwd
// and exported variables to STATEFILE: the cwd (with pwd's newline), NUL, the output of
// `declare -px`, then NUL "." NUL, which proves the file is complete. Only bash builtins are
// used, so a command that breaks PATH still saves its state, and nothing forks. `declare -px`
// is one builtin (bash quotes the values; parseExports reads them back); a loop over the
// variables in bash costs about five times as much.
const shellScript = `__hutch_state=$1; shift
builtin source /proc/self/fd/3; exec 3<&-
[[ ${__hutch_go-} == 1 ]] || builtin exit 125
# On exit, save the state:
#   cwd NUL declare-px NUL . NUL
__hutch_save() {
  local __hutch_rc=$?
  {
    builtin pwd
    builtin printf '\0'
    builtin declare -px
    builtin printf '\0.\0'
  } >"$__hutch_state" 2>/dev/null
  return $__hutch_rc
}
trap __hutch_save EXIT
eval "$__hutch_cmd"
`

// shellState is what a command left behind.
type shellState struct {
	cwd string
	env map[string]string
}

// droppedVars are exported variables that bash manages itself and that never persist.
var droppedVars = map[string]bool{"_": true, "SHLVL": true, "PWD": true, MarkerEnv: true}

// identPattern matches the variable names bash can hold; other names in the environment pass
// through bash untouched and invisible.
var identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// errBadState is readState's error for a complete state file it cannot parse.
var errBadState = errors.New("state file: unexpected declare -px output")

// readState parses the state file at path. ok is false when the file is missing or incomplete
// (the command exec'd another program, or was killed), or malformed; err is errBadState in
// the last case.
func readState(path string) (st shellState, ok bool, err error) {
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		return shellState{}, false, nil
	}
	cwd, rest, found := bytes.Cut(b, []byte{0})
	decl, complete := bytes.CutSuffix(rest, []byte("\x00.\x00"))
	if !found || !complete {
		return shellState{}, false, nil
	}
	env, ok := parseExports(decl)
	if !ok {
		return shellState{}, false, errBadState
	}
	for k := range env {
		if droppedVars[k] {
			delete(env, k)
		}
	}
	st = shellState{cwd: strings.TrimSuffix(string(cwd), "\n"), env: env}
	return st, st.cwd != "", nil
}

// mergeState computes a session's new env and cwd after a command.
//   - old/oldCwd: the session's state before the command.
//   - cmdEnv/cmdCwd: the per-command env and cwd ("" when none); these do not persist unless the
//     command itself changed them.
//   - st: what the command left behind.
func mergeState(old map[string]string, oldCwd string, cmdEnv map[string]string, cmdCwd string, st shellState) (map[string]string, string) {
	env := st.env
	// Names bash cannot hold were passed through untouched: keep them.
	for k, v := range old {
		if !identPattern.MatchString(k) {
			env[k] = v
		}
	}
	for k, v := range cmdEnv {
		nv, present := env[k]
		if !present || nv != v {
			continue // the command unset or changed it: that persists
		}
		if ov, had := old[k]; had {
			env[k] = ov
		} else {
			delete(env, k)
		}
	}
	cwd := st.cwd
	if cmdCwd != "" && cwd == cmdCwd {
		cwd = oldCwd
	}
	return env, cwd
}
