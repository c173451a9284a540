"""The import guard: what makes a check's `no_import:MODULE` rule hold while
the student's program runs, however the import is spelled.

The launcher runs install(modules) in the program's process, after its own
code has loaded and before any of the student's (the `go` frame's
"forbid"). From then on, importing one of `modules` (or a submodule of one)
ends the process at once: a plain line on stderr, then os._exit with a code
of the guard's own (EXIT_FIRST + the module's index). The server learns
exits from the kernel, so nothing the program does afterwards (catching
the error, printing a result) can make the rule pass, and a program that
fakes the code only fails itself.

An audit hook (PEP 578: it cannot be removed, and runs before any hook the
program adds) sees every way in:
  - `import`: the import statement, __import__, exec("import ..."), and
    an extension module's file loaded by any loader;
  - `exec` of code compiled from the module's files: importlib.import_module,
    importlib.util, runpy, pkgutil, a loader called by hand;
  - `open` of the module's files (its source, its cached bytecode, a
    package's __init__), matched by inode whatever the path: reading the
    source to run it under another name. Where the kernel has Landlock,
    the launcher also makes these files unreadable for good (install's
    `confine`), so an open the hook cannot place (relative to a folder's
    descriptor, or through a symlink swapped meanwhile) fails.
A module compiled into the interpreter (math, on Debian) is loaded by
importlib without any event: a finder first on sys.meta_path stops it
(a program that takes the finder off sys.meta_path, or calls _imp itself,
can load such a module by importlib unseen; its import statement is seen).
Before the hook, the modules are dropped from sys.modules, so that a copy
loaded earlier (by the launcher) is not found without an import.

With the guard on, the program may not start another program (an
interpreter without the guard), make a sub-interpreter (which has hooks
of its own), use ctypes or list the garbage collector's objects (ways to
reach behind the hook), nor replace the hook's code: each ends it with
EXIT_HIDDEN, and the rule fails, as it can no longer be shown to hold. A
program started in a way no event reports (multiprocessing's "spawn",
_posixsubprocess) is refused by the kernel: the launcher's seccomp filter
makes execve fail, on the machines it knows.

A module that a permitted one imports counts as imported: forbidding math
forbids random, which imports it.

Not seen: a module object reached through the attributes of code that
had loaded it before the guard (the checks' own code, in a function check),
without an import.

The hook looks nothing up at call time (no global, no builtin the program
could replace): all it uses is bound as its defaults. Standard library
only, any Python 3.8+: the server sends it as source text.
"""
import os
import sys
import types

EXIT_FIRST = 200  # the program imported modules[i]: its exit code is EXIT_FIRST + i ...
EXIT_LAST = 239  # ... up to this one, which stands for every module from there on
EXIT_HIDDEN = 199  # it did something that would hide an import (another program, ctypes...)
FILENAME = "<pyclassroom-import-guard>"  # the guard's code objects (the launcher compiles it so)

SPAWNING = frozenset(("os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile", "subprocess.Popen"))
LOOKING_BEHIND = frozenset(("gc.get_objects", "gc.get_referrers", "gc.get_referents",
                            "cpython.PyInterpreterState_New"))
CODE_ATTRIBUTES = frozenset(("__code__", "__defaults__", "__kwdefaults__"))


def exit_code(index: int) -> int:
    """The exit code that says modules[index] was imported."""
    return EXIT_FIRST + min(index, EXIT_LAST - EXIT_FIRST)


def install(modules, confine=None):
    """From now on in this process, importing one of `modules` ends it.
    `confine(paths)`, if given, is the launcher's part, done first: the
    kernel makes the modules' files (`paths`) unreadable and refuses to
    start a program, where it can."""
    names = tuple(str(m) for m in modules)
    sources, folders, files = {}, [], {}
    for index, name in enumerate(names):
        locate(name, index, sources, folders, files)
    inodes = {}
    for path, index in files.items():
        try:
            st = os.stat(path)
        except OSError:
            continue
        inodes[(st.st_dev, st.st_ino)] = index
    hidden = {os.path.realpath(path) for path in list(files) + [folder for folder, _ in folders]}
    if confine is not None:
        confine(sorted(hidden))
    prefixes = tuple(name + "." for name in names)
    for loaded in list(sys.modules):
        if loaded in names or loaded.startswith(prefixes):
            del sys.modules[loaded]
    said = tuple(said_line(name) for name in names) + (
        b"Your program started another program or reached into Python's internals while it was checked, "
        b"which this exercise's rule about imports does not allow.\n",)
    if any(name.partition(".")[0] in sys.builtin_module_names for name in names):
        sys.meta_path.insert(0, CompiledInFinder(names, said))
    codes = tuple(exit_code(index) for index in range(len(names))) + (EXIT_HIDDEN,)
    sys.addaudithook(make_hook(names, prefixes, types.MappingProxyType(sources), tuple(folders),
                               types.MappingProxyType(inodes), said, codes))


