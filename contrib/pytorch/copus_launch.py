"""copus_launch: the start of a distributed PyTorch job, under Slurm and
without it.

init_distributed() makes torch.distributed's default process group from
the environment the process was started in, so that one training script
runs unchanged under srun, under copus-torchrun (this module's command)
or torchrun, and as a single process:

    import copus_launch
    rank, world, local_rank = copus_launch.init_distributed()

`python3 -m copus_launch --nproc N script.py ARGS...` (installed as
copus-torchrun) starts N processes of the script on this machine with
the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), forwards the signals it gets to them (SIGUSR1, libcopus's
rescale signal, among them) and exits with the first non-zero exit code
of one of them, so that a rescale's requeue code (75) reaches whoever
started it; 0 when every one exits 0. It stands in for torchrun where
that is broken (Debian's torch 1.13 on Python 3.11) or absent.
"""

import argparse
import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import time

PROG = "copus-torchrun"

# The first port of the range a Slurm job's port is taken from, and the
# range's size: SLURM_JOB_ID picks one, the same on every rank.
SLURM_PORT_BASE, SLURM_PORT_RANGE = 20000, 20000


class LaunchError(RuntimeError):
    pass


# -- where the job's ranks are ------------------------------------------------
def _int(env, name, low=0):
    v = env.get(name)
    if v is None or v == "":
        raise LaunchError("init_distributed: %s is not set" % name)
    try:
        n = int(v)
    except ValueError:
        n = None
    if n is None or n < low:
        raise LaunchError("init_distributed: %s=%r is not an integer of at "
                          "least %d" % (name, v, low))
    return n


