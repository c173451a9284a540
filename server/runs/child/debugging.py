"""The debugger for beginners, inside the student's program, in the sandbox.

How it runs. A `debug` run is an ordinary run (same sandbox, limits,
seccomp filter, terminal, no network) whose `go` frame also carries this
file's source and the breakpoints. The launcher forks the program as
always, with the run's control channel at fd 3 (docs/run-protocol.md, "The check
channel"); instead of exec'ing the student's file it hands the compiled
file to `main()` here, which runs it under a `bdb.Bdb` subclass
(`sys.settrace`: the sandbox's Python is 3.11, without `sys.monitoring`).

Only the student's files are traced: a frame whose code is not a file
under the run's folder (its home, or a course copy's folder) gets no local
trace function (`dispatch_call` returns None), so the standard library,
the launcher and this file are never stepped into and their lines cost
nothing. On `continue`, a frame is traced only if a breakpoint lies in its
own code's lines; with no breakpoints at all tracing is switched off (as
bdb does), so a program that is not paused runs at nearly full speed.

How it talks. At each pause it writes one line of JSON on fd 3,
`{"type": "paused", "file", "line", "stack", "frame", "variables",
"globals"?, "watches"?}`, and blocks reading the channel (a blocking
read: a paused program uses no CPU) for the server's next command
(`step`, `step_in`, `step_out`, `continue`, `frame`), each carrying the
breakpoints (`{path: [lines]}`, paths relative to the run's folder) and
the watch expressions (evaluated in the selected frame at each pause). Breakpoints the
student changes while the program runs come as a `breakpoints` line,
announced by SIGIO (the socket is O_ASYNC): the handler applies them and
turns tracing back on where they need it. The channel is a
socketpair the launcher made for this run alone, so nothing written on it
can reach another run; the student's code holds the same descriptor and
can write anything on it, so the server treats every line as untrusted
(server/runs/debugging.py: bounded, validated, rebuilt, and taken only
when it asked for one). If the channel breaks, or the student's code
replaces the trace function, the program simply runs on unpaused. After
fork() the copy runs on untraced (`forked`): one process is debugged.

At a pause, the debugger itself runs the student's code: the watches,
and each value's __repr__, __len__ and iteration. That code is the
student's values, not the program, so it must not end or stall the
program, print, or show our frames (AtPause, `worked_out`): whatever it
raises is shown as its error, and it gets PAUSE_SECONDS per pause.

Time. The server, not this file, keeps the clocks: the wall-clock limit
does not tick while it waits for the student's next step, an idle pause
ends the run after RUN_DEBUG_IDLE_SECONDS with a sentence saying so, a
pause not worked out in time ends it naming what was slow (`pausing`,
`slow`), and CPU, memory and output limits hold as in any run. The run
ends only when the kernel says the program has exited, or the server
kills the sandbox.

It must run on the sandbox's Python 3.8+ with the standard library only,
and is self-contained: it is sent as source text (sandbox.launch).
"""
import bdb
import io
import json
import os
import reprlib
import signal
import sys
import types

MESSAGE_BYTES = 60 << 10  # a pause's line (the server drops longer ones unparsed)
VARIABLES = 100  # per scope
ITEMS = 30  # shown of a list, dict, set or object's attributes
DEPTH = 3  # levels of a value that can be unfolded
TEXT = 120  # characters of a value's text
NAME = 80  # characters of a variable's name
STACK = 40
WATCHES = 10  # frames of the call stack shown (the innermost)
PAUSE_SECONDS = 1.0  # a pause's time for the student's code it runs (watches, __repr__...), in all

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = TEXT
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = _repr.maxfrozenset = 10
_repr.maxlevel = 2
SETTRACE = sys.settrace  # ours: the student's code may replace sys.settrace with anything
SCALARS = (int, float, complex, bool, str, bytes, type(None))


class TooSlow(BaseException):
    """Student code at a pause ran out of the pause's time (a BaseException,
    so that a student's `except Exception` does not swallow it)."""


