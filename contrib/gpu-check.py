"""The Python half of contrib/gpu-check.sh: what it asks of PyTorch.

    gpu-check.py info
        key=value lines: torch's version, its CUDA and NCCL, the GPUs it
        sees, and the directory of PyTorch's NCCL package (include/ and
        lib/libnccl.so.2) for a build where the system has no NCCL.
    gpu-check.py allreduce
        a one-rank NCCL process group of torch.distributed, an all-reduce
        over it and its result.
    gpu-check.py timing ADAPTER_DIR [--steps N] [--tolerance PCT]
        a transformer's training steps on the GPU through copus_torch's
        Trainer, under bfloat16 autocast: the step time libcopus measured
        and fitted against CUDA events around the same steps.

allreduce and timing print one line, "ok   ..." or "FAIL ...", and exit 0
or 1; what goes wrong on the way goes to stderr. libcopus is the one that
$COPUS_LIB names, as for copus_torch itself.
"""

import argparse
import ctypes
import os
import sys
import tempfile
import time


def nccl_dir():
    """The directory of PyTorch's NCCL package (nvidia-nccl-cu*), or of
    torch's own lib/ when it carries libnccl.so.2, else None."""
    try:
        import nvidia.nccl as pkg
        d = os.path.dirname(pkg.__file__) if pkg.__file__ else \
            list(pkg.__path__)[0]
        if os.path.exists(os.path.join(d, "lib", "libnccl.so.2")):
            return d
    except ImportError:
        pass
    try:
        import torch
        lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        if os.path.exists(os.path.join(lib, "libnccl.so.2")):
            return os.path.dirname(lib)
    except ImportError:
        pass
    return None


def info():
    out = {"nccl_dir": nccl_dir() or ""}
    try:
        import torch
    except ImportError as e:
        out["torch"] = ""
        out["torch_error"] = str(e)
    else:
        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda or ""
        out["cuda_available"] = int(torch.cuda.is_available())
        out["devices"] = torch.cuda.device_count() if out["cuda_available"] \
            else 0
        out["device"] = torch.cuda.get_device_name(0) if out["devices"] \
            else ""
        try:
            v = torch.cuda.nccl.version()
            out["torch_nccl"] = ".".join(map(str, v)) \
                if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001  (a build without NCCL)
            out["torch_nccl"] = ""
    for k, v in out.items():
        print("%s=%s" % (k, v))
    return 0


def allreduce():
    import torch
    import torch.distributed as dist
    n = 1 << 20
    with tempfile.TemporaryDirectory() as d:
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", init_method="file://%s/pg" % d,
                                rank=0, world_size=1)
        try:
            x = torch.arange(n, dtype=torch.float32, device="cuda")
            dist.all_reduce(x)
            # One rank: the sum is the input.
            wrong = int((x != torch.arange(n, dtype=torch.float32,
                                           device="cuda")).sum())
            torch.cuda.synchronize()
        finally:
            dist.destroy_process_group()
    if wrong:
        print("FAIL torch.distributed NCCL all-reduce: %d of %d values "
              "wrong on one rank" % (wrong, n))
        return 1
    print("ok   torch.distributed NCCL all-reduce: one rank, %d floats, "
          "the sum is the input" % n)
    return 0


