"""The launcher: the first (and only) Python process started in a sandbox.

The server runs `python3 -I -c <this file's source> <settings JSON>` inside
bubblewrap, a Docker container or a plain child process, so the sandbox
needs nothing but a Python interpreter. The launcher

1. makes itself a principal the program cannot touch: not dumpable (so no
   process of the same uid may ptrace it, read its memory or take its
   descriptors), with the server's seccomp filter (no ptrace, no new user
   namespaces...) loaded before any student code exists; where the server
   asks (Docker, which always mounts /proc), no file under /proc can be
   read (Landlock), as its mountinfo names the home's path on the host;
2. says it is ready, then waits for the `go` frame naming the program:
   this lets the server start sandboxes ahead of time, so Run starts at once;
3. forks the student's program onto a pseudo-terminal (so prompts, echo and
   Ctrl-C behave as in a terminal) with stderr on a separate pipe, in this
   same interpreter (no second interpreter start), with the run's limits
   (CPU time, memory, processes, file size, open files) set in the child;
4. relays, as frames on its stdout, what the program writes on the terminal
   and on stderr, and carries out the server's frames from its stdin. The
   program never holds the launcher's stdin or stdout: whatever it writes
   reaches the server as a frame's payload, never as a frame;
5. when the program has exited (the kernel says so: waitpid), kills
   everything the run left (as the PID namespace's first process, kill(-1)
   reaches all of it), relays the rest of the output, and reports the exit
   from what the kernel said. Then it serves the next run (a fresh fork of
   the same never-used interpreter), up to settings["runs"], or exits.

Frames, both ways: 1 byte kind, 4 bytes big-endian length, payload.
  server -> launcher:  g go {"path", "args", "cols", "rows", "etag"?, "channel"?, "echo"?,
                             "nice"?, "mode"?, "code"?, "options"?, "copy"?, "debug"?, "forbid"?}
                       d stdin bytes
                       r resize {"cols", "rows"}   i interrupt   e end of input
                       c a line for the program's channel   C end of the channel
  launcher -> server:  R ready   o terminal output (input() adds ESC]7011;input BEL
                       after its prompt)   e stderr output   c a line from the channel
                       X exit {"code", "signal", "interrupted", "memory_error", "changed"?}
With an etag, the program runs only if its bytes are that version (the
one the student's editor shows); else nothing runs and the exit says
"changed". With "channel": true the program also holds a control channel,
a socket at fd 3 (PYCLASSROOM_CHANNEL=3) carrying lines of JSON both ways
(see Channel). "echo": false turns the terminal's echo off; "nice": N
(0..10) lowers the program's priority. With "mode" ("serve" or "test"),
no file is run: the attempts' code (testing.py, sent as "code") runs in its
place as main(mode, options, channel fd). With "copy" ({name: base64}: a
course folder's file and those beside it, or an attempt's snapshot), the
launcher writes them read-only into a folder of the sandbox's /tmp, runs
"path" there (or serves it, in "serve" mode), and removes the folder after
the run (make_copy); with "writable": true the folder takes new files. With "debug" ({"code":
debugging.py's source, "breakpoints"}, and "channel": true) the file runs
under the debugger, which pauses it and talks on the channel (run_script). With
"forbid" ({"code": import_guard.py's source, "modules"}: a check's
no_import rules), importing one of the modules ends the program with an
exit code of the guard's own, however the import is spelled (guard_imports).

It must run on any Python 3.8+ with the standard library only, and is kept
self-contained because it is passed as source text.
"""
import base64
import errno
import fcntl
import hashlib
import io
import json
import os
import resource
import select
import signal
import stat
import struct
import sys
import termios
import time
import types

READ_SIZE = 65536  # also the largest frame the launcher sends, but for channel lines
CHANNEL_FD = 3
CHANNEL_LINE = 256 << 10  # the longest line relayed from the channel: longer ones are dropped
CHANNEL_BUFFER = 1 << 20  # lines waiting for a program that does not read its channel
OVERFLOW = b'{"type":"overflow"}'  # sent in place of a line too long to relay
SHUT_WR = 1  # socket.SHUT_WR: the socket module is imported by channel runs only
INPUT_BUFFER = 64 << 10  # typed input waiting for a program that does not read it
# Written by input() before and after its prompt; the server cuts them out (protocol.py),
# and a check leaves the text between them out of the output it compares.
PROMPT_MARK = b"\x1b]7011;prompt\x07"
INPUT_MARK = b"\x1b]7011;input\x07"
MEMORY_ERROR_EXIT = 137  # how the child tells the launcher of a MemoryError (as an OOM kill looks)

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


