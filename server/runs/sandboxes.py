"""Which sandbox student code runs in: chosen once, made in each worker."""
import logging

from .sandbox_local import LocalSandbox, ProcessSandbox, build_mpl_cache

log = logging.getLogger(__name__)


def resolve(cfg):
    """The sandbox kind to use: SANDBOX, or for `auto` the best that works
    here. Called once, before the workers are forked."""
    if cfg.SANDBOX == "local" or (cfg.SANDBOX == "auto" and LocalSandbox.works(cfg)):
        LocalSandbox.check_storage(cfg)
        kind = "local"
    elif cfg.SANDBOX != "auto":
        kind = cfg.SANDBOX
    else:
        from .sandbox_docker import DockerSandbox
        kind = "docker" if DockerSandbox.works(cfg) else "process"
    if kind in ("local", "process"):
        build_mpl_cache(cfg)
    return kind


def create(cfg):
    if cfg.SANDBOX == "local":
        return LocalSandbox(cfg)
    if cfg.SANDBOX == "docker":
        from .sandbox_docker import DockerSandbox
        return DockerSandbox(cfg)
    return ProcessSandbox(cfg)


def announce(cfg):
    """One line for the start-up log: where student code runs, what holds it
    and what is missing here (and why). Made before the workers are forked,
    which also gives a cgroup v2 host's server its leaf group."""
    sandbox = create(cfg)
    try:
        return describe(sandbox.name, sandbox.defences())
    finally:
        sandbox.close()


def describe(name, defences):
    parts = [f"student programs run in the {name} sandbox"]
    if name == "process":
        parts.append("student code is NOT isolated from the server: use it for development only; "
                     "use local (bubblewrap) or docker for a class")
    parts.append("seccomp filter on" if defences["seccomp"] else
                 "NO seccomp filter (install python3-seccomp)")
    parts.append(defences["cgroup"] or "NO per-run cgroup (needs root and cgroups): memory is limited per "
                                       "process and a run is killed by its process group only")
    if not defences["own_uid"]:
        parts.append("all students' programs share the server's uid (run the server as root)")
    if not defences["host_paths_hidden"]:
        parts.append("the home's host path shows in /proc/self/mountinfo")
    return "; ".join(parts)
