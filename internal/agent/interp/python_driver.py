# hutch Python kernel driver: one long-lived process per code context. It speaks the driver
# protocol described in kernel_proc.go:
#   {"op":"configure","n":N,"cwd":"...","env":{...}} -> {"n":N,"type":"configured"} | {"n":N,"type":"fatal","value":...}
#   {"op":"run","n":N,"code":"..."} -> stdout/stderr/result/error events, then {"n":N,"type":"done","count":C}
# Commands come on fd 3 and events leave on fd 4, both moved at once to close-on-exec
# descriptors at a random number above 300 (fds 3 and 4 are closed), so child processes do not
# inherit them. fd 1 and 2 stay pipes read by the agent (output of child processes; the driver
# keeps hidden copies for its end-of-run markers and reopens them when the code closed them);
# sys.stdout/sys.stderr are replaced by writers that send events at once.
import io, json, os, re, signal, sys, threading


def _hide(fd, close=True):
    import fcntl, random
    try:
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, random.randrange(300, 900))
    except OSError:
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    if close:
        os.close(fd)
    return new


_cmd = os.fdopen(_hide(3), "r", encoding="utf-8")
_evt = os.fdopen(_hide(4), "w", encoding="utf-8")
# Copies of fds 1 and 2 (the pipes the agent reads): the end-of-run markers are written there.
_out1, _out2 = _hide(1, False), _hide(2, False)
del _hide
_lock = threading.Lock()
_ansi = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_nonce = [""]  # the command in progress: every event carries it


def send(ev):
    line = json.dumps(dict(n=_nonce[0], **ev), default=str, separators=(",", ":"))
    with _lock:
        # A SIGINT must not cut a line in half: it is held until the line is out.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            _evt.write(line + "\n")
            _evt.flush()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


# Bounds of one event, well below the agent's 64 MiB line limit (sizes of the JSON text).
MAX_VALUE = 16 << 20   # one MIME value of a result
MAX_BUNDLE = 40 << 20  # all values of a result
MAX_ERROR = 1 << 20    # an error's value, and its traceback


def _size(v):
    try:
        return len(json.dumps(v, default=str))
    except Exception:
        return MAX_BUNDLE + 1


def bounded(data):
    """Drops the MIME values of a result that are too large; text/plain then says so."""
    out, dropped, total = {}, [], 0
    for k, v in data.items():
        n = _size(v)
        if n > MAX_VALUE or total + n > MAX_BUNDLE:
            dropped.append("%s (%d bytes)" % (k, n))
            continue
        out[k] = v
        total += n
    if dropped:
        notice = ("[hutch: result too large: %s left out; one value may be at most %d MiB]"
                  % (", ".join(dropped), MAX_VALUE >> 20))
        if "text/plain" in out:
            send({"type": "stderr", "text": notice + "\n"})
        else:
            out["text/plain"] = notice
    return out


def _clip(s, limit=MAX_ERROR):
    if len(s) <= limit:
        return s
    return s[:limit] + "... [hutch: too large: %d more characters left out]" % (len(s) - limit)


def error_event(name, value, lines):
    kept, total = [], 0
    for l in lines:
        l = _clip(l, 64 << 10)
        total += len(l)
        if total > MAX_ERROR:
            kept.append("[hutch: traceback too large: %d more lines left out]" % (len(lines) - len(kept)))
            break
        kept.append(l)
    return {"type": "error", "name": name, "value": _clip(value), "traceback": kept}


def safe_str(value):
    try:
        s = str(value)
        if isinstance(s, str):
            return s
    except BaseException:
        pass
    return "<exception str() failed>"


def safe_type_name(t):
    """t.__name__, or "Exception" when it fails (a metaclass's __name__ property)."""
    try:
        n = t.__name__
        if isinstance(n, str):
            return n
    except BaseException:
        pass
    return "Exception"


def safe_name(e):
    return safe_type_name(type(e))


