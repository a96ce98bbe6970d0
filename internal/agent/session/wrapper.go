package session

import (
	"bytes"
	"os"
	"regexp"
	"strings"
)

// MarkerEnv is the environment variable that marks every process of one command with the
// command's random exec ID, so its whole tree (even processes that called setsid) can be found
// in /proc and killed.
const MarkerEnv = "HUTCH_EXEC_ID"

// wrapperScript is run as `bash --norc --noprofile -c wrapperScript hutch STATEFILE COMMAND`.
// It evals the user's command in this shell, and in an EXIT trap writes the resulting logical
// cwd and exported variables to STATEFILE as NUL-terminated records: the cwd (with pwd's
// newline), then KEY=VALUE records, then a final "." record that proves the file is complete.
// Only bash builtins are used, so a command that breaks PATH still saves its state, and nothing
// forks: the exported variables are found by expanding every variable name (${!A*} … ${!_*})
// and keeping those with the export attribute (${name@a} contains x; bash ≥ 4.4), which saves
// the subshell that $(compgen -e) would cost on every command.
const wrapperScript = `__hutch_state=$1
__hutch_cmd=$2
shift 2
__hutch_save() {
  local __hutch_rc=$? __hutch_n IFS=$'\n'
  {
    builtin pwd
    builtin printf '\0'
    for __hutch_n in ${!A*} ${!B*} ${!C*} ${!D*} ${!E*} ${!F*} ${!G*} ${!H*} ${!I*} ${!J*} ${!K*} ${!L*} ${!M*} ${!N*} ${!O*} ${!P*} ${!Q*} ${!R*} ${!S*} ${!T*} ${!U*} ${!V*} ${!W*} ${!X*} ${!Y*} ${!Z*} ${!a*} ${!b*} ${!c*} ${!d*} ${!e*} ${!f*} ${!g*} ${!h*} ${!i*} ${!j*} ${!k*} ${!l*} ${!m*} ${!n*} ${!o*} ${!p*} ${!q*} ${!r*} ${!s*} ${!t*} ${!u*} ${!v*} ${!w*} ${!x*} ${!y*} ${!z*} ${!_*}; do
      [[ ${!__hutch_n@a} == *x* && -n ${!__hutch_n+x} ]] && builtin printf '%s=%s\0' "$__hutch_n" "${!__hutch_n}"
    done
    builtin printf '.\0'
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

// readState parses the state file at path. ok is false when the file is missing or incomplete
// (the command exec'd another program, or was killed).
func readState(path string) (st shellState, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return shellState{}, false
	}
	recs := bytes.Split(b, []byte{0})
	// A complete file ends with ".\x00": the split gives a trailing "." then "".
	if len(recs) < 3 || string(recs[len(recs)-2]) != "." || len(recs[len(recs)-1]) != 0 {
		return shellState{}, false
	}
	st.cwd = strings.TrimSuffix(string(recs[0]), "\n")
	st.env = make(map[string]string, len(recs))
	for _, r := range recs[1 : len(recs)-2] {
		k, v, found := strings.Cut(string(r), "=")
		if !found || droppedVars[k] {
			continue
		}
		st.env[k] = v
	}
	return st, st.cwd != ""
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