class AtPause:
    """Student code run by the debugger itself at a pause: the watches, and
    the __repr__, __len__ and iteration of the values shown. None of it may
    end or stall the program, print, or show the debugger's frames. A pause
    may spend PAUSE_SECONDS on it in all: then what is being worked out is
    interrupted (SIGALRM; told to the server first, as `slow`, in case the
    student's code swallows the interruption: the server's own deadline then
    ends the run and names it), and what is left is shown unworked."""

    def __init__(self):
        self.channel = None
        self.doing = None  # what is being worked out: {"watch": i} or {"value": name}
        self.out_of_time = False

    def check(self):
        if self.out_of_time:
            raise TooSlow()

    def on_alarm(self, signum, frame):
        self.out_of_time = True
        doing = self.doing
        if doing is None:
            return  # between two values, in our own code: the next one is refused (check)
        try:
            self.channel.send(dict({"type": "slow"}, **doing))
        except OSError:
            pass
        raise TooSlow()

    def __enter__(self):
        self.out_of_time = False
        self.doing = None
        self.saved = (sys.stdin, sys.stdout, sys.stderr, os._exit)
        # A __repr__ that prints writes nowhere; input() in a watch reads nothing; os._exit raises.
        sys.stdin = io.StringIO()
        sys.stdout = sys.stderr = _Nowhere()
        os._exit = _no_exit
        try:
            self.alarm = signal.signal(signal.SIGALRM, self.on_alarm)
            self.timer = signal.setitimer(signal.ITIMER_REAL, PAUSE_SECONDS)
        except (ValueError, OSError, AttributeError):  # not the main thread: no deadline of ours
            self.alarm = None
        return self

    def __exit__(self, *exc):
        if self.alarm is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.alarm)
            if self.timer[0]:  # the program's own alarm goes on
                signal.setitimer(signal.ITIMER_REAL, *self.timer)
        sys.stdin, sys.stdout, sys.stderr, os._exit = self.saved
        self.doing = None


class _Nowhere(io.TextIOBase):
    def writable(self):
        return True

    def write(self, text):
        return len(text) if isinstance(text, str) else 0


def _no_exit(*args):
    raise SystemExit("os._exit() is not run by a watch")


at_pause = AtPause()


def plain(text):
    """A str of ours: a str subclass's methods are the student's code."""
    return str.__str__(text) if isinstance(text, str) else "?"


_TYPE_NAME = type.__dict__["__name__"]


def type_name(value):
    """The name of a value's type, without asking the value (or its class's metaclass)."""
    return _TYPE_NAME.__get__(type(value))


def text_of(value):
    """A value's short text, as Python would print it in a list; never
    raises (a student's __repr__ may), but for TooSlow."""
    if type(value) not in SCALARS:  # (a built-in scalar's text runs none of the student's code)
        at_pause.check()
    try:
        if isinstance(value, types.FunctionType):
            code = value.__code__
            return plain("function %s(%s)" % (value.__name__, ", ".join(code.co_varnames[:code.co_argcount])))[:TEXT]
        if isinstance(value, type):
            return "class %s" % plain(value.__name__)[:TEXT]
        text = plain(_repr.repr(value))
    except TooSlow:
        raise
    except BaseException as e:
        text = "<cannot show: %s>" % type_name(e)
    return text if len(text) <= TEXT else text[:TEXT - 3] + "..."


def children(value):
    """(name, value) pairs inside a value a beginner can unfold, or None."""
    if isinstance(value, SCALARS):
        return None
    if isinstance(value, dict):
        return [(text_of(k), v) for k, v in _first(value.items())]
    if isinstance(value, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(_first(value))]
    if isinstance(value, (set, frozenset)):
        return [("", v) for v in _first(value)]
    if _is_code_thing(value):
        return None
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return [(plain(k), v) for k, v in _first(attributes.items()) if isinstance(k, str) and
                not plain(k).startswith("__")]
    return None


