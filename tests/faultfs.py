"""A file system that misbehaves on demand, for the storage-fault tests.

A FUSE passthrough (pyfuse3) that mounts SOURCE at MOUNTPOINT and does what
the control file says, read at once whenever it changes:

    normal          pass every call through
    delay <ms>      wait <ms> before each call, as a slow network file system
    hang            hold every call until the mode changes, as an NFS mount
                    in a network partition (its callers sleep in the kernel)
    hang-name <s>   hold only calls naming a file or folder whose name holds <s>
                    (one student's files stuck, the rest answering)
    fail EROFS      refuse every change with EROFS (reads still work)
    fail EIO        fail every call with EIO
    fail ENOSPC     refuse what takes room (create, mkdir, write, link) with ENOSPC

After applying a mode it writes it to CONTROL.ack, so a test knows the mode
is in force. Run with the system Python, which has pyfuse3 (the project's
virtualenv does not):

    /usr/bin/python3 tests/faultfs.py SOURCE MOUNTPOINT CONTROL

SIGTERM unmounts and exits. Attribute and entry caching are off, so every
stat reaches this process and meets the mode in force.
"""
import errno
import functools
import os
import signal
import stat
import sys

import pyfuse3
import trio

CHANGES = {"create", "mkdir", "write", "link", "symlink", "mknod", "setattr", "unlink", "rmdir", "rename"}
TAKES_ROOM = {"create", "mkdir", "write", "link", "symlink", "mknod"}


def gated(kind):
    """The call meets the mode in force first; an OSError becomes its errno."""
    def wrap(fn):
        @functools.wraps(fn)
        async def call(self, *args):
            await self.mode_gate(kind, args)
            try:
                return fn(self, *args)
            except OSError as e:
                raise pyfuse3.FUSEError(e.errno) from None
        return call
    return wrap


