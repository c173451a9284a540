"""The walls around an assist process: what it can see, who it runs as,
how much memory and CPU it may take.

An assist process reads text a student typed, and jedi follows whatever
imports that text names: relative ones walk up the folder tree, so an
unwalled process could list and read any folder its user can (other
students' copies, homes on the storage, DATA_DIR). So it runs as a
student's program does, in bubblewrap:

- it sees the system's /usr (the sandbox interpreter's library, numpy,
  matplotlib), a few files of /etc, a read-only copy of jedi, parso,
  pyflakes and its own code, and a small private /tmp that holds the one
  student's modules it is answering for (engine.Projects); no storage, no
  DATA_DIR, no /proc, no network;
- it never runs as root: as root the server starts it as `nobody`, and
  otherwise as the server's own user, inside a user namespace either way;
- as root on a host with cgroups, each process (with jedi's subprocess) is
  in a cgroup of its own with a memory, process and CPU limit, on top of
  the worker's address-space limit.

If bubblewrap cannot start the process here, editing help is off and
/api/status says why: it never falls back to an unwalled process.
Everything here blocks: call it from a thread.
"""
import os
import pwd
import shutil
import subprocess
import tempfile

from ..runs import cgroups

PACKAGES = ("jedi", "parso", "pyflakes")
CODE = ("__init__.py", "assist/__init__.py", "assist/child/__init__.py", "assist/child/__main__.py",
        "assist/child/engine.py", "assist/child/ranking.py")  # what runs in the jail: child/
LIB = "/opt/assist"  # where the copy is seen in the jail
FOLDER = "/tmp/assist"  # the process's own folder in the jail (its /tmp is private)
TMP_BYTES = 64 << 20
PROCESSES = 16  # the worker, jedi's subprocess and room to spare
ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "python3", "python3.11")
PROBE_TIMEOUT = 60
SERVER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class JailError(RuntimeError):
    """Editing help cannot be walled in here (the message says why)."""


class Jail:
    def __init__(self, python, memory_mb):
        self.python = python
        self.memory_mb = memory_mb
        self.bwrap = shutil.which("bwrap")
        self.uid = pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else None
        self.folder = None
        self.groups = None

    def prepare(self):
        """Copy the code the process runs where its user can read it, check
        that a walled process starts, and make the cgroups' parent."""
        if not self.bwrap:
            raise JailError("bubblewrap (bwrap) is not installed")
        if not os.access(self.python, os.X_OK):
            raise JailError(f"the sandbox interpreter {self.python} is missing")
        self.folder = tempfile.mkdtemp(prefix="pyclassroom-assist-")
        os.chmod(self.folder, 0o755)  # the copy is code anyone may read; nothing else is here
        lib = os.path.join(self.folder, "lib")
        for name in PACKAGES:
            source = os.path.dirname(__import__(name).__file__)
            shutil.copytree(source, os.path.join(lib, name), ignore=shutil.ignore_patterns("__pycache__"))
        for name in CODE:
            target = os.path.join(lib, "server", name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(SERVER, name), target)
        for where, dirs, files in os.walk(lib):
            for name in dirs:
                os.chmod(os.path.join(where, name), 0o755)
            for name in files:
                os.chmod(os.path.join(where, name), 0o644)
        probe = self.argv("-c", "import jedi, pyflakes, os; print(os.getuid() != 0 and not os.path.exists('/proc/1'))")
        try:
            done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, env=self.env(),
                                  **self.as_user())
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JailError(f"bubblewrap could not start: {e}") from None
        if done.stdout.strip() != b"True":
            said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
            raise JailError(f"bubblewrap could not start the process: {said[-1] if said else done.returncode}")
        self.groups = cgroups.Groups.detect(parent=cgroups.ASSIST_PARENT, idle=False)
        if self.groups:
            self.groups.cleanup_leftovers()

    def worker(self, python):
        """The command line of one assist process."""
        return self.argv("-m", "server.assist.child", "--python", python, "--folder", FOLDER)

    def argv(self, *args):
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                "--cap-drop", "ALL", "--hostname", "assist", "--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + link):
                argv += ["--symlink", os.readlink("/" + link), "/" + link]
            elif os.path.isdir("/" + link):
                argv += ["--ro-bind", "/" + link, "/" + link]
        for name in ETC:
            argv += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
        argv += ["--dev", "/dev", "--size", str(TMP_BYTES), "--perms", "1777", "--tmpfs", "/tmp",
                 "--ro-bind", os.path.join(self.folder, "lib"), LIB, "--remount-ro", "/", "--chdir", "/tmp",
                 "--clearenv"]
        for key, value in self.env().items():
            argv += ["--setenv", key, value]
        # -s: no user site-packages (the environment is the jail's own, set above).
        return argv + ["--", self.python, "-s", *args]

    @staticmethod
    def env():
        return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": LIB,
                "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

    def as_user(self):
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.uid, "extra_groups": []}

    def contain(self, pids):
        """Put a started process and its children in a cgroup of their own
        (when the host has them); the group, to be given to release()."""
        if not self.groups:
            return None
        group = self.groups.new(cgroups.GroupLimits(memory_bytes=self.memory_mb << 20, processes=PROCESSES))
        try:
            for pid in sorted(pids):
                group.add(pid)
        except OSError:
            group.kill()
            group.remove()
            raise
        return group

    @staticmethod
    def release(group):
        """Kill whatever is left in the group and remove it."""
        if group is not None:
            group.kill()
            group.remove()

    def describe(self):
        return {"walls": "bubblewrap: no storage, no DATA_DIR, no network, the one student's modules",
                "user": "nobody" if self.uid is not None else "the server's own (not root)",
                "cgroup": f"{self.memory_mb} MB, {PROCESSES} processes, one CPU per process"
                          if self.groups else None}

    def close(self):
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