class Stream(io.TextIOBase):
    def __init__(self, name):
        self.name = name

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        # At most 64 Ki characters an event, so that a huge print does not make a huge frame.
        for i in range(0, len(s), 65536):
            send({"type": self.name, "text": s[i:i + 65536]})
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        return 1 if self.name == "stdout" else 2

    @property
    def encoding(self):
        return "utf-8"


try:
    sys.stdin = open(os.devnull, "r")
    os.dup2(sys.stdin.fileno(), 0)
except OSError:
    pass
sys.stdout = Stream("stdout")
sys.stderr = Stream("stderr")
os.environ.setdefault("MPLBACKEND", "Agg")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from traitlets.config import Config  # noqa: E402

_cfg = Config()
# History in memory: no sqlite file shared by the contexts, and no history thread (a SIGINT
# must reach the main thread).
_cfg.HistoryManager.hist_file = ":memory:"
shell = InteractiveShell.instance(config=_cfg, colors="NoColor")
shell.display_formatter.active_types = [
    "text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg",
    "image/svg+xml", "application/json", "application/javascript",
]
for t in shell.display_formatter.active_types:
    shell.display_formatter.formatters[t].enabled = True

_count = [None]


class Exit:
    """exit() and quit(): raise SystemExit, which ends the run with an error named SystemExit;
    the context keeps its state (as in IPython, whose own exit needs a terminal)."""

    def __repr__(self):
        return "Use exit() to raise SystemExit; the context keeps its state"

    def __call__(self, code=None):
        raise SystemExit() if code is None else SystemExit(code)


shell.user_ns["exit"] = shell.user_ns["quit"] = Exit()
shell.user_ns_hidden["exit"] = shell.user_ns_hidden["quit"] = shell.user_ns["exit"]
import warnings  # noqa: E402
warnings.filterwarnings("ignore", message="To exit: use 'exit', 'quit', or Ctrl-D.")


def bundle(data):
    out = {}
    for k, v in data.items():
        if k == "application/json":
            out[k] = v
        elif isinstance(v, bytes):
            import base64
            out[k] = base64.b64encode(v).decode("ascii")
        elif isinstance(v, list):
            out[k] = "".join(map(str, v))
        else:
            out[k] = v
    return out


def publish(data, metadata=None, source=None, *, transient=None, update=False, **kw):
    send({"type": "result", "data": bounded(bundle(data)), "count": _count[0]})


shell.display_pub.publish = publish


def _json_formatter(obj):
    try:
        json.dumps(obj)
    except (TypeError, ValueError):
        return None
    return obj


for _t in (dict, list):
    shell.display_formatter.formatters["application/json"].for_type(_t, _json_formatter)


shell.displayhook.write_format_data = lambda data, md=None: send(
    {"type": "result", "data": bounded(bundle(data)), "count": _count[0]})
shell.displayhook.write_output_prompt = lambda: None
shell.displayhook.start_displayhook = lambda: None
shell.displayhook.finish_displayhook = lambda: None

_err = [None]


def showtraceback(exc_tuple=None, filename=None, tb_offset=None, exception_only=False,
                  running_compiled_code=False):
    try:
        etype, value, tb = shell._get_exc_info(exc_tuple)
    except ValueError:
        return
    try:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    except BaseException:  # a failing __str__ of the exception, say
        import traceback
        try:
            stb = traceback.format_exception(etype, value, tb)
        except BaseException:
            stb = ["%s: %s" % (safe_type_name(etype), safe_str(value))]
    lines = []
    for part in stb:
        lines.extend(_ansi.sub("", part).split("\n"))
    _err[0] = error_event(safe_type_name(etype), safe_str(value), lines)


shell.showtraceback = showtraceback


def showsyntaxerror(filename=None, running_compiled_code=False):
    import traceback
    etype, value, _ = sys.exc_info()
    if etype is None:
        return
    lines = []
    for part in traceback.format_exception_only(etype, value):
        lines.extend(part.rstrip("\n").split("\n"))
    _err[0] = error_event(safe_type_name(etype), safe_str(value), lines)


shell.showsyntaxerror = showsyntaxerror