def timing(adapter, steps, tolerance):
    import torch
    import torch.nn.functional as F
    from torch import nn
    sys.path.insert(0, adapter)
    import copus_torch
    from copus_lib import PerfParams, library

    # A GPT-like model (8 pre-norm blocks of width 1024, 16 heads) on
    # 16 sequences of 512 tokens: tens of milliseconds a step on a recent
    # GPU, so that Python's own time per step is small beside it.
    dim, heads, layers, seq, vocab, batch = 1024, 16, 8, 512, 8192, 16

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            layer = nn.TransformerEncoderLayer(
                dim, heads, 4 * dim, dropout=0.0, activation="gelu",
                batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, layers,
                                                enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)
            self.register_buffer("mask", nn.Transformer.
                                 generate_square_subsequent_mask(seq))

        def forward(self, x):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                h = self.blocks(self.embed(x), mask=self.mask)
                return self.head(self.norm(h)).float()

    class Tokens:
        """Sequences that count up from a random start, on the GPU, in
        order: the Trainer's data (next_batch, state_dict)."""

        def __init__(self, n):
            g = torch.Generator().manual_seed(0)
            start = torch.randint(0, vocab, (n, 1), generator=g)
            step = torch.randint(1, 5, (n, 1), generator=g)
            self.tokens = ((start + step * torch.arange(seq + 1)) %
                           vocab).cuda()
            self.pos = 0

        def next_batch(self, n):
            i = (self.pos + torch.arange(n, device="cuda")) % \
                self.tokens.shape[0]
            self.pos += n
            b = self.tokens[i]
            return b[:, :-1], b[:, 1:]

        def state_dict(self):
            return {"pos": self.pos}

        def load_state_dict(self, s):
            self.pos = s["pos"]

    def loss_fn(logits, y):
        return F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))

    torch.manual_seed(0)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = Tokens(4096)
    # Warm-up outside the trainer: kernels chosen, memory cached.
    for _ in range(5):
        x, y = data.next_batch(batch)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    torch.cuda.synchronize()

    tr = copus_torch.Trainer(model, opt, loss_fn, data, init_batch=batch,
                             max_batch=batch, min_local=batch,
                             max_local=batch, accumulation=False,
                             optimizer_kind=copus_torch.OPT_ADAM)
    # libcopus leaves its first steps out of its measurements
    # (WARMUP_STEPS in runtime/runtime.c): two here, which the events
    # leave out too.
    for _ in range(2):
        tr.train_step()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    t0 = time.perf_counter()
    for i in range(steps):
        events[i].record()
        loss = tr.train_step()
    events[steps].record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps
    # The last step's end, which the next step's start would make.
    tr.end_step()
    gpu = events[0].elapsed_time(events[steps]) / 1000.0 / steps

    # The step time libcopus reports (to the planner, in its hints): the
    # throughput parameters fitted to its measurements, evaluated at the
    # plan's micro-batch on one GPU.
    class StepTimes(ctypes.Structure):
        _fields_ = [(n, ctypes.c_double)
                    for n in ("grad", "sync", "opt", "iter")]

    lib = library()
    lib.copus_perf_get.argtypes = [ctypes.c_void_p,
                                   ctypes.POINTER(PerfParams)]
    lib.copus_step_time.argtypes = [ctypes.POINTER(PerfParams), ctypes.c_int,
                                    ctypes.c_int, ctypes.c_double,
                                    ctypes.c_int, ctypes.POINTER(StepTimes)]
    perf, t = PerfParams(), StepTimes()
    plan = tr.plan
    measured = tr.rt.info().step - 2
    noise = "measured" if tr.rt.grad_stats() is not None else "not measured"
    rc = lib.copus_perf_get(tr.rt.ctx, ctypes.byref(perf))
    if rc == 0:
        rc = lib.copus_step_time(ctypes.byref(perf), 1, 1, float(plan.local),
                                 plan.accum_steps, ctypes.byref(t))
    tr.close()
    if rc != 0:
        print("FAIL adapter step time: libcopus has no step time after %d "
              "measured steps (copus_perf_get or copus_step_time: %d); "
              "CUDA events %.2f ms/step" % (measured, rc, gpu * 1e3))
        return 1
    ratio = t.iter / gpu
    figures = ("libcopus %.2f ms/step (fitted to %d steps), CUDA events "
               "%.2f ms/step, ratio %.3f; host clock %.2f ms/step; %d x %d "
               "tokens, bf16 autocast, loss %.3f, gradient noise %s"
               % (t.iter * 1e3, measured, gpu * 1e3, ratio, wall * 1e3,
                  plan.local, seq, loss, noise))
    if abs(ratio - 1.0) > tolerance / 100.0:
        print("FAIL adapter step time: %s: more than %g%% apart"
              % (figures, tolerance))
        return 1
    print("ok   adapter step time: %s" % figures)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info")
    sub.add_parser("allreduce")
    t = sub.add_parser("timing")
    t.add_argument("adapter", help="the directory of copus_torch.py")
    t.add_argument("--steps", type=int, default=50)
    t.add_argument("--tolerance", type=float, default=10.0,
                   help="largest difference, percent")
    a = p.parse_args()
    if a.cmd == "info":
        return info()
    if a.cmd == "allreduce":
        return allreduce()
    return timing(a.adapter, a.steps, a.tolerance)


if __name__ == "__main__":
    sys.exit(main())