class FaultFS(pyfuse3.Operations):
    def __init__(self, source):
        super().__init__()
        self.source = os.fsencode(os.path.realpath(source))
        self.paths = {pyfuse3.ROOT_INODE: {self.source}}  # inode -> its names (hard links: several)
        self.root_ino = os.lstat(self.source).st_ino
        self.mode = ("normal",)
        self.released = trio.Event()  # set when a hang ends
        self.dirs = {}  # opendir handle -> entries
        self.next_dir = 1

    # -- the mode ---------------------------------------------------------

    async def mode_gate(self, kind, args=()):
        mode = self.mode
        if mode[0] == "delay":
            await trio.sleep(mode[1] / 1000)
        elif mode[0] == "hang" or (mode[0] == "hang-name" and kind != "write" and
                                   any(isinstance(a, bytes) and mode[1] in a for a in args)):
            await self.released.wait()
            return await self.mode_gate(kind, args)  # the mode that ended the hang
        elif mode[0] == "fail" and kind != "close":
            code = mode[1]
            if code == errno.EIO or (code == errno.EROFS and kind in CHANGES) or \
                    (code == errno.ENOSPC and kind in TAKES_ROOM):
                raise pyfuse3.FUSEError(code)

    def set_mode(self, text):
        words = text.split()
        if not words or words[0] == "normal":
            mode = ("normal",)
        elif words[0] == "delay":
            mode = ("delay", int(words[1]))
        elif words[0] == "hang":
            mode = ("hang",)
        elif words[0] == "hang-name":
            mode = ("hang-name", os.fsencode(words[1]))
        elif words[0] == "fail":
            mode = ("fail", getattr(errno, words[1]))
        else:
            raise ValueError(text)
        if self.mode[0] in ("hang", "hang-name") and mode != self.mode:
            self.released.set()
            self.released = trio.Event()
        self.mode = mode

    # -- names ------------------------------------------------------------

    def path(self, inode):
        names = self.paths.get(inode)
        if not names:
            raise pyfuse3.FUSEError(errno.ENOENT)
        for name in names:
            if os.path.lexists(name):
                return name
        return next(iter(names))

    def child(self, parent, name):
        return os.path.join(self.path(parent), name)

    def inode_of(self, st):
        return pyfuse3.ROOT_INODE if st.st_ino == self.root_ino else st.st_ino

    def known(self, path):
        """The attributes of `path`, its name remembered under its inode."""
        st = os.lstat(path)
        self.paths.setdefault(self.inode_of(st), set()).add(path)
        return self.attrs(st)

    def forget_name(self, path):
        try:
            inode = self.inode_of(os.lstat(path))
        except OSError:
            return
        names = self.paths.get(inode)
        if names:
            names.discard(path)

    def attrs(self, st):
        entry = pyfuse3.EntryAttributes()
        for field in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size", "st_blksize", "st_blocks",
                      "st_atime_ns", "st_mtime_ns", "st_ctime_ns"):
            setattr(entry, field, getattr(st, field))
        entry.st_ino = self.inode_of(st)
        entry.generation = 0
        entry.entry_timeout = 0
        entry.attr_timeout = 0
        return entry

    def owned(self, path, ctx):
        if ctx.uid != os.geteuid():
            os.chown(path, ctx.uid, ctx.gid, follow_symlinks=False)

    # -- calls ------------------------------------------------------------

    @gated("lookup")
    def lookup(self, parent, name, ctx):
        return self.known(self.child(parent, name))

    @gated("getattr")
    def getattr(self, inode, ctx):
        return self.attrs(os.lstat(self.path(inode)))

    @gated("setattr")
    def setattr(self, inode, attr, fields, fh, ctx):
        path = self.path(inode)
        if fields.update_size:
            if fh is not None:
                os.ftruncate(fh, attr.st_size)
            else:
                os.truncate(path, attr.st_size)
        if fields.update_mode:
            os.chmod(path, stat.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(path, attr.st_uid if fields.update_uid else -1, attr.st_gid if fields.update_gid else -1,
                     follow_symlinks=False)
        if fields.update_atime or fields.update_mtime:
            st = os.lstat(path)
            os.utime(path, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                               attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns),
                     follow_symlinks=False)
        return self.attrs(os.lstat(path))

    @gated("readlink")
    def readlink(self, inode, ctx):
        return os.readlink(self.path(inode))

    @gated("opendir")
    def opendir(self, inode, ctx):
        path = self.path(inode)
        entries = []
        with os.scandir(path) as it:
            for entry in it:
                try:
                    entries.append((entry.name, self.known(os.path.join(path, entry.name))))
                except OSError:
                    pass  # gone meanwhile
        handle = self.next_dir
        self.next_dir += 1
        self.dirs[handle] = entries
        return handle

    async def readdir(self, fh, start_id, token):
        entries = self.dirs[fh]
        for i in range(start_id, len(entries)):
            name, attrs = entries[i]
            if not pyfuse3.readdir_reply(token, name, attrs, i + 1):
                break

    async def releasedir(self, fh):
        self.dirs.pop(fh, None)

    @gated("mkdir")
    def mkdir(self, parent, name, mode, ctx):
        path = self.child(parent, name)
        os.mkdir(path, mode)
        self.owned(path, ctx)
        return self.known(path)

    @gated("mknod")
    def mknod(self, parent, name, mode, rdev, ctx):
        path = self.child(parent, name)
        os.mknod(path, mode, rdev)
        self.owned(path, ctx)
        return self.known(path)

    @gated("symlink")
    def symlink(self, parent, name, target, ctx):
        path = self.child(parent, name)
        os.symlink(target, path)
        self.owned(path, ctx)
        return self.known(path)

    @gated("link")
    def link(self, inode, new_parent, new_name, ctx):
        path = self.child(new_parent, new_name)
        os.link(self.path(inode), path, follow_symlinks=False)
        return self.known(path)

    @gated("unlink")
    def unlink(self, parent, name, ctx):
        path = self.child(parent, name)
        self.forget_name(path)
        os.unlink(path)

    @gated("rmdir")
    def rmdir(self, parent, name, ctx):
        path = self.child(parent, name)
        self.forget_name(path)
        os.rmdir(path)

    @gated("rename")
    def rename(self, old_parent, old_name, new_parent, new_name, flags, ctx):
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)  # the store never asks for RENAME_NOREPLACE/EXCHANGE
        old, new = self.child(old_parent, old_name), self.child(new_parent, new_name)
        self.forget_name(new)
        os.rename(old, new)
        for names in self.paths.values():  # the moved name, and everything under it if a folder
            for name in list(names):
                if name == old or name.startswith(old + b"/"):
                    names.discard(name)
                    names.add(new + name[len(old):])

    @gated("open")
    def open(self, inode, flags, ctx):
        if self.mode[0] == "fail" and self.mode[1] == errno.EROFS and flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            raise pyfuse3.FUSEError(errno.EROFS)
        return pyfuse3.FileInfo(fh=os.open(self.path(inode), flags & ~os.O_CREAT))

    @gated("create")
    def create(self, parent, name, mode, flags, ctx):
        path = self.child(parent, name)
        fd = os.open(path, flags | os.O_CREAT, mode)
        self.owned(path, ctx)
        return pyfuse3.FileInfo(fh=fd), self.known(path)

    @gated("read")
    def read(self, fh, offset, size):
        return os.pread(fh, size, offset)

    @gated("write")
    def write(self, fh, offset, data):
        return os.pwrite(fh, data, offset)

    @gated("close")
    def flush(self, fh):
        pass

    @gated("fsync")
    def fsync(self, fh, datasync):
        (os.fdatasync if datasync else os.fsync)(fh)

    @gated("fsync")
    def fsyncdir(self, fh, datasync):
        pass  # the source's folders are on a local disk; nothing to flush through

    async def release(self, fh):
        os.close(fh)

    @gated("statfs")
    def statfs(self, ctx):
        st = os.statvfs(self.source)
        data = pyfuse3.StatvfsData()
        for field in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail",
                      "f_namemax"):
            setattr(data, field, getattr(st, field))
        return data

    async def forget(self, inode_list):
        pass  # names are kept for the test's life: a few thousand at most


async def follow(fs, control):
    """Apply the control file's mode whenever it changes; say so in CONTROL.ack."""
    seen = None
    while True:
        try:
            st = os.stat(control)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp != seen and stamp is not None:
            seen = stamp
            with open(control) as f:
                text = f.read().strip()
            fs.set_mode(text)
            temp = control + ".ack.tmp"
            with open(temp, "w") as f:
                f.write(text)
            os.replace(temp, control + ".ack")
        await trio.sleep(0.02)


async def serve(fs, control):
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow, fs, control)

        async def on_term():
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    fs.set_mode("normal")  # let held calls finish, then leave
                    pyfuse3.terminate()
                    return
        nursery.start_soon(on_term)
        await pyfuse3.main(min_tasks=4, max_tasks=64)
        nursery.cancel_scope.cancel()


def main(source, mountpoint, control):
    fs = FaultFS(source)
    options = set(pyfuse3.default_options) | {"fsname=faultfs", "allow_other"}
    pyfuse3.init(fs, mountpoint, options)
    try:
        trio.run(serve, fs, control)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
