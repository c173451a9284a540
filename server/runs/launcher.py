"""The launcher: the first (and only) Python process started in a sandbox.

The server runs `python3 -I -c <this file's source> <settings JSON>` inside
bubblewrap, a Docker container or a plain child process, so the sandbox
needs nothing but a Python interpreter. The launcher

1. lowers its own limits (CPU time, memory, processes, file size, open
   files) and priority, which its child inherits;
2. says it is ready, then waits for the `go` frame naming the program:
   this lets the server start sandboxes ahead of time, so Run starts at once;
3. forks the student's program onto a pseudo-terminal (so prompts, echo and
   Ctrl-C behave as in a terminal) with stderr on a separate pipe (so the
   console can show it distinctly), in this same interpreter: no second
   interpreter start;
4. relays: PTY output to its stdout, the program's stderr to its stderr,
   and frames from its stdin to the PTY. It writes with blocking writes, so
   when the server stops reading, the program stops at its next print
   instead of anything buffering without bound;
5. ends the run with a status sequence on stdout, then exits, or, when it
   may serve more runs (settings "runs", only as the first process of a PID
   namespace), marks the end of stderr, kills everything the run left in
   the namespace, and says ready again. Each run is a fresh fork of the
   same never-used interpreter, so no run sees another's state.

Frames on stdin: 1 byte type, 4 bytes big-endian length, payload.
  g go {"path", "args", "cols", "rows"}   d stdin bytes   r resize {"cols","rows"}
  i interrupt (SIGINT to the program)     e end of input (Ctrl-D)

Sequences (OSC, as terminals use them), the launcher's own on stdout:
  ESC ] 7012 ; ready BEL          ESC ] 7012 ; exit ; {json} BEL
and on stderr, between runs:  ESC ] 7012 ; end BEL
The program's own (from the matplotlib backend below), on stdout:
  ESC ] 7011 ; image ; <base64 PNG> BEL
A program that prints ESC ] 7012 ; itself has it defanged on the way, so it
cannot end a run early or pose as the launcher.

It must run on any Python 3.8+ with the standard library only, and is kept
self-contained because it is passed as source text.
"""
import errno
import fcntl
import io
import json
import os
import resource
import runpy  # imported before `ready`, so the run does not wait for them
import select
import signal
import struct
import sys
import termios
import time
import traceback

CTL = b"\x1b]7012;"  # the launcher's own sequences
DEFANGED = b"\x1b]7012_"  # what becomes of CTL in a program's output
BEL = b"\x07"

MPL_BACKEND = r'''
"""Matplotlib backend: plt.show() and savefig() send PNGs to the console."""
import base64, io, os
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
import matplotlib.figure

def _emit(fig):
    buf = io.BytesIO()
    _savefig(fig, buf, format="png")
    data = b"\x1b]7011;image;" + base64.b64encode(buf.getvalue()) + b"\x07"
    import sys
    sys.stdout.flush()
    fd = sys.stdout.fileno()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

class FigureCanvas(FigureCanvasAgg):
    pass

class FigureManager(FigureManagerBase):
    def show(self):
        _emit(self.canvas.figure)

def show(*args, **kwargs):
    import matplotlib.pyplot as plt
    for num in plt.get_fignums():
        _emit(plt.figure(num))
    plt.close("all")

_savefig = matplotlib.figure.Figure.savefig

def _savefig_and_show(self, *args, **kwargs):
    result = _savefig(self, *args, **kwargs)
    _emit(self)
    return result

matplotlib.figure.Figure.savefig = _savefig_and_show
FigureCanvas.manager_class = FigureManager
'''


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def apply_limits(limits):
    names = {"cpu_seconds": resource.RLIMIT_CPU, "memory_bytes": resource.RLIMIT_AS,
             "processes": resource.RLIMIT_NPROC, "file_bytes": resource.RLIMIT_FSIZE,
             "open_files": resource.RLIMIT_NOFILE}
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, which in names.items():
        value = limits.get(key)
        if value:
            # CPU: SIGXCPU at the soft limit, SIGKILL one second later.
            hard = value + 1 if which == resource.RLIMIT_CPU else value
            resource.setrlimit(which, (value, hard))


def read_frame(fd, buf):
    """(type, payload, rest) from buf, reading more when needed; type None at EOF."""
    while True:
        if len(buf) >= 5:
            kind, size = buf[:1], struct.unpack(">I", buf[1:5])[0]
            if len(buf) >= 5 + size:
                return kind, buf[5:5 + size], buf[5 + size:]
        chunk = os.read(fd, 65536)
        if not chunk:
            return None, b"", buf
        buf += chunk