def send(kind, payload=b""):
    """One frame to the server (blocking: when the server stops reading, the
    relay stops, and the program stops at its next write)."""
    send_all(kind, [payload])


def send_all(kind, payloads):
    """Frames of one kind in one write (a flood of short lines costs one call)."""
    write_all(1, b"".join(kind + struct.pack(">I", len(p)) + p for p in payloads))


# -- the launcher as its own principal ------------------------------------------

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2


def protect(seccomp_b64, hide_proc=False):
    """Not dumpable (the program, same uid, cannot ptrace us, read our memory
    or take our descriptors), no new privileges, /proc unreadable if asked,
    and the seccomp filter: all before any student code runs. Raises if any
    of it fails, so a sandbox never runs without the defences the server
    asked for."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    prctl(libc, PR_SET_DUMPABLE, 0)
    prctl(libc, PR_SET_NO_NEW_PRIVS, 1)
    if hide_proc:
        # Folders, /proc's too, can still be listed, and writing is as
        # before: only reading a file of /proc is refused (EACCES).
        landlock_unreadable(libc, ["/proc"], LANDLOCK_READ_FILE | LANDLOCK_READ_DIR)
    if seccomp_b64:
        load_seccomp(libc, base64.b64decode(seccomp_b64))


def prctl(libc, option, arg2=0, arg3=0):
    import ctypes
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(option, arg2, arg3, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl %d: %s" % (option, os.strerror(err)))


def load_seccomp(libc, program):
    """Load a seccomp filter (BPF) into this process: it and everything it
    starts keep it, under those loaded before."""
    import ctypes

    class SockFprog(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    fprog = SockFprog(len(program) // 8, program)
    prctl(libc, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


# The calls that start a program, by machine: (its AUDIT_ARCH_, execve, execveat).
EXEC_CALLS = {"x86_64": (0xC000003E, 59, 322), "aarch64": (0xC00000B7, 221, 281)}


def no_exec_filter():
    """A seccomp filter (BPF) under which no program can be started: execve
    and execveat fail (EPERM), as does every call of another ABI (x32,
    i386), which the server's filter kills anyway. KeyError on a machine
    not in EXEC_CALLS."""
    arch, execve, execveat = EXEC_CALLS[os.uname().machine]
    deny, allow = 0x00050000 | errno.EPERM, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    load, equal, at_least, answer = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    program = [(load, 0, 0, 4),  # seccomp_data.arch
               (equal, 1, 0, arch), (answer, 0, 0, deny),
               (load, 0, 0, 0),  # seccomp_data.nr
               (equal, 3, 0, execve), (equal, 2, 0, execveat), (at_least, 1, 0, 0x40000000),  # x32's calls
               (answer, 0, 0, allow), (answer, 0, 0, deny)]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # one number on every arch
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_READ_FILE, LANDLOCK_READ_DIR = 1 << 2, 1 << 3


def landlock_unreadable(libc, hidden, handled):
    """Landlock (an unprivileged process restricting itself and all it
    starts, for good): no file beneath the absolute paths `hidden` can be
    read, by any path (a symlink, a folder's descriptor) or any process.
    `handled`: LANDLOCK_READ_FILE, and LANDLOCK_READ_DIR for the hidden
    folders' listings too. Landlock only allows, so everything else is
    allowed beneath each entry beside the way to a hidden path (symlinks
    aside: what they lead to is allowed, or not, where it is), and the
    folders on that way can be listed."""
    import ctypes

    def call(nr, *args):
        result = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, bytes) else ctypes.c_long(a) for a in args])
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, "landlock call %d: %s" % (nr, os.strerror(err)))
        return result
    hidden = set(hidden)
    on_the_way = set()
    for path in hidden:
        while path != "/":
            path = os.path.dirname(path)
            on_the_way.add(path)
    ruleset = call(LANDLOCK_CREATE_RULESET, struct.pack("<Q", handled), 8, 0)
    try:
        def allow(path, access):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                call(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, struct.pack("<Qi", access, fd), 0)
            finally:
                os.close(fd)
        for folder in on_the_way:
            if handled & LANDLOCK_READ_DIR:
                allow(folder, LANDLOCK_READ_DIR)
            with os.scandir(folder) as entries:  # a folder's entries know their kind: no stat each
                for entry in entries:
                    if entry.path in hidden or entry.path in on_the_way or entry.is_symlink():
                        continue
                    allow(entry.path, handled if entry.is_dir(follow_symlinks=False) else LANDLOCK_READ_FILE)
        call(LANDLOCK_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


LIMITS = {"cpu_seconds": resource.RLIMIT_CPU, "memory_bytes": resource.RLIMIT_AS,
          "processes": resource.RLIMIT_NPROC, "file_bytes": resource.RLIMIT_FSIZE,
          "open_files": resource.RLIMIT_NOFILE}


def tightened(limits, asked):
    """The sandbox's limits, each lowered to the run's (`go`'s) where the run
    asks for less; never raised: the sandbox started, and its cgroup was
    sized, for its own."""
    kept = dict(limits)
    for key, value in (asked if isinstance(asked, dict) else {}).items():
        if key in LIMITS and type(value) is int and value > 0:
            kept[key] = min(value, kept[key]) if kept.get(key) else value
    return kept


def apply_limits(limits):
    """The run's limits, set in the program's process (each run starts its
    CPU time at zero; the launcher itself is held by the run's cgroup)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, which in LIMITS.items():
        value = limits.get(key)
        if value:
            # CPU: SIGXCPU at the soft limit, SIGKILL one second later.
            hard = value + 1 if which == resource.RLIMIT_CPU else value
            resource.setrlimit(which, (value, hard))


def set_size(fd, cols, rows):
    cols = max(10, min(int(cols), 500))
    rows = max(2, min(int(rows), 200))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


# -- the program's side of the fork -------------------------------------------------

def read_program(path):
    """The program's bytes, read once, by the launcher: the run compiles
    exactly these, so they are what the server checked. None when they
    cannot be read here (the run then says why, as python3 would). Never
    blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read()


def run_program(go, source, slave, err_w, limits, own_session, channel=None):
    """In the forked child: take the terminal (and the channel, at fd 3),
    drop every other descriptor of the launcher's, set the limits, run the
    program (or the check's code). Never returns."""
    try:
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
        os.dup2(slave, 0)  # over the launcher's stdin (the server's frames)
        os.dup2(slave, 1)  # over the launcher's stdout (the frames to the server)
        os.dup2(err_w, 2)
        first_closed = 3
        if channel is not None:
            os.dup2(channel, CHANNEL_FD)  # the program's end, never the launcher's
            first_closed = CHANNEL_FD + 1
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.closerange(first_closed, 1 << 16)  # nothing else of the launcher's reaches the program
        apply_limits(limits)
        os.nice(max(0, min(int(go.get("nice", 0)), 10)))  # checks run below interactive runs
    except BaseException:
        os._exit(126)
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
    if channel is not None:
        os.environ["PYCLASSROOM_CHANNEL"] = str(CHANNEL_FD)
    script = None
    code = 0
    try:
        if go.get("mode"):
            sys.argv = [""]  # not the launcher's settings
            if go.get("cwd"):  # an attempt's copy of the student's files: their module is served from it
                os.chdir(go["cwd"])
                go["options"]["file"] = go["path"]
            code = run_testing(go, CHANNEL_FD if channel is not None else None) or 0
        else:
            path = go["path"]
            script = os.path.abspath(path)
            sys.argv = [path] + list(go.get("args", []))
            guard_imports(go)  # before the student's folder is on sys.path: the modules are found where they are
            sys.path[0:0] = [os.path.dirname(script)]
            if go.get("cwd"):  # a course file's read-only copy runs where its files are
                os.chdir(go["cwd"])
            run_script(script, source, go.get("debug"))
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
        while tb is not None and script and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next  # hide the launcher's frames
        # The interpreter's own printing, as `python3 script` does: on 3.11
        # only it adds "Did you mean: 'print'?" (traceback.print_exception does not).
        sys.__excepthook__(type(e), e.with_traceback(tb), tb)
        if isinstance(e, KeyboardInterrupt):
            code = 130
        elif isinstance(e, MemoryError):
            code = MEMORY_ERROR_EXIT
        else:
            code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(code)


def run_testing(go, channel_fd):
    """The attempts' code (testing.py, sent by the server) in the program's
    place: its main() serves the student's functions or runs the tests.
    Its exit code."""
    module = types.ModuleType("pyclassroom_testing")
    sys.modules[module.__name__] = module
    exec(go.get("compiled") or compile(go["code"], "<testing>", "exec"), module.__dict__)
    guard_imports(go)  # after testing.py's own imports, before the student's module
    return module.main(go["mode"], go.get("options") or {}, channel_fd)


TESTING_COMPILED = {}  # testing.py's code (the server's, not the student's), compiled once a sandbox


def compiled_testing(code):
    """testing.py's code object, compiled here before the run's fork (12 ms
    of CPU a time): every run of this sandbox inherits it."""
    if code not in TESTING_COMPILED:
        TESTING_COMPILED.clear()
        TESTING_COMPILED[code] = compile(code, "<testing>", "exec")
    return TESTING_COMPILED[code]


def guard_imports(go):
    """With go["forbid"] ({"code": import_guard.py's source, "modules"}),
    importing one of the modules ends this process from now on, however
    it is spelled (see import_guard.py). A guard that could not be set up
    runs nothing."""
    forbid = go.get("forbid")
    if not forbid:
        return
    def confine(paths):
        """The kernel's part, where it can: no program started (seccomp),
        `paths` unreadable (Landlock); else the guard's hook alone watches."""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            load_seccomp(libc, no_exec_filter())
        except (OSError, KeyError):
            pass
        if paths:
            try:
                landlock_unreadable(libc, paths, LANDLOCK_READ_FILE)
            except OSError:
                pass
    try:
        guard = types.ModuleType("pyclassroom_import_guard")
        exec(compile(forbid["code"], "<pyclassroom-import-guard>", "exec"), guard.__dict__)
        guard.install(forbid["modules"], confine)
    except Exception:
        os.write(2, b"The check could not watch your program's imports, so it did not run it.\n")
        os._exit(126)


def run_script(script, source=None, debug=None):
    """Run a file as `python3 script` would: as the module __main__ (so
    pickle and dataclasses find what it defines), its coding cookie
    honoured by compile(). `source`: its bytes as the launcher read them.
    `debug` ({"code": debugging.py's source, "breakpoints"}): under the
    debugger, which talks on the channel."""
    if source is None:
        with open(script, "rb") as f:
            source = f.read()
    main = types.ModuleType("__main__")
    main.__file__ = script
    sys.modules["__main__"] = main
    code = compile(source, script, "exec")
    if not debug:
        exec(code, main.__dict__)
        return
    debugging = types.ModuleType("pyclassroom_debugging")
    exec(compile(debug["code"], "<debugging>", "exec"), debugging.__dict__)
    debugging.main(script, code, main.__dict__, CHANNEL_FD, debug)


def _input(prompt=""):
    """input() on stdout: CPython's own writes the prompt to stderr on a
    terminal, which the console would show as an error. The prompt goes
    between PROMPT_MARK and INPUT_MARK: the page says the program waits for
    a line, and a check knows which text was a prompt and not output."""
    text = str(prompt)
    sys.stdout.flush()  # what was printed before is output, not prompt
    _mark(PROMPT_MARK)
    sys.stdout.write(text)
    sys.stdout.flush()
    _mark(INPUT_MARK)
    line = sys.stdin.readline()
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line


def _mark(data):
    try:
        write_all(1, data)
    except OSError:
        pass  # the program closed its terminal: nothing to tell


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


# -- start-up ---------------------------------------------------------------------

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
    process's nice only ranks it inside its group. A server running as root
    ranks the sandbox itself (an idle cgroup, or the autogroup's nice);
    otherwise the kernel lets an unprivileged process change a group's nice
    once per 100 ms machine-wide, so this retries. It runs before `ready`,
    never while a student waits."""
    os.setpriority(os.PRIO_PROCESS, 0, nice)  # absolute: the server's own may be raised
    deadline = time.monotonic() + patience
    while lower_group:
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write("19")  # as sandbox.GROUP_NICE
            return
        except OSError as e:
            if e.errno != errno.EAGAIN or time.monotonic() > deadline:
                return  # no autogroup scheduling (or no /proc) here: nice alone does the job
            time.sleep(0.02 + 0.1 * os.urandom(1)[0] / 255)  # apart from the others


def warm_up():
    """Compile and run an empty program once, so that what an interpreter's
    first compile() pays (the AST types CPython builds lazily: about 2 ms
    of CPU) is paid here, once per sandbox, and every run's fork inherits
    it."""
    exec(compile(b"", "<warm>", "exec"), {})


def main():
    settings = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    protect(settings.get("seccomp"), settings.get("hide_proc", False))
    try:
        os.setsid()  # a session of our own: its own scheduling group, and the program's terminal
    except OSError:
        pass  # already a session leader
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # each run's terminal hangs up as it ends
    lower_priority(settings.get("nice", 10), settings.get("lower_group", True))
    seed_matplotlib_cache(settings.get("mpl_cache"))
    warm_up()
    limits = settings.get("limits", {})
    # Only the first process of a PID namespace can clear what a run leaves
    # behind (kill(-1) there reaches the namespace only): elsewhere, one run.
    runs = max(1, int(settings.get("runs", 1))) if os.getpid() == 1 else 1
    # A child's exit wakes the relay at once (not at its next timeout).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    frames = FrameReader(0)
    for _ in range(runs):
        send(b"R")
        go = wait_for_go(frames)
        if go is None:
            os._exit(0)  # the server went away before the run started
        if go.get("mode") and isinstance(go.get("code"), str):
            go["compiled"] = compiled_testing(go["code"])
        copy = make_copy(go) if go.get("copy") else None
        try:
            result = run_if_current(go, frames, wake_r, tightened(limits, go.get("limits")))
        finally:
            if copy:
                discard_copy(copy)
        send(b"X", json.dumps(result).encode())
    os._exit(0)


def run_if_current(go, frames, wake_r, limits):
    """One run, if its file is the version the student's editor shows (its
    etag, when given): the exit to report."""
    source = None if go.get("mode") else read_program(go["path"])  # an attempt's run runs no file
    etag = go.get("etag")
    if etag and not go.get("mode") and (source is None or hashlib.sha256(source).hexdigest()[:20] != etag):
        return {"code": None, "signal": None, "changed": True}  # nothing runs
    return run_once(go, source, frames, wake_r, limits)


def make_copy(go):
    """The course folder's files a run was sent (go["copy"]: {name: base64}),
    written read-only (files 0444 in folders 0555) to a new folder under
    /tmp, the sandbox's own: go["path"] becomes the file's path there, and
    the program runs in that folder (its modules import). The folder, to
    discard after the run (None if none was made). A copy that could not
    be made whole (/tmp full) runs nothing: the run says the file is not
    there, as python3 would; never half a file, nor a file of the home's
    of the same name. The course folder itself is never in a sandbox:
    this copy is all a program can reach of it."""
    import tempfile
    name = os.path.basename(go["path"])
    go["path"] = os.path.join("/", "course-copy-not-made-tmp-is-full", name)  # until the copy is whole
    try:
        # Named: with no room in /tmp, tempfile would fall back to the working folder, the home.
        top = tempfile.mkdtemp(prefix="pyclassroom-course-", dir="/tmp")
    except OSError:
        return None
    folder = os.path.join(top, "course")
    try:
        os.mkdir(folder, 0o700)
        for file_name, data in go["copy"].items():
            if not file_name or "/" in file_name or file_name in (".", ".."):
                continue
            fd = os.open(os.path.join(folder, file_name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o444)
            try:
                write_all(fd, base64.b64decode(data))
            finally:
                os.close(fd)
        # A check's copy takes the files its program writes (discarded with it); a course file's does not.
        os.chmod(folder, 0o755 if go.get("writable") else 0o555)
        os.chmod(top, 0o555)
    except (OSError, ValueError, AttributeError, TypeError):
        return top
    go["path"] = os.path.join(folder, name)
    go["cwd"] = folder
    return top


def discard_copy(top):
    """Remove a run's copy, whatever its program did to it (it has ended:
    nothing of it is left to race)."""
    import shutil

    def writable_then_again(function, path, _exc):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            function(path)
        except OSError:
            pass
    try:
        os.chmod(top, 0o700)
    except OSError:
        pass
    shutil.rmtree(top, onerror=writable_then_again)


class FrameReader:
    """The server's frames from a descriptor, read as they come."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""
        self.closed = False

    def fill(self):
        """Read what is there (the caller knows the fd is readable)."""
        chunk = os.read(self.fd, READ_SIZE)
        if not chunk:
            self.closed = True
        self.buf += chunk

    def pop(self):
        """(kind, payload) of the next whole frame, or None."""
        if len(self.buf) < 5:
            return None
        size = struct.unpack(">I", self.buf[1:5])[0]
        if len(self.buf) < 5 + size:
            return None
        kind, payload, self.buf = self.buf[:1], self.buf[5:5 + size], self.buf[5 + size:]
        return kind, payload


def wait_for_go(frames):
    """The `go` frame's settings; None at EOF. Frames meant for the previous
    run (input typed after it ended) are dropped."""
    while True:
        frame = frames.pop()
        if frame is None:
            if frames.closed:
                return None
            frames.fill()
        elif frame[0] == b"g":
            return json.loads(frame[1])


def run_once(go, source, frames, wake_r, limits):
    """Fork the program on a new terminal, relay until it has exited and
    nothing of the run is left: the exit, as the kernel reported it."""
    master, slave = os.openpty()
    set_size(master, go.get("cols", 80), go.get("rows", 24))
    if go.get("echo") is False:  # a check feeds input and compares output: no echo in it
        no_echo(slave)
    try:
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        owns_terminal = True
    except OSError:
        owns_terminal = False
    err_r, err_w = os.pipe()
    ours = theirs = None
    if go.get("channel"):
        import socket  # a few ms: paid by the runs that ask for a channel only
        ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        run_program(go, source, slave, err_w, limits, own_session=not owns_terminal,
                    channel=theirs.fileno() if theirs else None)
    os.close(slave)
    os.close(err_w)
    if theirs:
        theirs.close()
    try:
        return Relay(pid, master, err_r, frames, wake_r, Channel(ours) if ours else None).run()
    finally:
        for fd in (master, err_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if ours:
            ours.close()


def no_echo(fd):
    attrs = termios.tcgetattr(fd)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


class Relay:
    """Moves bytes between the server and one run until the run is over."""

    def __init__(self, pid, master, err_r, frames, wake_r, channel=None):
        self.pid, self.master, self.err_r, self.frames, self.wake_r = pid, master, err_r, frames, wake_r
        os.set_blocking(master, False)  # typed input never blocks the relay (see `typed`)
        self.outputs = {master: b"o", err_r: b"e"}
        self.channel = channel
        if channel:
            self.outputs[channel.fd] = b"c"
        self.typed = b""  # input for a program that is not reading it yet: bounded
        self.interrupted = False

    def run(self):
        # Frames read along with `go` (input typed at once) are in the
        # buffer already; select would not report them.
        self.act_on_frames()
        status = None
        while status is None:
            self.step(1.0)
            done, wstatus = os.waitpid(self.pid, os.WNOHANG)
            if done:
                status = wstatus
        # The program has exited. As the namespace's first process we end
        # what it left (background children, daemons) and reap it; then no
        # one holds the terminal, the stderr pipe or the channel, and all reach their end.
        if os.getpid() == 1:
            clear_namespace()
        deadline = time.monotonic() + (30.0 if os.getpid() == 1 else 0.2)
        while self.outputs and time.monotonic() < deadline:
            self.step(0.05)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        return {"code": 1 if code == MEMORY_ERROR_EXIT else code,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "interrupted": self.interrupted, "memory_error": code == MEMORY_ERROR_EXIT}

    def step(self, timeout):
        watch = list(self.outputs) + [self.wake_r] + ([] if self.frames.closed else [0])
        writable = [self.master] if self.typed and self.master in self.outputs else []
        if self.channel and self.channel.wants_to_write():
            writable.append(self.channel.fd)
        ready, can_write, _ = select.select(watch, writable, [], timeout)
        for fd in ready:
            if fd == self.wake_r:
                os.read(self.wake_r, 512)
            elif fd == 0:
                self.frames.fill()
                self.act_on_frames()
            else:
                self.relay(fd)
        if self.master in can_write:
            self.feed()
        if self.channel and self.channel.fd in can_write:
            self.channel.flush()

    def relay(self, fd):
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # EIO: the terminal's last user is gone (ECONNRESET: the channel's)
            data = b""
        kind = self.outputs[fd]
        if kind == b"c":
            send_all(kind, self.channel.lines(data))
        elif data:
            send(kind, data)
        if not data:
            del self.outputs[fd]

    def act_on_frames(self):
        while True:
            frame = self.frames.pop()
            if frame is None:
                return
            kind, payload = frame
            try:
                if kind == b"d":
                    self.typed += payload[:max(0, INPUT_BUFFER - len(self.typed))]
                    self.feed()
                elif kind == b"r":
                    size = json.loads(payload)
                    set_size(self.master, size["cols"], size["rows"])
                elif kind == b"i":
                    self.interrupted = True
                    os.killpg(self.pid, signal.SIGINT)
                elif kind == b"e":
                    self.typed += b"\x04"
                    self.feed()
                elif kind == b"c" and self.channel:  # no channel asked for: dropped
                    self.channel.queue(payload)
                elif kind == b"C" and self.channel:
                    self.channel.close()
            except (OSError, ValueError, KeyError, TypeError):
                pass  # the program is gone or the frame was bad: nothing to do

    def feed(self):
        try:
            written = os.write(self.master, self.typed)
        except BlockingIOError:
            return
        except OSError:
            written = len(self.typed)  # the terminal is gone: the input with it
        self.typed = self.typed[written:]


class Channel:
    """The launcher's end of a run's control channel (a socket; the
    program's end is its fd 3). Lines of JSON both ways, bounded both ways:
    a line from the program longer than CHANNEL_LINE is dropped up to its
    newline (OVERFLOW is relayed instead, once), and lines for a program
    that does not read wait up to CHANNEL_BUFFER, then are dropped whole.
    Neither way ever blocks the relay: the program's lines are read as the
    server reads its frames, so a flood goes at the server's pace."""

    def __init__(self, sock):
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.line = b""  # the start of the line the program is writing
        self.dropping = False  # inside a line too long: dropped up to its newline
        self.outgoing = b""  # lines for the program, not taken yet
        self.closing = False  # the server ended the channel: EOF once `outgoing` is written

    def lines(self, data):
        """The complete lines in what the program wrote next (b"" at its
        end: an unfinished line is dropped), as payloads of `c` frames."""
        if not data:
            self.line, self.dropping = b"", False
            return []
        pieces = data.split(b"\n")
        payloads = []
        for piece in pieces[:-1]:
            line, self.line = self.line + piece, b""
            if self.dropping:
                self.dropping = False  # the end of the line that overflowed
            elif len(line) > CHANNEL_LINE:
                payloads.append(OVERFLOW)
            elif line:
                payloads.append(line)
        if not self.dropping:
            self.line += pieces[-1]
            if len(self.line) > CHANNEL_LINE:
                payloads.append(OVERFLOW)
                self.line, self.dropping = b"", True
        return payloads

    def queue(self, payload):
        if len(self.outgoing) + len(payload) < CHANNEL_BUFFER and not self.closing:
            self.outgoing += payload + b"\n"
            self.flush()

    def close(self):
        self.closing = True
        self.flush()

    def wants_to_write(self):
        return bool(self.outgoing) or self.closing

    def flush(self):
        try:
            if self.outgoing:
                self.outgoing = self.outgoing[self.sock.send(self.outgoing):]
            if self.closing and not self.outgoing:
                self.closing = False
                self.sock.shutdown(SHUT_WR)
        except BlockingIOError:
            pass
        except OSError:  # the program closed its end: nobody will read these
            self.outgoing, self.closing = b"", False


def clear_namespace():
    """Kill everything a run left and reap it all: as PID 1 of the
    namespace, kill(-1) reaches every other process in it."""
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


if __name__ == "__main__":
    main()