def text_of_error(e):
    try:
        return plain("%s: %s" % (type_name(e), e))[:TEXT]
    except TooSlow:
        raise
    except BaseException:
        return type_name(e)


def _first(items):
    out = []
    for item in items:
        if len(out) > ITEMS:
            break
        out.append(item)
    return out


def _is_code_thing(value):
    return isinstance(value, type) or callable(value) or type_name(value) == "module"


def view(name, value, depth, size):
    """A variable as the page shows it: name, type, text, and its insides
    down to `depth` levels. `size`: [nodes left], shared by a whole pause.
    Whatever the value does (its __repr__, __len__, __iter__, __class__
    raising, or too slow), it shows as that, never raises but for TooSlow."""
    size[0] -= 1
    node = {"name": plain(name)[:NAME], "type": type_name(value), "value": text_of(value)}
    try:
        inside = children(value) if depth > 0 and size[0] > 0 else None
        if inside is not None:
            shown = inside[:ITEMS]
            node["items"] = [view(n, v, depth - 1, size) for n, v in shown]
            total = len(inside)
            if isinstance(value, (list, tuple, dict, set, frozenset)):
                try:
                    total = len(value)  # (a subclass's __len__ is the student's code: it may raise)
                except TooSlow:
                    raise
                except BaseException:
                    pass
            if total > len(shown):
                node["more"] = total - len(shown)
    except TooSlow:
        raise
    except BaseException:  # its insides cannot be shown: its text is
        node.pop("items", None)
    return node


def worked_out(doing, work):
    """`work()`, student code at a pause, named `doing` ({"watch": i} or
    {"value": name}) for the server if it is slow: (True, its result) or
    (False, the sentence of what went wrong)."""
    try:
        at_pause.doing = doing
        at_pause.check()
        return True, work()
    except TooSlow:
        return False, "not shown: working it out took more than %g seconds" % PAUSE_SECONDS
    except BaseException as e:
        try:
            return False, text_of_error(e)
        except TooSlow:
            return False, type_name(e)
    finally:
        at_pause.doing = None


def watch_view(i, expr, ok, value, depth, size):
    """A watch's value as a variable named by its expression, or its error."""
    if ok:
        ok, value = worked_out({"watch": i}, lambda: view(expr, value, depth, size))
        if ok:
            return value
    return {"name": expr, "type": "error", "value": value}


def scope(names, previous, depth, size):
    """The variables of a namespace a beginner cares about (no dunders,
    modules, or the things Python defines for them), each with `changed`
    against `previous` ({name: text}, None: nothing to compare with)."""
    out, texts = [], {}
    for name, value in list(names.items()):
        if len(out) >= VARIABLES:
            break
        if not isinstance(name, str):
            continue
        name = plain(name)
        if name.startswith("__") or type_name(value) == "module":
            continue
        if type(value) in SCALARS:
            ok, node = True, view(name, value, depth, size)  # shown even once the pause is out of time
        else:
            ok, node = worked_out({"value": name[:NAME]}, lambda: view(name, value, depth, size))
        if not ok:
            node = {"name": name[:NAME], "type": type_name(value), "value": "<%s>" % node}
        texts[name] = json.dumps(node, sort_keys=True)  # a change is seen in its text or its insides
        node["changed"] = previous is not None and previous.get(name) != texts[name]
        out.append(node)
    return out, texts


class Channel:
    """Lines of JSON on the run's control channel (fd 3)."""

    def __init__(self, fd):
        self.fd = fd
        self.buffer = b""

    def send(self, message):
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        view_ = memoryview(data)
        while view_:
            view_ = view_[os.write(self.fd, view_):]

    def receive(self):
        """The next message (a dict), or None at the channel's end."""
        while b"\n" not in self.buffer:
            if not self.read():  # blocks: a paused program uses no CPU
                return None
        return self.pop()

    def read(self):
        chunk = os.read(self.fd, 65536)
        self.buffer = self.buffer + chunk if len(self.buffer) < (1 << 20) else chunk
        return bool(chunk)

    def pop(self):
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def ready(self):
        """What came while the program runs (read without blocking): the
        messages whose lines are whole, and perhaps the start of the next."""
        import select
        out = []
        if select.select([self.fd], [], [], 0)[0]:
            self.read()
        while b"\n" in self.buffer:
            out.append(self.pop())
        return out