def first_host(nodelist, scontrol="scontrol"):
    """The first host of a Slurm host list ("gpu[03-05,9],cpu1" ->
    "gpu03"): by `scontrol show hostnames`, or, when scontrol is missing
    or fails (no slurm.conf on this machine), by reading the list's first
    entry here."""
    try:
        out = subprocess.run([scontrol, "show", "hostnames", nodelist],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=30,
                             check=True).stdout.decode().split()
        if out:
            return out[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return _first_of_hostlist(nodelist)


def _first_of_hostlist(nodelist):
    # The first entry ends at the first comma outside brackets; each
    # bracketed range in it contributes its first number, with its
    # zero padding ("rack[2-3]-n[007-9]" -> "rack2-n007").
    depth, end = 0, len(nodelist)
    for i, c in enumerate(nodelist):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            end = i
            break
    entry = nodelist[:end].strip()
    host = re.sub(r"\[([^\]]*)\]",
                  lambda m: re.split(r"[-,]", m.group(1))[0], entry)
    if not host or "[" in host or "]" in host:
        raise LaunchError("init_distributed: cannot read the first host of "
                          "the node list %r" % nodelist)
    return host


def slurm_port(job_id):
    """The port of a Slurm job's rendezvous: the same on every rank, and
    different for jobs whose ids differ by less than the range."""
    return SLURM_PORT_BASE + job_id % SLURM_PORT_RANGE


def layout_from_env(env=None):
    """Where this process stands, from the environment: a dict of rank,
    world, local_rank, master_addr, master_port (None for one process on
    its own) and source ("env", "slurm" or "single").

    RANK/WORLD_SIZE (torchrun, copus-torchrun, or set by hand) come first,
    as libcopus reads them first; then a Slurm task's SLURM_PROCID; else a
    single process. A missing or malformed variable is a LaunchError that
    names it."""
    env = os.environ if env is None else env
    if env.get("RANK", "") != "":
        rank = _int(env, "RANK")
        world = _int(env, "WORLD_SIZE", 1)
        # One process per machine needs no LOCAL_RANK.
        local = _int(env, "LOCAL_RANK") if env.get("LOCAL_RANK", "") != "" \
            else 0
        addr = env.get("MASTER_ADDR", "")
        if not addr:
            raise LaunchError("init_distributed: MASTER_ADDR is not set "
                              "(RANK is, so torchrun's variables are read)")
        port = _int(env, "MASTER_PORT", 1)
        source = "env"
    elif env.get("SLURM_PROCID", "") != "":
        rank = _int(env, "SLURM_PROCID")
        world = _int(env, "SLURM_NTASKS", 1)
        local = _int(env, "SLURM_LOCALID")
        addr = env.get("MASTER_ADDR", "")
        if not addr:
            # Rank 0 runs on the first node of its step.
            nodes = env.get("SLURM_STEP_NODELIST") or \
                env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
            if not nodes:
                raise LaunchError("init_distributed: SLURM_JOB_NODELIST is "
                                  "not set (nor SLURM_STEP_NODELIST, nor "
                                  "MASTER_ADDR)")
            addr = first_host(nodes)
        if env.get("MASTER_PORT", "") != "":
            port = _int(env, "MASTER_PORT", 1)
        else:
            port = slurm_port(_int(env, "SLURM_JOB_ID", 1))
        source = "slurm"
    else:
        return {"rank": 0, "world": 1, "local_rank": 0, "master_addr": None,
                "master_port": None, "source": "single"}
    if rank >= world:
        raise LaunchError("init_distributed: rank %d is not below the world "
                          "size %d" % (rank, world))
    if not 0 < port < 65536:
        raise LaunchError("init_distributed: port %d is not a TCP port"
                          % port)
    return {"rank": rank, "world": world, "local_rank": local,
            "master_addr": addr, "master_port": port, "source": source}


def init_distributed(backend=None, timeout=None):
    """Initialise torch.distributed's default process group from the
    environment (see layout_from_env) and return (rank, world,
    local_rank).

    backend: default "nccl" when CUDA is available, else "gloo"; with CUDA
    the current device becomes local_rank (modulo the devices visible, so
    that a task given one GPU uses its only one). timeout: seconds or a
    timedelta, for the rendezvous and every collective (torch's default
    when None).

    A single process (no RANK, no SLURM_PROCID) gets a group of its own,
    of world 1, on an in-memory store (no port): the same script then
    runs alone or as one of many, dist.get_rank(), all_reduce and
    DistributedDataParallel included. A Slurm task also gets RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT in os.environ
    (where unset), for libraries that read torchrun's variables. When the
    default group exists already, nothing is initialised and its rank and
    world are returned."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        local = os.environ.get("LOCAL_RANK") or \
            os.environ.get("SLURM_LOCALID") or "0"
        return dist.get_rank(), dist.get_world_size(), int(local)
    lay = layout_from_env()
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        torch.cuda.set_device(lay["local_rank"] % torch.cuda.device_count())
    kw = {}
    if timeout is not None:
        kw["timeout"] = timeout if isinstance(
            timeout, datetime.timedelta) else \
            datetime.timedelta(seconds=float(timeout))
    rank, world = lay["rank"], lay["world"]
    if lay["source"] == "slurm":
        # What torchrun would have set, for libraries that read it.
        for k, v in (("RANK", rank), ("WORLD_SIZE", world),
                     ("LOCAL_RANK", lay["local_rank"]),
                     ("MASTER_ADDR", lay["master_addr"]),
                     ("MASTER_PORT", lay["master_port"])):
            os.environ.setdefault(k, str(v))
    if lay["source"] == "single":
        dist.init_process_group(backend, store=dist.HashStore(), rank=0,
                                world_size=1, **kw)
    else:
        host = lay["master_addr"]
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host    # an IPv6 address in a URL
        dist.init_process_group(
            backend, init_method="tcp://%s:%d" % (host, lay["master_port"]),
            rank=rank, world_size=world, **kw)
    return rank, world, lay["local_rank"]


# -- copus-torchrun: N processes on this machine ----------------------------
# SIGUSR1 is libcopus's rescale signal (COPUS_SIGNAL may name USR2); the
# others would end this process and leave its children behind.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
             signal.SIGUSR1, signal.SIGUSR2)
PR_SET_PDEATHSIG = 1


def _child_setup():
    """In each child before its exec: a process group of its own, so that
    a terminal's Ctrl-C reaches it once (forwarded by the launcher), and,
    on Linux, SIGTERM when the launcher dies, however it dies."""
    os.setpgid(0, 0)
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG,
                                                int(signal.SIGTERM))
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def requeue_code():
    """libcopus's exit code after a rescale's checkpoint."""
    try:
        return int(os.environ.get("COPUS_REQUEUE_EXIT") or 75)
    except ValueError:
        return 75


def _exit_code(status):
    """A child's status as a shell would give it: its code, or 128 + the
    signal that killed it."""
    return status if status >= 0 else 128 - status


def _parse(argv):
    p = argparse.ArgumentParser(
        prog=PROG, description="Start NPROC processes of a PyTorch script "
        "on this machine, as torchrun does: RANK, WORLD_SIZE, LOCAL_RANK, "
        "MASTER_ADDR and MASTER_PORT in their environment.")
    p.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node",
                   type=int, required=True, metavar="N",
                   help="processes to start")
    p.add_argument("--master-port", type=int, default=0, metavar="PORT",
                   help="the rendezvous port (default: a free one)")
    p.add_argument("--grace", type=float, default=10.0, metavar="SECONDS",
                   help="after SIGTERM, the seconds before SIGKILL "
                   "(default 10)")
    p.add_argument("-m", dest="module", action="store_true",
                   help="run SCRIPT as a module (python3 -m SCRIPT)")
    p.add_argument("script", metavar="SCRIPT")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    a = p.parse_args(argv)
    if a.nproc < 1:
        p.error("--nproc %d: at least one process" % a.nproc)
    if a.grace < 0:
        p.error("--grace %g: not negative" % a.grace)
    return a


def launch(argv=None):
    """copus-torchrun's main: start, forward, wait; the exit code."""
    a = _parse(sys.argv[1:] if argv is None else argv)
    port = a.master_port or free_port()
    cmd = [sys.executable] + (["-m"] if a.module else []) + \
        [a.script] + a.args
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(a.nproc), LOCAL_WORLD_SIZE=str(a.nproc))
    if a.nproc > 1 and "OMP_NUM_THREADS" not in env:
        # As torchrun: N processes of one thread pool per core each would
        # oversubscribe the machine.
        env["OMP_NUM_THREADS"] = "1"
    group = _Ranks(a.grace)
    old = {s: signal.signal(s, group.forward) for s in FORWARDED}
    try:
        for r in range(a.nproc):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
            try:
                group.start(cmd, e)
            except OSError as err:
                print("%s: cannot start %s: %s" % (PROG, cmd[1], err),
                      file=sys.stderr)
                group.stop()
                return 127
        return group.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _Woken(Exception):
    """Raised by the signal handler to end a blocking wait."""


