package session

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/reaper"
)

// shell is a started bash running shellScript: blocked reading its payload from fd 3 until it
// is given a command. It is either idle (a session's warm shell, owned by the Session) or owned
// by the one Exec that took it.
type shell struct {
	cmd       *exec.Cmd
	pid       int               // also its process group ID
	execID    string            // its MarkerEnv value, unique to this shell
	statePath string            // where its EXIT trap saves the state
	cwd       string            // the session cwd it was started in
	dir       os.FileInfo       // that directory as it was at the start (inDir)
	env       map[string]string // the env it was started with, without MarkerEnv and PWD
	outR      int               // stdout read end (non-blocking, close-on-exec)
	errR      int               // stderr read end
	script    *os.File          // write end of its fd 3
	stdin     *os.File          // write end of its fd 4
	status    *os.File          // read end of the shim's start-status pipe; nil without one
	exited    chan struct{}     // closed once bash has been reaped
	waitErr   error             // cmd.Wait's error; valid once exited is closed
}

// bashPath is the shell used for every command.
func bashPath() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/bash"
}

// spawnShell starts bash in cwd with env (plus a fresh MarkerEnv and PWD=cwd), in its own
// process group, with stdin /dev/null, stdout and stderr on fresh pipes, the payload pipe on
// fd 3 and a stdin pipe on fd 4. It creates the shell's (empty) state file in stateDir. env is kept as the shell's snapshot and must not be changed
// afterwards. The returned shell waits for its payload; give it one with shell.exec or end it
// with shell.discard.
func spawnShell(env map[string]string, cwd, stateDir string, shim []string) (*shell, error) {
	return spawn(env, cwd, stateDir, shim, false)
}

// spawn is spawnShell; with report and a shim, the shim also gets a start-status pipe on fd 5
// (reaper.StatusFDEnv), whose read end is sh.status.
func spawn(env map[string]string, cwd, stateDir string, shim []string, report bool) (_ *shell, err error) {
	execID := newExecID()
	sh := &shell{execID: execID, statePath: filepath.Join(stateDir, execID+".state"), cwd: cwd, env: env,
		outR: -1, errR: -1, exited: make(chan struct{})}
	var toClose []*os.File // the child's ends, closed once it has them
	defer func() {
		for _, f := range toClose {
			f.Close()
		}
		if err != nil {
			sh.closeFDs()
		}
	}()
	var outW, errW, scriptR, stdinR *os.File
	if sh.outR, outW, err = pipe(); err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	toClose = append(toClose, outW)
	if sh.errR, errW, err = pipe(); err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	toClose = append(toClose, errW)
	if scriptR, sh.script, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("payload pipe: %w", err)
	}
	toClose = append(toClose, scriptR)
	if stdinR, sh.stdin, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	toClose = append(toClose, stdinR)
	var statusW *os.File
	if report && len(shim) > 0 {
		if sh.status, statusW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("status pipe: %w", err)
		}
		toClose = append(toClose, statusW)
	}
	// Creating a file can cost the better part of a millisecond (overlayfs, ext4); done here,
	// it is off the exec path of a warm shell, whose EXIT trap only truncates it.
	f, err := os.OpenFile(sh.statePath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(sh.statePath)
		}
	}()

	full := make([]string, 0, len(env)+2)
	for k, v := range env {
		if k != MarkerEnv && k != "PWD" {
			full = append(full, k+"="+v)
		}
	}
	full = append(full, MarkerEnv+"="+execID, "PWD="+cwd)
	slices.Sort(full)

	argv := append(slices.Clone(shim), bashPath(), "--norc", "--noprofile", "-c", shellScript, "hutch", sh.statePath)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cwd
	cmd.Env = full
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{scriptR, stdinR}
	if statusW != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, statusW)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", reaper.StatusFDEnv, 3+len(cmd.ExtraFiles)-1))
	}
	// A session of its own (so a process group of its own): a command can then never join
	// the agent's process group or another command's (setpgid works within a session only),
	// which the memory guard of a gVisor sandbox relies on when it kills by process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The directory the shell starts in, for inDir: /proc/<pid>/cwd of a shim is refused to
	// the agent (shims are non-dumpable). Taken before the start: a directory replaced in
	// between makes inDir false, and the shell is not reused.
	sh.dir, _ = os.Stat(cwd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bash: %w", err)
	}
	sh.cmd, sh.pid = cmd, cmd.Process.Pid
	go func() {
		// Exits when bash exits.
		sh.waitErr = cmd.Wait()
		close(sh.exited)
	}()
	return sh, nil
}

// alive reports whether bash has not exited yet.
func (sh *shell) alive() bool {
	select {
	case <-sh.exited:
		return false
	default:
		return true
	}
}