def set_size(fd, cols, rows):
    cols = max(10, min(int(cols), 500))
    rows = max(2, min(int(rows), 200))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def run_program(path, args, slave, err_w, status_w, own_session):
    """In the forked child: take the terminal's foreground, run the program."""
    if own_session:  # the launcher could not own the terminal: take it ourselves
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    else:
        # In the launcher's session (so in its lowered scheduling group), as
        # the terminal's foreground process group: Ctrl-C and reads reach it.
        os.setpgid(0, 0)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(slave, os.getpid())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.dup2(slave, 0)
    os.dup2(slave, 1)
    os.dup2(err_w, 2)
    for fd in (slave, err_w):
        if fd > 2:
            os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(signal.set_wakeup_fd(-1))  # the launcher's, not the program's
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8",
                                                 errors="replace")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True)
    import builtins
    builtins.input = _input
    sys.meta_path.append(_BackendFinder)
    os.environ["MPLBACKEND"] = "module://pyclassroom_mpl"
    script = os.path.abspath(path)
    sys.argv = [path] + list(args)
    sys.path[0:0] = [os.path.dirname(script)]
    code, reason = 0, None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next  # hide the launcher's and runpy's frames
        traceback.print_exception(type(e), e, tb)
        if isinstance(e, KeyboardInterrupt):
            code, reason = 130, "interrupted"
        elif isinstance(e, MemoryError):
            code, reason = 1, "memory_limit"
        else:
            code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    if reason:
        try:
            os.write(status_w, reason.encode())
        except OSError:
            pass
    os._exit(code)


def _input(prompt=""):
    """input() on stdout: CPython's own writes the prompt to stderr on a
    terminal, which the console would show as an error."""
    sys.stdout.write(str(prompt))
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line


