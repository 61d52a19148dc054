"""Per-step cost of the PyTorch adapter on two gloo processes (DDP) with a
step of about 10 ms (a small MLP's forward and backward, and a 10 ms sleep
that stands for the accelerator's work, during which the CPU is free): plain DDP, the adapter with the step's agreement
folded into the gradient all-reduce, and the adapter with an all-reduce of
its own for the agreement (fold_agreement=False). Gradient statistics off,
so that the figure is the agreement's and the step's bookkeeping. Usage:

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
        if kind == "plain":
            def step():
                opt.zero_grad()
                x, y = data.next_batch(32)
                loss_fn(ddp(x), y).backward()
                time.sleep(step_ms / 1e3)
                opt.step()
            return step, None
        tr = copus_torch.Trainer(ddp, opt, loss_fn, data, init_batch=64,
                                 max_batch=64, min_local=32, max_local=32,
                                 grad_stats=False,
                                 fold_agreement=(kind == "folded"))

        def step():
            for x, y in tr.micro_batches():
                loss_fn(ddp(x), y).backward()
            time.sleep(step_ms / 1e3)
            tr.optimizer_step()
        return step, tr

    kinds = ["plain", "folded", "own all-reduce"]
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
            tr.rt.finalize()
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
    print("two gloo processes, DDP MLP %d wide, batch 32 per process, "
          "%.0f ms sleep per step, %d steps" % (WIDTH, step_ms,
                                                         steps))
    base = median(res["times"][0])
    for kind, t, calls in zip(res["kinds"], res["times"], res["calls"]):
        m = median(t)
        print("%-16s %8.3f ms  (%+.2f%% of plain DDP; agree callback "
              "calls %d)" % (kind, 1e3 * m, 100 * (m / base - 1), calls))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "worker":
        worker(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
               float(sys.argv[5]), sys.argv[6])
    else:
        main()