def flush_figures():
    mpl = sys.modules.get("matplotlib.pyplot")
    if mpl is None:
        return
    try:
        import base64
        for num in mpl.get_fignums():
            fig = mpl.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            send({"type": "result", "data": bounded({
                "text/plain": "<%s>" % type(fig).__name__,
                "image/png": base64.b64encode(buf.getvalue()).decode("ascii")}), "count": _count[0]})
        mpl.close("all")
    except Exception as e:  # a broken figure must not kill the kernel
        send({"type": "stderr", "text": "hutch: could not render a figure: %s\n" % e})


# Where SIGINT is delivered: only user code gets a KeyboardInterrupt. A SIGINT that arrives
# while the driver reads a command, finishes a run (events, markers, "done") or sits between
# runs is dropped: a KeyboardInterrupt there would lose the run's "done" and wedge the run.
# Blocking the signal is not enough: a SIGINT caught just before the block still runs its
# Python handler at the next bytecode, wherever that is. One that arrives after a run command
# was read but before its code started is kept and raised when the code starts.
_IDLE, _ARMED, _USER = 0, 1, 2
_sigstate = [_IDLE]
_pending = [False]
_done = [False]  # "done" was sent for the run in progress


def _on_sigint(signum, frame):
    if _sigstate[0] == _USER:
        raise KeyboardInterrupt
    if _sigstate[0] == _ARMED:
        _pending[0] = True


def run(code):
    _err[0] = None
    res = None
    try:
        _count[0] = shell.execution_count
        try:
            _sigstate[0] = _USER
            if _pending[0]:
                raise KeyboardInterrupt
            res = shell.run_cell(code, store_history=True)
        finally:
            _sigstate[0] = _IDLE
            _pending[0] = False
    except BaseException:
        # KeyboardInterrupt, ValueError for NUL bytes (raised before IPython's own handling),
        # or an exception of a display hook or of showing an exception: the run's error.
        _sigstate[0] = _IDLE
        try:
            showtraceback()
        except BaseException:
            e = sys.exc_info()[1]
            _err[0] = error_event(safe_name(e), safe_str(e), [])
        res = None
    try:
        finish(res)
    except BaseException:
        # A driver failure must not lose "done" (main sends it): the agent waits for it.
        e = sys.exc_info()[1]
        send(error_event("InternalError", "hutch: the driver failed to finish the run: %s: %s"
                         % (safe_name(e), safe_str(e)), []))


def finish(res):
    flush_figures()
    if res is not None and _err[0] is None:
        e = res.error_before_exec or res.error_in_exec
        if e is not None:
            _err[0] = error_event(safe_name(e), safe_str(e), [])
    if _err[0] is not None:
        send(_err[0])
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)  # the code asked for the default: ours
    # The markers go through the driver's own copies of fds 1 and 2 (the code may have closed
    # or redirected them); fds the code closed are reopened for later child processes.
    marker = ("\x00\x1bhutch-sync:%s\x00" % _nonce[0]).encode()
    for fd, copy in ((1, _out1), (2, _out2)):
        try:
            os.fstat(fd)
        except OSError:
            try:
                os.dup2(copy, fd)
            except OSError:
                pass
        try:
            os.write(copy, marker)
        except OSError:
            pass
    send({"type": "done", "count": _count[0]})
    _done[0] = True


def main():
    signal.signal(signal.SIGINT, _on_sigint)
    send({"type": "ready", "pid": os.getpid()})
    while True:
        line = _cmd.readline()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        _nonce[0] = msg.get("n", "")
        op = msg.get("op")
        if op == "run":
            _pending[0], _done[0] = False, False
            _sigstate[0] = _ARMED
            try:
                run(msg.get("code", ""))
            except BaseException:
                pass  # run() reports its own failures; this is a last resort
            _sigstate[0] = _IDLE
            if not _done[0]:
                send({"type": "done", "count": _count[0]})
        elif op == "configure":
            try:
                if msg.get("env"):
                    os.environ.update(msg["env"])
                if msg.get("cwd"):
                    os.chdir(msg["cwd"])
                send({"type": "configured"})
            except Exception as e:
                send({"type": "fatal", "value": "%s: %s" % (type(e).__name__, e)})


main()