// inDir reports whether the shell's working directory is still the directory cwd names (it is
// not when cwd was removed and made again, or is a symlink that now points elsewhere).
func (sh *shell) inDir(cwd string) bool {
	if sh.dir == nil {
		return false
	}
	want, err := os.Stat(cwd)
	return err == nil && os.SameFile(sh.dir, want)
}

// closeFDs closes the agent's ends of the shell's pipes (idempotent).
func (sh *shell) closeFDs() {
	if sh.outR >= 0 {
		unix.Close(sh.outR)
		sh.outR = -1
	}
	if sh.errR >= 0 {
		unix.Close(sh.errR)
		sh.errR = -1
	}
	if sh.script != nil {
		sh.script.Close()
	}
	if sh.stdin != nil {
		sh.stdin.Close()
	}
	if sh.status != nil {
		sh.status.Close()
	}
}

// discard ends an idle shell: it kills its process group and anything carrying its marker,
// closes the pipes and waits until bash is reaped. It returns the number of marked processes
// that survived (0 on success).
func (sh *shell) discard() int {
	left := 0
	if sh.alive() {
		left = killTree(sh.pid, sh.execID)
	}
	sh.closeFDs()
	<-sh.exited
	os.Remove(sh.statePath)
	return left
}

// specialVars are names that bash treats specially at start-up or on assignment, so that
// `export NAME=value` in a running shell is not the same as NAME in its initial environment.
// A per-command env with such a name gets a freshly started shell.
var specialVars = map[string]bool{
	"_": true, "IFS": true, "OPTIND": true, "OPTERR": true, "SHLVL": true, "PS1": true, "PS2": true,
	"PS4": true, "PWD": true, "OLDPWD": true, "SHELLOPTS": true, "ENV": true, "POSIXLY_CORRECT": true,
	"EUID": true, "UID": true, "PPID": true, "GROUPS": true, "DIRSTACK": true, "RANDOM": true,
	"SRANDOM": true, "SECONDS": true, "LINENO": true, "HISTCMD": true, "EPOCHREALTIME": true,
	"EPOCHSECONDS": true, "FUNCNAME": true, "LANG": true,
}

// exportable reports whether the per-command variable k can be applied with `export` in a
// shell started earlier, with the same effect as having k in its initial environment.
func exportable(k, v string) bool {
	return identPattern.MatchString(k) && !specialVars[k] && strings.IndexByte(v, 0) < 0 &&
		!strings.HasPrefix(k, "BASH") && !strings.HasPrefix(k, "COMP_") && !strings.HasPrefix(k, "LC_")
}

// shellQuote quotes s for bash as one word: in single quotes, each single quote in s closed,
// backslash-escaped and reopened. s must not contain NUL.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// payload is the script a shell sources from fd 3 before it evals the command: it sets the
// command, changes to cdTo (when not empty; OLDPWD is kept as it was, as if the shell had been
// started there) with the same failure as a missing cwd, exports env (MarkerEnv is skipped),
// resets SECONDS when resetSeconds (the shell may have been idle for a while; not done when
// SECONDS came from the environment), moves fd 4 to stdin when withStdin (else closes it, and
// stdin stays /dev/null), and finally marks the payload complete. The fd moves use a plain
// `exec`: `builtin exec` would apply its redirections to the builtin call only.
func payload(command string, env map[string]string, cdTo string, withStdin, resetSeconds bool) []byte {
	var b strings.Builder
	b.Grow(len(command) + 256)
	b.WriteString("__hutch_cmd=")
	b.WriteString(shellQuote(command))
	b.WriteByte('\n')
	if cdTo != "" {
		q := shellQuote(cdTo)
		b.WriteString("__hutch_o=${OLDPWD-} __hutch_os=${OLDPWD+x}\n")
		b.WriteString("builtin cd -- " + q + " 2>/dev/null || { builtin printf 'hutch: cd: %s: No such file or directory\\n' " +
			q + " >&2; builtin exit 1; }\n")
		b.WriteString("if [[ -n $__hutch_os ]]; then OLDPWD=$__hutch_o; else builtin unset OLDPWD; builtin declare -x OLDPWD; fi\n")
		b.WriteString("builtin unset __hutch_o __hutch_os\n")
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == MarkerEnv {
			continue
		}
		b.WriteString("builtin export " + k + "=" + shellQuote(env[k]) + "\n")
	}
	if resetSeconds {
		b.WriteString("SECONDS=0\n")
	}
	if withStdin {
		b.WriteString("exec 0<&4 4<&-\n")
	} else {
		b.WriteString("exec 4<&-\n")
	}
	b.WriteString("__hutch_go=1\n")
	return []byte(b.String())
}
