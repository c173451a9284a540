"""The seccomp filter of student code, built with libseccomp.

Run as a script by an interpreter that has Debian's `python3-seccomp` (the
system python3, SANDBOX_PYTHON): it writes the filter as a BPF program to
stdout. The server builds it once at start-up (sandbox.seccomp_program) and
every launcher loads it into itself before any student code exists, so the
program and everything it starts inherit it and cannot remove it.

Everything is allowed but what gives a program power over other processes
(its launcher included) or over the kernel: tracing and reading other
processes' memory, taking their descriptors, new user namespaces and
mounts, kernel keyrings, BPF, perf events, userfaultfd, io_uring, and
typing into a terminal's input (TIOCSTI), and reading the mount table with
listmount/statmount (like /proc's mountinfo, it names the host's paths of
the sandbox's mounts: its home's). fallocate answers "not supported", so
a file's space is taken by writing it, which each run's write budget
counts (disk_guard.py); the C library's posix_fallocate then writes. Docker's default profile stays
in force under it in the docker sandbox. Calls from another architecture
(i386 via int 0x80) kill the process: libseccomp's default for a filter.
"""
import errno
import sys

import seccomp

DENIED = (
    # other processes: the launcher is one
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    # the kernel's attack surface students never need
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "name_to_handle_at", "open_by_handle_at", "syslog",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "acct",
    "swapon", "swapoff", "reboot", "quotactl", "iopl", "ioperm", "vhangup", "fanotify_init",
)
# Newer than the libseccomp of Debian bookworm, which knows them by number
# only; new system calls have the same number on every architecture.
BY_NUMBER = {"statmount": 457, "listmount": 458}
CLONE_NEWUSER = 0x10000000
TIOCSTI = 0x5412
TIOCLINUX = 0x541C


def build():
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        try:
            f.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError):
            pass  # not a call on this architecture or libseccomp version
    for name, number in BY_NUMBER.items():
        try:
            f.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError):
            f.add_rule(seccomp.ERRNO(errno.EPERM), number)
    f.add_rule(seccomp.ERRNO(errno.EOPNOTSUPP), "fallocate")
    # A new user namespace would give the program every capability inside it.
    f.add_rule(seccomp.ERRNO(errno.EPERM), "clone",
               seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    # clone3 passes its flags in memory, which a filter cannot read: ENOSYS
    # makes the C library fall back to clone, which the rule above checks.
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for request in (TIOCSTI, TIOCLINUX):
        f.add_rule(seccomp.ERRNO(errno.EPERM), "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    return f


if __name__ == "__main__":
    build().export_bpf(sys.stdout)