def said_line(name):
    return ("Your program imported %s while it ran (itself, or through a module it imported), "
            "which this exercise does not allow.\n" % name).encode("utf-8", "replace")


def locate(name, index, sources, folders, files):
    """Where the module `name` would be loaded from (found without importing
    anything): its source's path and its frozen name into `sources`, a
    package's folder into `folders`, its files (the source or extension,
    the cached bytecode) into `files`."""
    from importlib.machinery import PathFinder
    sources["<frozen %s>" % name] = index
    try:
        top, _, rest = name.partition(".")
        spec = PathFinder.find_spec(top)
        for part in rest.split(".") if rest else ():
            if spec is None or not spec.submodule_search_locations:
                return
            spec = PathFinder.find_spec(spec.name + "." + part, list(spec.submodule_search_locations))
    except (ImportError, OSError, ValueError):
        return
    if spec is None:
        return
    for folder in spec.submodule_search_locations or ():
        folders.append((os.path.join(os.path.abspath(folder), ""), index))
    if spec.has_location and spec.origin:
        origin = os.path.abspath(spec.origin)
        sources[origin] = files[origin] = index
        cache = os.path.join(os.path.dirname(origin), "__pycache__")
        stem = os.path.splitext(os.path.basename(origin))[0] + "."
        try:
            files.update((os.path.join(cache, f), index) for f in os.listdir(cache) if f.startswith(stem))
        except OSError:
            pass


def inode_index(path, inodes, stat):
    """The index of the module whose file `path` is, or None."""
    try:
        st = stat(path)
    except:  # noqa: E722 -- no name the program could have replaced: not there, not ours
        return None
    return inodes.get((st.st_dev, st.st_ino))


def make_hook(names, prefixes, sources, folders, inodes, said, codes):
    """The audit hook. It has no free variable (a closure's cells can be
    rewritten) and reads no global: all it uses are its defaults, which
    cannot be replaced without an event it sees. `said` and `codes`: the
    line and the exit code for each module, then for EXIT_HIDDEN."""
    def hook(event, args, names=names, prefixes=prefixes, sources=sources, folders=folders, inodes=inodes,
             said=said, codes=codes, spawning=SPAWNING, looking_behind=LOOKING_BEHIND,
             code_attributes=CODE_ATTRIBUTES, filename=FILENAME, inode_index=inode_index,
             as_str=str.__str__, starts=str.startswith, str_=str, bytes_=bytes, isinstance_=isinstance,
             type_=type, code_type=types.CodeType, function_type=types.FunctionType, len_=len, range_=range,
             stat=os.stat, write=os.write, exit_=os._exit):
        try:
            event = as_str(event)  # a str subclass's own == must not run in here
            index = None
            if event == "import":
                name = as_str(args[0])
                for i in range_(len_(names)):
                    if name == names[i] or starts(name, prefixes[i]):
                        index = i
                        break
                if index is None and len_(args) > 1 and isinstance_(args[1], str_):  # an extension's file
                    index = inode_index(as_str(args[1]), inodes, stat)
            elif event == "exec":
                code = args[0]
                if type_(code) is code_type:
                    source = as_str(code.co_filename)
                    index = sources.get(source)
                    for folder, i in folders:
                        if index is None and starts(source, folder):
                            index = i
            elif event == "open":
                path = args[0]
                if isinstance_(path, str_):
                    index = inode_index(as_str(path), inodes, stat)
                elif isinstance_(path, bytes_):
                    index = inode_index(bytes_(path), inodes, stat)
            elif event in spawning or event in looking_behind or starts(event, "ctypes."):
                index = -1
            elif event == "object.__setattr__" and type_(args[0]) is function_type and \
                    isinstance_(args[1], str_) and as_str(args[1]) in code_attributes and \
                    as_str(args[0].__code__.co_filename) == filename:
                index = -1  # the hook's own code replaced
        except:  # noqa: E722 -- a bare except names nothing the program could have replaced
            index = -1  # whatever made the look fail is not let through
        if index is None:
            return
        try:
            write(2, said[index])
        except:  # noqa: E722 -- stderr closed: the exit code says it all
            pass
        exit_(codes[index])
    return hook


class CompiledInFinder:
    """First on sys.meta_path: importlib loads a module compiled into the
    interpreter without any audit event, but asks its finders first."""

    def __init__(self, names, said):
        self.names, self.said = names, said

    def find_spec(self, fullname, path=None, target=None):
        for index, name in enumerate(self.names):
            if fullname == name or fullname.startswith(name + "."):
                try:
                    os.write(2, self.said[index])
                finally:
                    os._exit(exit_code(index))
        return None