class _Ranks:
    """The children, in rank order, and how they end."""

    def __init__(self, grace):
        self.grace = grace
        self.procs = []
        # Set by SIGINT, SIGTERM, SIGHUP or SIGQUIT: when the children
        # that were forwarded it are killed if they are still there.
        self.deadline = None
        self.blocking = False

    def start(self, cmd, env):
        self.procs.append(subprocess.Popen(cmd, env=env,
                                           preexec_fn=_child_setup))

    def live(self):
        return [p for p in self.procs if p.returncode is None]

    def forward(self, signum, frame):
        # The children are in process groups of their own: they get the
        # signal from here alone. os.kill, not Popen.send_signal, which
        # may reap a child here and hide which one ended first.
        for p in self.live():
            try:
                os.kill(p.pid, signum)
            except OSError:
                pass
        if signum not in (signal.SIGUSR1, signal.SIGUSR2) and \
                self.deadline is None:
            # A rescale signal's checkpoint takes what it takes; a stop
            # is made good after the grace period.
            self.deadline = time.monotonic() + self.grace
            if self.blocking:
                raise _Woken()

    def _next_exit(self):
        """The pid of a child that has ended, not reaped, or None when
        the stop's deadline came first."""
        while True:
            if self.deadline is None:
                self.blocking = True
                try:
                    info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
                except _Woken:
                    continue
                finally:
                    self.blocking = False
            else:
                if time.monotonic() >= self.deadline:
                    return None
                info = os.waitid(os.P_ALL, 0,
                                 os.WEXITED | os.WNOWAIT | os.WNOHANG)
                if info is None:
                    time.sleep(0.05)
                    continue
            return info.si_pid

    def wait(self):
        """Wait for every child; when one exits non-zero, stop the
        others. The first non-zero code (128 + N for a child killed by
        signal N), or 0."""
        first = 0
        while self.live():
            try:
                pid = self._next_exit()
            except ChildProcessError:
                break
            if pid is None:
                print("%s: ranks still running %g s after the signal: "
                      "killing them" % (PROG, self.grace), file=sys.stderr,
                      flush=True)
                self.kill()
                continue
            p = next((q for q in self.procs if q.pid == pid), None)
            if p is None:
                os.waitpid(pid, 0)
                continue
            code = _exit_code(p.wait())
            if code != 0 and first == 0:
                first = code
                if code == requeue_code():
                    # A rescale: every rank committed the checkpoint and
                    # leaves by itself (rank 0 after telling the
                    # scheduler).
                    self.settle()
                if self.live():
                    print("%s: rank %d exited with %d; stopping the others"
                          % (PROG, self.procs.index(p), code),
                          file=sys.stderr, flush=True)
                    self.stop()
        for p in self.procs:
            p.wait()
            if first == 0 and p.returncode != 0:
                first = _exit_code(p.returncode)
        return first

    def settle(self):
        """Wait up to the grace period for the children to end."""
        deadline = time.monotonic() + self.grace
        for p in self.live():
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass

    def stop(self):
        """SIGTERM to the children still running, SIGKILL after the grace
        period; waits for them all."""
        live = self.live()
        for p in live:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + self.grace
        for p in live:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self):
        for p in self.live():
            p.kill()
            p.wait()


if __name__ == "__main__":
    sys.exit(launch())