class _BackendFinder(object):
    """Imports `pyclassroom_mpl` from MPL_BACKEND's source: matplotlib loads
    it only when a plot is made, so other programs never pay for it."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "pyclassroom_mpl":
            import importlib.util
            return importlib.util.spec_from_loader(name, cls)
        return None

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        exec(compile(MPL_BACKEND, "pyclassroom_mpl", "exec"), module.__dict__)


def seed_matplotlib_cache(cache):
    """Copy matplotlib's prebuilt font list into this sandbox's private
    config folder: building it takes seconds of CPU, on every run otherwise."""
    target = os.environ.get("MPLCONFIGDIR")
    if not cache or not target or not os.path.isdir(cache):
        return
    try:
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(cache):
            with open(os.path.join(cache, name), "rb") as src, open(os.path.join(target, name), "wb") as dst:
                dst.write(src.read())
    except OSError:
        pass  # matplotlib will build its own, slowly


def lower_priority(nice, lower_group, patience=3.0):
    """Make this process and its scheduling group less important than the
    server. With autogroup scheduling every session is its own group, and a
    process's nice only ranks it inside its group: 60 busy loops in 60
    sessions would otherwise get 60 shares of the CPU to the server's one.
    A server running as root lowers the group when we are ready (it may do
    so without limit); otherwise the kernel lets an unprivileged process
    change a group's nice once per 100 ms machine-wide, so this retries. It
    runs before `ready`, never while a student waits."""
    os.setpriority(os.PRIO_PROCESS, 0, nice)  # absolute: the server's own may be raised
    deadline = time.monotonic() + patience
    while lower_group:
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write("19")  # as sandbox.GROUP_NICE
            return
        except OSError as e:
            if e.errno != errno.EAGAIN or time.monotonic() > deadline:
                return  # no autogroup scheduling here: nice alone does the job
            time.sleep(0.02 + 0.1 * os.urandom(1)[0] / 255)  # apart from the others


def main():
    settings = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    try:
        os.setsid()  # a session of our own: its own scheduling group, and the program's terminal
    except OSError:
        pass  # already a session leader
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # each run's terminal hangs up as it ends
    # The server stays more important than student code.
    lower_priority(settings.get("nice", 10), settings.get("lower_group", True))
    seed_matplotlib_cache(settings.get("mpl_cache"))
    apply_limits(settings.get("limits", {}))
    # Only the first process of a PID namespace can clear what a run leaves
    # behind (kill(-1) there reaches the namespace only): elsewhere, one run.
    runs = max(1, int(settings.get("runs", 1))) if os.getpid() == 1 else 1
    # A child's exit wakes the relay at once (not at its next timeout).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    buf = b""
    for left in range(runs - 1, -1, -1):
        write_all(1, CTL + b"ready" + BEL)
        go, buf = wait_for_go(buf)
        if go is None:
            os._exit(0)  # the server went away before the run started
        result, buf = run_once(go, buf, wake_r)
        if not left:
            write_all(1, CTL + b"exit;" + json.dumps(result).encode() + BEL)
            os._exit(0)
        write_all(2, CTL + b"end" + BEL)
        write_all(1, CTL + b"exit;" + json.dumps(result).encode() + BEL)
        clear_namespace()


def wait_for_go(buf):
    """(the `go` frame's settings, leftover bytes); None at EOF. Frames
    meant for the previous run (input typed after it ended) are dropped."""
    while True:
        kind, payload, buf = read_frame(0, buf)
        if kind is None:
            return None, buf
        if kind == b"g":
            return json.loads(payload), buf


def clear_namespace():
    """Kill everything a run left (background processes) and reap it all:
    as PID 1 of the namespace, kill(-1) reaches every other process in it."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass  # nothing left
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def run_once(go, buf, wake_r):
    """Fork the program on a new terminal and relay until it ends:
    (status, leftover stdin bytes)."""
    master, slave = os.openpty()
    set_size(master, go.get("cols", 80), go.get("rows", 24))
    try:
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        owns_terminal = True
    except OSError:
        owns_terminal = False
    err_r, err_w = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(master)
        os.close(err_r)
        os.close(status_r)
        os.close(wake_r)
        run_program(go["path"], go.get("args", []), slave, err_w, status_w, own_session=not owns_terminal)
    os.close(slave)
    os.close(err_w)
    os.close(status_w)
    try:
        return relay(pid, master, err_r, status_r, buf, wake_r)
    finally:
        for fd in (master, err_r, status_r):
            try:
                os.close(fd)
            except OSError:
                pass


def relay(pid, master, err_r, status_r, buf, wake_r):
    """Relay until the program has exited and its output is through:
    (status dict, leftover stdin bytes)."""
    open_fds = {master: 1, err_r: 2}
    carry = {master: b"", err_r: b""}  # a CTL possibly cut across reads
    status_open = True
    stdin_open = True
    status = None
    reason = b""
    buf = act_on_frames(master, pid, buf)  # input that came in the same read as `go`
    while True:
        watch = list(open_fds) + [wake_r] + ([status_r] if status_open else []) + ([0] if stdin_open else [])
        ready, _, _ = select.select(watch, [], [], 0.05 if status is not None else 1.0)
        for fd in ready:
            if fd == wake_r:
                os.read(wake_r, 512)
            elif fd == 0:
                stdin_open, buf = handle_input(master, pid, buf)
            elif fd == status_r:
                chunk = os.read(status_r, 256)
                reason += chunk
                status_open = bool(chunk)
            else:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's last user is gone
                    data = b""
                if data:
                    safe, carry[fd] = defang(carry[fd] + data)
                    write_all(open_fds[fd], safe)
                else:
                    write_all(open_fds.pop(fd), carry[fd])
        if status is None:
            done, wstatus = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wstatus
                deadline = _now() + 0.2  # let buffered output through, not a background child's
        if status is not None and (not open_fds or _now() > deadline):
            break
    for fd, out in open_fds.items():
        write_all(out, carry[fd])
    result = {"code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
              "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
              "reason": reason.decode(errors="replace") or None}
    return result, buf


def defang(data):
    """(data with every CTL made harmless, a tail held back because it may
    be the start of a CTL cut across reads)."""
    data = data.replace(CTL, DEFANGED)
    for n in range(min(len(CTL) - 1, len(data)), 0, -1):
        if data.endswith(CTL[:n]):
            return data[:-n], data[-n:]
    return data, b""


def handle_input(master, pid, buf):
    """Read stdin and act on the whole frames; (stdin still open, leftover bytes)."""
    chunk = os.read(0, 65536)
    if not chunk:
        return False, buf
    return True, act_on_frames(master, pid, buf + chunk)


def act_on_frames(master, pid, buf):
    """Carry out every whole frame in `buf`; return what is left of it."""
    while len(buf) >= 5:
        kind, size = buf[:1], struct.unpack(">I", buf[1:5])[0]
        if len(buf) < 5 + size:
            break
        payload, buf = buf[5:5 + size], buf[5 + size:]
        try:
            if kind == b"d":
                write_all(master, payload)
            elif kind == b"r":
                size_msg = json.loads(payload)
                set_size(master, size_msg["cols"], size_msg["rows"])
            elif kind == b"i":
                os.killpg(pid, signal.SIGINT)
            elif kind == b"e":
                write_all(master, b"\x04")
        except (OSError, ValueError, KeyError):
            pass  # the program is gone or the frame was bad: nothing to do
    return buf


def _now():
    return time.monotonic()


if __name__ == "__main__":
    main()