class Debugger(bdb.Bdb):
    def __init__(self, root, channel):
        bdb.Bdb.__init__(self)
        self.root = os.path.join(os.path.realpath(root), "")
        self.channel = channel
        self.theirs = {}  # a code's file name -> its path relative to root, or None (not the student's)
        self.with_breaks = {}  # code object -> does a breakpoint lie among its lines
        self.continuing = False
        self.seen = {}  # frame -> {name: text} at the last pause; "globals" -> the globals'
        self.broken = False
        self.waiting = False  # paused, reading the channel (SIGIO then leaves it to user_line)
        self.watches = []  # expressions evaluated at each pause
        at_pause.channel = channel

    def listen(self):
        """Breakpoints the student sets while the program runs come on the
        channel; SIGIO (the socket's O_ASYNC) says so, between two of the
        program's bytecodes, so the program never polls for them."""
        try:
            import fcntl
            import signal
            fcntl.fcntl(self.channel.fd, fcntl.F_SETOWN, os.getpid())
            fcntl.fcntl(self.channel.fd, fcntl.F_SETFL, fcntl.fcntl(self.channel.fd, fcntl.F_GETFL) | os.O_ASYNC)
            signal.signal(signal.SIGIO, self.on_signal)
        except (OSError, ValueError, AttributeError):
            pass  # breakpoints then change at the next pause only

    def on_signal(self, signum, frame):
        if self.waiting or self.broken:
            return
        try:
            self.take_breakpoints(frame, self.channel.ready())
        except OSError:
            pass

    def take_breakpoints(self, frame, messages):
        for message in messages:
            if message.get("type") == "breakpoints":
                self.set_breakpoints(message.get("breakpoints"))
                self.trace_breakpoints(frame)

    def trace_breakpoints(self, frame):
        """Tracing again (continue may have turned it off) for new calls, and
        for the running frames whose code holds a breakpoint now."""
        if not self.breaks:
            return
        SETTRACE(self.trace_dispatch)
        while frame is not None:
            if self.relative(frame.f_code.co_filename) is not None and self.break_anywhere(frame):
                frame.f_trace = self.fast(frame.f_code) if self.continuing else self.trace_dispatch
                frame.f_trace_lines = True
            frame = frame.f_back

    # -- what is the student's ------------------------------------------------

    def relative(self, filename):
        """`filename` relative to the run's folder, or None when it is not
        one of the student's files (the standard library, ours, <string>)."""
        found = self.theirs.get(filename, False)
        if found is False:
            found = None
            if filename and not filename.startswith("<"):
                path = os.path.realpath(os.path.abspath(filename))
                if path.startswith(self.root) and path.endswith(".py"):
                    found = path[len(self.root):]
            self.theirs[filename] = found
        return found

    def dispatch_call(self, frame, arg):
        if self.relative(frame.f_code.co_filename) is None:
            return None  # never into the standard library or our code: its lines are not traced
        traced = bdb.Bdb.dispatch_call(self, frame, arg)
        return self.fast(frame.f_code) if traced is not None and self.continuing else traced

    def dispatch_line(self, frame):
        traced = bdb.Bdb.dispatch_line(self, frame)  # its answer becomes the frame's trace function
        return self.fast(frame.f_code) if traced is not None and self.continuing else traced

    def break_lines(self, code):
        """The lines of `code`'s own that hold a breakpoint (a set, cached)."""
        found = self.with_breaks.get(code)
        if found is None:
            lines = self.breaks.get(self.canonic(code.co_filename)) or ()
            found = self.with_breaks[code] = {line for _, _, line in code.co_lines() if line in lines}
        return found

    def break_anywhere(self, frame):
        """Only a frame whose own code holds a breakpoint is traced when
        continuing (bdb traces every frame of a file that has one)."""
        return bool(self.break_lines(frame.f_code))

    def fast(self, code):
        """The trace function of a frame holding a breakpoint, while
        continuing: a line without one costs a set lookup, not bdb's calls."""
        dispatch, lines_of = self.trace_dispatch, self.break_lines

        def trace(frame, event, arg):
            if event == "line" and frame.f_lineno not in lines_of(code):
                return trace
            result = dispatch(frame, event, arg)
            return trace if result is not None and self.continuing else result
        return trace

    # -- pausing ----------------------------------------------------------------

    def user_call(self, frame, argument_list):
        pass  # the function's first line pauses (a beginner reads lines, not calls)

    def user_return(self, frame, return_value):
        pass

    def user_exception(self, frame, exc_info):
        pass  # an uncaught error ends the program with its traceback, as always

    def user_line(self, frame):
        if self.broken:
            return
        stack = [f for f, _ in self.get_stack(frame, None)[0] if self.relative(f.f_code.co_filename) is not None]
        stack = stack[-STACK:] or [frame]
        selected = len(stack) - 1
        self.waiting = True
        try:
            self.channel.send({"type": "pausing"})  # the server's deadline for working out the pause starts
            self.channel.send(self.pause(stack, selected))
            while True:
                command = self.channel.receive()
                if command is None:
                    return self.give_up()
                self.set_breakpoints(command.get("breakpoints"))
                self.set_watches(command.get("watches"))
                kind = command.get("type")
                if kind == "frame":
                    index = command.get("frame")
                    if isinstance(index, int) and 0 <= index < len(stack):
                        selected = index
                    self.channel.send(self.pause(stack, selected))
                elif self.resume(kind, frame):
                    self.waiting = False
                    # Breakpoints sent just after the command were read with it: their signal was ignored.
                    return self.take_breakpoints(frame, self.channel.ready())
        except OSError:
            return self.give_up()
        finally:
            self.waiting = False

    def resume(self, kind, frame):
        self.continuing = kind == "continue"
        if kind == "step":
            self.set_next(frame)
        elif kind == "step_in":
            self.set_step()
        elif kind == "step_out":
            self.set_return(frame)
        elif kind == "continue":
            self.set_continue()
            self.untrace_lines(frame)
        else:
            return False
        return True

    def set_continue(self):
        self._set_stopinfo(self.botframe, None, -1)
        if not self.breaks:  # nothing can pause it any more: no tracing at all, full speed
            self.untrace()

    def untrace(self):
        SETTRACE(None)
        frame = sys._getframe()
        while frame is not None:
            frame.f_trace = None
            frame = frame.f_back

    def run(self, code, namespace):
        """Run `code` in `namespace`, traced from its first line."""
        self.reset()
        SETTRACE(self.trace_dispatch)
        try:
            exec(code, namespace)
        finally:
            self.quitting = True
            SETTRACE(None)

    def untrace_lines(self, frame):
        """On continue: the frames of the stack whose code holds no
        breakpoint stop reporting lines (each line costs a call otherwise),
        the others look for theirs quickly (fast)."""
        while frame is not None:
            if frame.f_trace is not None:
                if self.break_anywhere(frame):
                    frame.f_trace = self.fast(frame.f_code)
                else:
                    frame.f_trace_lines = False
            frame = frame.f_back

    def set_step(self):
        self.trace_lines_again()
        bdb.Bdb.set_step(self)

    def set_next(self, frame):
        self.trace_lines_again()
        bdb.Bdb.set_next(self, frame)

    def set_return(self, frame):
        self.trace_lines_again()
        bdb.Bdb.set_return(self, frame)

    def trace_lines_again(self):
        """Before a step: every student frame of the stack reports its lines
        again (continue may have left some untraced), so stepping out into
        one, or over the end of one, pauses in it."""
        frame = sys._getframe()
        while frame is not None:
            if self.relative(frame.f_code.co_filename) is not None:
                frame.f_trace = self.trace_dispatch  # (continue may have left none, or fast)
                frame.f_trace_lines = True
            frame = frame.f_back

    def forked(self):
        """In the copy that fork() made: only the first process is debugged
        (two paused at once would share one channel, and the copy could
        stall the first), so the copy runs on untraced, its channel closed."""
        self.broken = True
        self.untrace()
        try:
            os.close(self.channel.fd)
        except OSError:
            pass

    def give_up(self):
        """The channel is gone: the program runs on, undebugged."""
        self.broken = True
        self.untrace()

    def set_watches(self, wanted):
        if isinstance(wanted, list):
            self.watches = [w for w in wanted[:WATCHES] if isinstance(w, str) and len(w) <= 200]

    def set_breakpoints(self, wanted):
        if not isinstance(wanted, dict):
            return
        self.clear_all_breaks()
        self.with_breaks.clear()
        for path, lines in list(wanted.items())[:200]:
            if not isinstance(path, str) or not isinstance(lines, list) or path.startswith("/") or ".." in path:
                continue
            full = os.path.join(self.root, path)
            for line in lines[:1000]:
                if isinstance(line, int) and not isinstance(line, bool) and line > 0:
                    self.set_break(full, line)  # a line that does not exist is refused: nothing happens

    def watched(self, frame):
        """The watch expressions, each evaluated once in `frame`: (expression,
        True, value) or (expression, False, the error's sentence)."""
        out = []
        for i, expr in enumerate(self.watches):  # SystemExit, os._exit too: a watch never ends the program
            out.append((expr,) + worked_out({"watch": i}, lambda: eval(compile(expr, "<watch>", "eval"),
                                                                            frame.f_globals, frame.f_locals)))
        return out

    def pause(self, stack, selected):
        """The `paused` message: where, the stack, the selected frame's
        variables (and the globals, if that frame is a function's)."""
        with at_pause:
            try:
                return self.worked_out_pause(stack, selected)
            except TooSlow:  # (out of time between two values, in our code: nothing of theirs runs again)
                return self.worked_out_pause(stack, selected)

    def worked_out_pause(self, stack, selected):
        frame = stack[selected]
        watched = self.watched(frame)
        for depth in (DEPTH, 1, 0):
            size = [3000]
            variables, texts = scope(frame.f_locals, self.seen.get(frame), depth, size)
            message = {"type": "paused", "file": self.relative(stack[-1].f_code.co_filename),
                       "line": stack[-1].f_lineno,
                       "stack": [{"function": f.f_code.co_name, "file": self.relative(f.f_code.co_filename),
                                  "line": f.f_lineno} for f in stack],
                       "frame": selected, "variables": variables}
            global_texts = None
            if frame.f_locals is not frame.f_globals:
                message["globals"], global_texts = scope(frame.f_globals, self.seen.get("globals"), depth, size)
            if watched:
                message["watches"] = [watch_view(i, expr, ok, value, depth, size)
                                      for i, (expr, ok, value) in enumerate(watched)]
            if len(json.dumps(message)) <= MESSAGE_BYTES:
                break
            message["variables"] = message["variables"][:20]
            message.pop("globals", None)
            message.pop("watches", None)
        if selected == len(stack) - 1:  # what changed is told between steps, for the frame that steps
            self.seen = {f: self.seen[f] for f in stack if f in self.seen}
            self.seen[frame] = texts
            if global_texts is not None:
                self.seen["globals"] = global_texts
            elif frame.f_locals is frame.f_globals:
                self.seen["globals"] = texts
        return message


def main(script, code, namespace, channel_fd, options):
    """Run `code` (the student's file, compiled) in `namespace` under the
    debugger, paused at its first line."""
    debugger = Debugger(os.getcwd(), Channel(channel_fd))
    debugger.set_breakpoints(options.get("breakpoints"))
    debugger.set_watches(options.get("watches"))
    debugger.listen()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=debugger.forked)
    debugger.run(code, namespace)
