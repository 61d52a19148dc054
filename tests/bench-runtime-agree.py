"""Per-step cost of the PyTorch adapter on two gloo processes (DDP) with a
step of about 10 ms (a small MLP's forward and backward on two micro-
batches, the first under no_sync, and a 10 ms sleep that stands for the
accelerator's work, during which the CPU is free), against plain DDP doing
the same in the same run:

  plain DDP            DDP alone, the same two micro-batches
  copus                the Trainer's defaults: gradient statistics every
                       step, the step's agreement folded into the
                       gradient all-reduce (the setting of issue 26)
  copus, own agree     the same, the agreement by the runtime's own
                       all-reduce at the step's end (fold_agreement=False)
  copus, no stats      statistics off, the agreement folded
  copus, no agree      statistics off, no agreement (fold_agreement=False,
                       agree_interval=10**6): the step's bookkeeping alone
  copus, stats only    statistics every step, no agreement: the defaults
                       less the agreement

The variants take turns in blocks of 10 steps, so that a change of the
machine's load hits all alike; each figure is the median of the blocks,
and the overhead is against plain DDP's. The agreement's own cost is
"copus" less "copus, stats only" with statistics (the setting of issue 26),
"copus, no stats" less "copus, no agree" without; the statistics' is
"copus" less "copus, no stats". Usage:

  COPUS_LIB=build/runtime/.libs/libcopus.so /usr/bin/python3 \\
      tests/bench-runtime-agree.py [steps] [step_ms]
"""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "pytorch"))

WIDTH = 64
LOCAL = 32      # samples per micro-batch
MICRO = 2       # micro-batches per step


class Data:
    def __init__(self, torch, rank):
        g = torch.Generator().manual_seed(1 + rank)
        self.x = torch.randn(1024, WIDTH, generator=g)
        self.y = torch.randn(1024, 1, generator=g)
        self.pos = 0
        self.torch = torch

    def next_batch(self, n):
        idx = self.torch.arange(self.pos, self.pos + n) % 1024
        self.pos += n
        return self.x[idx], self.y[idx]

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, s):
        self.pos = s["pos"]


def worker(rank, init, steps, step_ms, out):
    import torch
    import torch.distributed as dist
    import copus_torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank,
                            world_size=2)

    def make(kind):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH),
                                    torch.nn.ReLU(),
                                    torch.nn.Linear(WIDTH, 1))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
        data = Data(torch, rank)
        loss_fn = torch.nn.MSELoss()
        if kind == "plain DDP":
            def step():
                opt.zero_grad()
                for i in range(MICRO):
                    x, y = data.next_batch(LOCAL)
                    if i < MICRO - 1:
                        with ddp.no_sync():
                            (loss_fn(ddp(x), y) / MICRO).backward()
                    else:
                        (loss_fn(ddp(x), y) / MICRO).backward()
                time.sleep(step_ms / 1e3)
                opt.step()
            return step, None
        args = {"copus": {},
                "copus, own agree": {"fold_agreement": False},
                "copus, no stats": {"grad_stats": False},
                "copus, no agree": {"grad_stats": False,
                                    "fold_agreement": False,
                                    "agree_interval": 10 ** 6},
                "copus, stats only": {"fold_agreement": False,
                                      "agree_interval": 10 ** 6}}[kind]
        # A global batch of 2 replicas x MICRO micro-batches of LOCAL.
        tr = copus_torch.Trainer(ddp, opt, loss_fn, data,
                                 init_batch=2 * MICRO * LOCAL,
                                 max_batch=2 * MICRO * LOCAL,
                                 min_local=LOCAL, max_local=LOCAL, **args)
        if (tr.plan.local, tr.plan.accum_steps + 1) != (LOCAL, MICRO):
            sys.exit("the plan is %d x %d, not %d x %d" % (
                tr.plan.local, tr.plan.accum_steps + 1, LOCAL, MICRO))

        def step():
            for x, y in tr.micro_batches():
                (loss_fn(ddp(x), y) / tr.n_micro).backward()
            time.sleep(step_ms / 1e3)
            tr.optimizer_step()
        return step, tr

    kinds = ["plain DDP", "copus", "copus, own agree", "copus, no stats",
             "copus, no agree", "copus, stats only"]
    fns = [make(k) for k in kinds]
    for fn, _ in fns:
        for _ in range(20):
            fn()
    # The variants take turns in blocks of 10 steps, so that a change of
    # the machine's load hits all of them alike; medians of the blocks.
    times = [[] for _ in kinds]
    for _ in range(max(1, steps // 10)):
        for k, (fn, _) in enumerate(fns):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(10):
                fn()
            times[k].append((time.perf_counter() - t0) / 10)
    calls = [tr.rt.agree_calls if tr else 0 for _, tr in fns]
    for _, tr in fns:
        if tr:
            tr.close()
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"kinds": kinds, "times": times, "calls": calls}, f)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    step_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    init = "tcp://127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    out = "/tmp/copus-bench-agree-%d.json" % os.getpid()
    env = dict(os.environ, OMP_NUM_THREADS="1", COPUS_HINTS="0")
    for k in ("SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    procs = [subprocess.Popen([sys.executable, __file__, "worker", str(r),
                               init, str(steps), str(step_ms), out], env=env)
             for r in range(2)]
    if any(p.wait() != 0 for p in procs):
        sys.exit("a worker failed")
    with open(out) as f:
        res = json.load(f)
    os.unlink(out)
    print("two gloo processes, DDP MLP %d wide, %d micro-batches of %d per "
          "process, %.0f ms sleep per step, %d steps, median of %d blocks"
          % (WIDTH, MICRO, LOCAL, step_ms, steps, len(res["times"][0])))
    base = median(res["times"][0])
    for kind, t, calls in zip(res["kinds"], res["times"], res["calls"]):
        m = median(t)
        print("%-17s %8.3f ms  %+7.3f ms  (%+.2f%% of plain DDP; agree "
              "callback calls %d)" % (kind, 1e3 * m, 1e3 * (m - base),
                                      100 * (m / base - 1), calls))

if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "worker":
        worker(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
               float(sys.argv[5]), sys.argv[6])
    else:
        main()
