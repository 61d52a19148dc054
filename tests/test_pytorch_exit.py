"""A finished two-process job exits 0: the adapter's end of training leaves
no collective, future or gloo work behind for torch.distributed's teardown
or the interpreter's exit to trip on (issue 26: "terminate called without
an active exception", SIGABRT after dist.destroy_process_group()).

Each run starts two gloo processes that train a small DDP model with the
Trainer's defaults (the agreement folded into the gradient all-reduce,
accumulation, statistics every step) for a few steps and end in one of
these ways, taken in turn:

  close        trainer.close(), then dist.destroy_process_group() (torchrun's
               habit)
  destroy      trainer.close(destroy_process_group=True)
  context      the trainer as a context manager, then destroy_process_group()
  forget       no close(): destroy_process_group() and the interpreter's exit
  rescale      a requested rescale: the requeue exit (75) after step 3

Every process must exit with its code (0, or 75 for rescale) and write no
"terminate called" to stderr. The abort needs a gloo thread to be waiting
for the GIL when the interpreter exits, which few runs hit on an idle
machine (14 of 44 in the user's trial; a few in a hundred here, with the
main thread holding the GIL at the end as below): so each process also
counts the Python callbacks of its collectives that a gloo thread
releases, and exits 4 if there are any, which is the abort's cause
whether or not this run hit it.

  test_pytorch_exit.py run [--runs N] [--ends close,destroy,...]
"""

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "pytorch"))

ENDS = ("close", "destroy", "context", "forget", "rescale")
STEPS = 6
RESCALE_CODE = 75


class Data:
    def __init__(self, torch, rank):
        g = torch.Generator().manual_seed(7 + rank)
        self.x = torch.randn(256, 32, generator=g)
        self.y = torch.randn(256, 1, generator=g)
        self.pos = 0
        self.torch = torch

    def next_batch(self, n):
        idx = self.torch.arange(self.pos, self.pos + n) % 256
        self.pos += n
        return self.x[idx], self.y[idx]

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, s):
        self.pos = s["pos"]


def busy(seconds):
    """Python work that holds the GIL (the main thread's last words)."""
    t = time.time()
    while time.time() - t < seconds:
        pass


def watch_callbacks(dist):
    """Count the Python callbacks given to a collective's future (then())
    that a thread other than the main one releases: a process group's
    thread, which must take the GIL to do so, and which CPython ends if
    that is during the interpreter's exit (the abort of issue 26, which
    only some runs hit). Returns the list that counts them."""
    main = threading.get_ident()
    off_main = []
    real = dist.all_reduce

    def released():
        if threading.get_ident() != main:
            off_main.append(1)

    class Future:
        def __init__(self, fut):
            self._fut = fut

        def __getattr__(self, name):
            return getattr(self._fut, name)

        def then(self, callback):
            def run(f):
                return callback(f)
            weakref.finalize(run, released)
            return self._fut.then(run)

    class Work:
        def __init__(self, work):
            self._work = work

        def __getattr__(self, name):
            return getattr(self._work, name)

        def get_future(self):
            return Future(self._work.get_future())

    def all_reduce(*args, **kwargs):
        work = real(*args, **kwargs)
        return None if work is None else Work(work)
    dist.all_reduce = all_reduce
    return off_main


def worker(rank, init, end, ckpt):
    import torch
    import torch.distributed as dist
    import copus_torch

    torch.set_num_threads(1)
    # One CPU per process, as a Slurm job step of one CPU per task has:
    # a thread that wakes another may be preempted by it.
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    # The main thread keeps the GIL for up to a second before handing it
    # to a waiting thread, so that the interpreter's exit below begins
    # while a gloo thread may still be waiting for it: a user's code
    # after training, busy in Python, does the same.
    sys.setswitchinterval(1.0)
    dist.init_process_group("gloo", init_method=init, rank=rank,
                            world_size=2)
    off_main = watch_callbacks(dist)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    # Small buckets: several all-reduces per backward, the agreement on
    # the last.
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    # 16 per replica in micro-batches of 8: accumulation.
    tr = copus_torch.Trainer(ddp, opt, loss_fn, Data(torch, rank),
                             init_batch=32, max_batch=32, min_local=8,
                             max_local=8, ckpt_dir=ckpt)
    if end == "context":
        with tr:
            for _ in range(STEPS):
                tr.train_step()
        dist.destroy_process_group()
        busy(0.05)
        return finish(off_main)
    for i in range(STEPS):
        if end == "rescale" and i == 2 and rank == 1:
            tr.rt.request_rescale()
        tr.train_step()
    if end == "close":
        tr.close()
        dist.destroy_process_group()
    elif end == "destroy":
        tr.close(destroy_process_group=True)
    elif end == "forget":
        dist.destroy_process_group()
    elif end == "rescale":
        # The rescale's exit comes at the next step's start or at close().
        tr.close()
        print("rescale: rank %d returned from close()" % rank,
              file=sys.stderr)
        sys.exit(3)
    busy(0.05)
    return finish(off_main)


def finish(off_main):
    if off_main:
        print("%d Python callbacks of collectives released on a process "
              "group's thread" % len(off_main), file=sys.stderr)
        return 4
    return 0


def launch(end, tmp):
    """One two-process job: its exit codes and stderr."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    init = "tcp://127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    ckpt = tempfile.mkdtemp(dir=tmp)
    env = dict(os.environ, OMP_NUM_THREADS="1", COPUS_HINTS="0")
    for k in ("SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    procs = [subprocess.Popen([sys.executable, __file__, "worker", str(r),
                               init, end, ckpt], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
             for r in range(2)]
    out = []
    deadline = time.time() + 60
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        out.append((p.returncode, err.decode(errors="replace")))
    subprocess.call(["rm", "-rf", ckpt])
    return out


def run(args):
    runs, ends = 10, list(ENDS)
    i = 0
    while i < len(args):
        if args[i] == "--runs":
            runs = int(args[i + 1])
            i += 2
        elif args[i] == "--ends":
            ends = args[i + 1].split(",")
            if any(e not in ENDS for e in ends):
                sys.exit("--ends: one of %s" % ", ".join(ENDS))
            i += 2
        else:
            sys.exit("usage: test_pytorch_exit.py run [--runs N] "
                     "[--ends %s]" % ",".join(ENDS))
    tmp = tempfile.mkdtemp(prefix="copus-exit-")
    bad = {e: 0 for e in ends}
    done = {e: 0 for e in ends}
    shown = 0
    t0 = time.time()
    for n in range(runs):
        end = ends[n % len(ends)]
        want = RESCALE_CODE if end == "rescale" else 0
        res = launch(end, tmp)
        done[end] += 1
        wrong = [(r, code) for r, (code, err) in enumerate(res)
                 if code != want or "terminate called" in err]
        if wrong:
            bad[end] += 1
            if shown < 3:
                shown += 1
                for r, code in wrong:
                    print("run %d (%s): rank %d exits %s, not %d; its "
                          "stderr ends:\n%s" % (n, end, r, code, want,
                                                res[r][1][-800:]))
    subprocess.call(["rm", "-rf", tmp])
    for e in ends:
        print("%-8s %d of %d runs failed (a rank exits otherwise than %d, "
              "or prints \"terminate called\")"
              % (e, bad[e], done[e], RESCALE_CODE if e == "rescale" else 0))
    total = sum(bad.values())
    print("%d failed runs of %d (%.0f s)" % (total, runs, time.time() - t0))
    return 1 if total else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "worker":
        sys.exit(worker(int(sys.argv[2]), sys.argv[3], sys.argv[4],
                        sys.argv[5]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2:]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
