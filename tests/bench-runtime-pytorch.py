"""Cost of the adapter's gradient statistics relative to a training step of
a CPU test model (an MLP), one process, no DDP. Usage:

  COPUS_LIB=build/runtime/.libs/libcopus.so /usr/bin/python3 \
      tests/bench-runtime-pytorch.py [steps] [width]
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "contrib", "pytorch"))
import torch  # noqa: E402
import copus_torch  # noqa: E402


class Data:
    def __init__(self, width):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(4096, width, generator=g)
        self.y = torch.randn(4096, 1, generator=g)
        self.pos = 0

    def next_batch(self, n):
        idx = torch.arange(self.pos, self.pos + n) % 4096
        self.pos += n
        return self.x[idx], self.y[idx]

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, s):
        self.pos = s["pos"]


def make_step(width, grad_stats, copus, every=1):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = Data(width)
    loss_fn = torch.nn.MSELoss()
    if not copus:
        # The same work without the adapter: 2 micro-batches of 64.
        def step():
            opt.zero_grad()
            for _ in range(2):
                x, y = data.next_batch(64)
                (loss_fn(model(x), y) / 2).backward()
            opt.step()
        return step
    tr = copus_torch.Trainer(model, opt, loss_fn, data, init_batch=128,
                             max_batch=128, min_local=64, max_local=64,
                             grad_stats=grad_stats, stats_every=every)
    return tr.train_step


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    torch.set_num_threads(1)
    params = 2 * width * width + 3 * width + 1
    print("MLP width %d (%d parameters), batch 128 = 2 x 64, %d steps, "
          "1 thread" % (width, params, steps))
    # The three variants take turns in blocks of 10 steps, so that a change
    # of the machine's load hits all of them alike; medians of the blocks.
    steps_fns = [make_step(width, False, False),
                 make_step(width, False, True),
                 make_step(width, True, True),
                 make_step(width, True, True, 8)]
    times = [[], [], [], []]
    for fn in steps_fns:
        for _ in range(10):
            fn()
    for _ in range(max(1, steps // 10)):
        for k, fn in enumerate(steps_fns):
            t0 = time.perf_counter()
            for _ in range(10):
                fn()
            times[k].append((time.perf_counter() - t0) / 10)
    plain, no_stats, stats, stats8 = (median(t) for t in times)
    print("plain PyTorch step          %8.3f ms" % (1e3 * plain))
    print("adapter, no grad statistics %8.3f ms (%+.2f%%)"
          % (1e3 * no_stats, 100 * (no_stats / plain - 1)))
    print("adapter, grad statistics    %8.3f ms (%+.2f%%)"
          % (1e3 * stats, 100 * (stats / plain - 1)))
    print("  ... every 8th step        %8.3f ms (%+.2f%%)"
          % (1e3 * stats8, 100 * (stats8 / plain - 1)))


if __name__ == "__main__":
    main()
