"""The PyTorch adapter with a user's own model, as an ML engineer trains it:
a small transformer language model with AdamW, OneCycleLR, clipping and
bf16 autocast on 2 gloo processes, interrupted by a rescale and resumed.

- The learning-rate schedule resumes exactly: the scheduler, registered
  with the trainer (built before it or after it), is saved with the
  checkpoint at the step's end, after its own step; the resumed run's
  learning rates equal the uninterrupted run's at every step, and on the
  same layout its parameters are bitwise the same.
- A resumed run that does not register the scheduler again stops with a
  message naming it; a model whose settings differ (the head count, same
  tensor shapes) is refused with the setting named.
- A NaN loss on one rank stops every rank with a non-zero code naming the
  step (nonfinite="raise"), or skips that step on every rank ("skip").
- Trainer.clip_grad_norm_ over tensor-parallel slices equals
  torch.nn.utils.clip_grad_norm_ on the whole model.

Run by tests/test-pytorch.sh: test_pytorch_resume.py run
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "pytorch"))

VOCAB, SEQ, DIM = 64, 16, 32
STEPS = 14
GLOBAL_BATCH = 16


def build_model(torch, heads):
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.ln1 = torch.nn.LayerNorm(DIM)
            self.qkv = torch.nn.Linear(DIM, 3 * DIM)
            self.proj = torch.nn.Linear(DIM, DIM)
            self.ln2 = torch.nn.LayerNorm(DIM)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM),
                                           torch.nn.GELU(),
                                           torch.nn.Linear(4 * DIM, DIM))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            shape = (b, t, self.heads, d // self.heads)
            q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
            w = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            a = F.softmax(w.masked_fill(mask, float("-inf")), -1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(VOCAB, DIM)
            self.pos = torch.nn.Parameter(torch.zeros(SEQ, DIM))
            self.blocks = torch.nn.Sequential(Block(), Block())
            self.ln = torch.nn.LayerNorm(DIM)
            self.head = torch.nn.Linear(DIM, VOCAB)
            self.poison = False

        def forward(self, x):
            # The model's own autocast: bf16 matrix products on CPU.
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = self.blocks(self.emb(x) + self.pos[:x.shape[1]])
                out = self.head(self.ln(h)).float()
            if self.poison:
                out = out * float("nan")
            return out

    return LM()


def worker(args):
    import torch
    import torch.distributed as dist
    import copus_torch

    rank, world = args["rank"], args["world"]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", init_method=args["init"],
                                rank=rank, world_size=world)
    model = build_model(torch, args.get("heads", 4))
    module = model
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, VOCAB, (256, SEQ + 1), generator=g)
    data = copus_torch.GlobalSampler(
        [(tokens[i, :-1], tokens[i, 1:]) for i in range(len(tokens))],
        seed=5)
    opt = torch.optim.AdamW(module.parameters(), lr=3e-3, weight_decay=0.01)

    def make_sched():
        return torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=3e-3, total_steps=STEPS, pct_start=0.3)

    def loss_fn(out, y):
        return torch.nn.functional.cross_entropy(out.reshape(-1, VOCAB),
                                                 y.reshape(-1))

    out = args["out"] + ".%d" % rank
    log = {"lrs": {}, "norms": {}}

    def flush():
        with open(out + ".tmp", "w") as f:
            json.dump(log, f)
        os.replace(out + ".tmp", out)

    def on_rescale(step):
        log["exit_step"] = step
        flush()

    sched = make_sched() if args.get("sched") == "before" else None
    tr = copus_torch.Trainer(
        model, opt, loss_fn, data, init_batch=GLOBAL_BATCH,
        max_batch=GLOBAL_BATCH, min_local=4, max_local=8,
        optimizer_kind=copus_torch.OPT_ADAM, ckpt_dir=args["ckpt"],
        on_rescale=on_rescale, nonfinite=args.get("nonfinite"))
    if args.get("sched") == "after":
        sched = make_sched()
    if sched is not None and args.get("register", True):
        tr.register(sched)
    log["start"] = tr.step
    flush()
    try:
        while tr.step < STEPS:
            if tr.step == args.get("signal_at", -1) and rank == 0:
                os.kill(os.getpid(), signal.SIGUSR1)
            module.poison = tr.step + 1 == args.get("nan_at") and \
                rank == world - 1
            log["lrs"][tr.step + 1] = opt.param_groups[0]["lr"]
            for x, y in tr.micro_batches():
                loss = loss_fn(model(x), y) / tr.n_micro
                loss.backward()
            log["norms"][tr.step + 1] = tr.clip_grad_norm_(1.0)
            tr.optimizer_step()
            if sched is not None:
                sched.step()
    except copus_torch.CopusError as e:
        log["error"] = str(e)
        flush()
        raise
    tr.close()
    log["end"] = tr.step
    log["skipped"] = tr.skipped_steps
    log["params"] = [p.detach().double().reshape(-1).tolist()
                     for p in module.parameters()]
    log["adam_steps"] = sorted({float(s["step"]) for s in
                                opt.state.values()})
    flush()
    if world > 1:
        dist.destroy_process_group()


def tensor_clip(args):
    """A model of copus_tensor's layers on 2 ranks (tensor 2), and the
    same model whole on this rank: Trainer.clip_grad_norm_ of the slices
    against torch's clipping of the whole, the clipped gradients too."""
    import torch
    import torch.distributed as dist
    import copus_tensor
    import copus_torch

    rank = args["rank"]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=args["init"], rank=rank,
                            world_size=2)
    tp = copus_tensor.TensorParallel(tensor=2)

    def layers(par):
        torch.manual_seed(0)
        if par:
            return torch.nn.Sequential(
                copus_tensor.ColumnParallelLinear(8, 16, tp=tp),
                torch.nn.GELU(),
                copus_tensor.RowParallelLinear(16, 8, tp=tp),
                torch.nn.Linear(8, 1))
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                   torch.nn.Linear(16, 8),
                                   torch.nn.Linear(8, 1))
    sliced, whole = layers(True), layers(False)
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(16, 1, generator=torch.Generator().manual_seed(2))
    data = copus_torch.GlobalSampler([(x[i], y[i]) for i in range(16)],
                                     0, 1, shuffle=False)
    opt = torch.optim.SGD(sliced.parameters(), lr=0.1)
    tr = copus_torch.Trainer(sliced, opt, torch.nn.MSELoss(), data,
                             init_batch=16, max_batch=16, min_local=16,
                             max_local=16, tensor_degree=2)
    for xb, yb in tr.micro_batches():
        torch.nn.MSELoss()(sliced(xb), yb).backward()
    norm = tr.clip_grad_norm_(0.1)
    torch.nn.MSELoss()(whole(x), y).backward()
    ref = float(torch.nn.utils.clip_grad_norm_(whole.parameters(), 0.1))
    # The clipped slice of the first layer against the whole's rows.
    w = sliced[0].weight.grad
    rows = whole[0].weight.grad[rank * 8:(rank + 1) * 8]
    with open(args["out"] + ".%d" % rank, "w") as f:
        json.dump({"norm": norm, "ref": ref,
                   "grad_diff": float((w - rows).abs().max())}, f)
    tr.close()
    dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(world, tmp, name, mode="worker", restart=0, **kw):
    """Start world processes; their exit codes, logs and stderr."""
    init = "tcp://127.0.0.1:%d" % free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and
           k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(SLURM_RESTART_COUNT=str(restart), OMP_NUM_THREADS="1")
    out = os.path.join(tmp, name)
    procs = []
    for r in range(world):
        a = dict(rank=r, world=world, init=init, out=out,
                 ckpt=os.path.join(tmp, "ckpt-" + name.split("-")[0]))
        a.update(kw)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, mode, json.dumps(a)], env=env,
            stderr=subprocess.PIPE, text=True))
    codes, errs = [], []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=240)[1])
        except subprocess.TimeoutExpired:
            p.kill()
            errs.append(p.communicate()[1] + "\n(killed: no exit in 240 s)")
        codes.append(p.returncode)
    logs = []
    for r in range(world):
        try:
            with open(out + ".%d" % r) as f:
                logs.append(json.load(f))
        except OSError:
            logs.append(None)
    return codes, logs, errs


failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def lr_seq(log, first):
    return [log["lrs"][str(s)] for s in range(first, STEPS + 1)]


def run():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: torch is not importable")
        return 77
    tmp = tempfile.mkdtemp(prefix="copus-resume-")

    # The uninterrupted run.
    codes, ref, errs = launch(2, tmp, "ref-0", sched="after")
    check(codes == [0, 0], "the uninterrupted run exits 0 on both ranks "
          "(%s)" % codes)
    if codes != [0, 0]:
        print(errs[0][-3000:])
    if None in ref or "params" not in ref[0]:
        print("%d check(s) failed" % (len(failures) or 1))
        return 1
    check(ref[0]["params"] == ref[1]["params"],
          "the uninterrupted run's replicas agree bitwise")

    # Interrupted at the end of step 5 and resumed on 2 processes, the
    # scheduler built after the trainer, then before it.
    for order in ("after", "before"):
        name = "rs" + order
        codes, a, _ = launch(2, tmp, name + "-a", sched=order, signal_at=5)
        check(codes == [75, 75], "scheduler built %s the trainer: a "
              "rescale checkpoints and exits 75 (%s)" % (order, codes))
        at = a[0].get("exit_step") if a[0] else None
        codes, b, errs = launch(2, tmp, name + "-b", sched=order, restart=1)
        check(codes == [0, 0], "scheduler built %s the trainer: the resumed "
              "run exits 0 (%s)" % (order, codes))
        if None in b or at is None or "params" not in b[0]:
            check(False, "scheduler %s: logs of both runs" % order)
            continue
        check(b[0]["start"] == at, "resumed at the checkpoint's step %d (%s)"
              % (at, b[0]["start"]))
        check("resuming from checkpoint" in errs[0] and
              "step %d" % at in errs[0],
              "the resumed run's log says it resumes, and at which step")
        got, want = lr_seq(b[0], at + 1), lr_seq(ref[0], at + 1)
        check(got == want, "scheduler built %s the trainer: the learning "
              "rates of steps %d..%d equal the uninterrupted run's (first "
              "%s vs %s)" % (order, at + 1, STEPS, got[:1], want[:1]))
        check(b[0]["params"] == ref[0]["params"] and
              b[0]["adam_steps"] == ref[0]["adam_steps"],
              "scheduler built %s the trainer: the final parameters and "
              "Adam's step count are bitwise the uninterrupted run's" % order)

    # Resumed on one process: the same rates; parameters close.
    codes, a, _ = launch(2, tmp, "one-a", sched="after", signal_at=5)
    at = a[0].get("exit_step") if a[0] else None
    codes, b, _ = launch(1, tmp, "one-b", sched="after", restart=1)
    check(codes == [0], "resumed on 1 process: exits 0 (%s)" % codes)
    if b[0] and at is not None and "params" in b[0]:
        check(lr_seq(b[0], at + 1) == lr_seq(ref[0], at + 1),
              "resumed on 1 process: the learning rates equal the "
              "uninterrupted run's")
        diff = max(abs(x - y) for p, q in zip(b[0]["params"],
                                              ref[0]["params"])
                   for x, y in zip(p, q))
        check(diff < 2e-2, "resumed on 1 process: parameters within 2e-2 "
              "of the uninterrupted run's (%.2g; bf16 autocast)" % diff)

    # A resumed run that forgets to register the scheduler stops, and
    # says what to register.
    codes, a, _ = launch(2, tmp, "forget-a", sched="after", signal_at=5)
    codes, b, errs = launch(2, tmp, "forget-b", sched="after", restart=1,
                            register=False)
    check(all(c not in (0, None) for c in codes) and b[0] and
          "OneCycleLR" in b[0].get("error", ""),
          "a resumed run without register(sched) stops, naming OneCycleLR "
          "(%s: %s)" % (codes, b[0] and b[0].get("error")))

    # Another head count, the same tensor shapes: refused, naming it.
    codes, b, errs = launch(2, tmp, "forget-c", sched="after", restart=1,
                            heads=8)
    check(all(c not in (0, None) for c in codes) and
          "heads: 4 in the checkpoint, 8 here" in errs[0],
          "a model of 8 heads is refused a checkpoint of 4, naming the "
          "setting (%s: %s)" % (codes, [ln for ln in errs[0].splitlines()
                                       if "heads" in ln][:1]))

    # A NaN loss on rank 1 at step 4.
    codes, logs, errs = launch(2, tmp, "nan-r", sched="after", nan_at=4)
    check(all(c not in (0, None) for c in codes),
          "a NaN loss on one rank stops both ranks with a non-zero code "
          "(%s)" % codes)
    check(all(lg and "step 4" in lg.get("error", "") for lg in logs),
          "both ranks say the gradients of step 4 are not finite (%s)"
          % [lg and lg.get("error") for lg in logs])
    codes, logs, errs = launch(2, tmp, "nan-s", sched="after", nan_at=4,
                               nonfinite="skip")
    check(codes == [0, 0], "nonfinite='skip': both ranks finish (%s)"
          % codes)
    if None not in logs and all("params" in lg for lg in logs):
        flat = [x for p in logs[0]["params"] for x in p]
        check(logs[0]["params"] == logs[1]["params"] and
              all(x == x for x in flat) and
              logs[0]["skipped"] == logs[1]["skipped"] == 1,
              "nonfinite='skip': one step skipped on both ranks, the "
              "parameters finite and equal (%s)"
              % [lg["skipped"] for lg in logs])

    # A fingerprint the user gives: a checkpoint of another is refused.
    import copus_torch
    fp_dir = os.path.join(tmp, "fp")
    rt = copus_torch.Runtime(8, 8, 8, 8, ckpt_dir=fp_dir,
                             save=lambda p, s: open(p, "w").close(),
                             load=lambda p, s: None, fingerprint="lm-h4")
    rt.step_begin()
    rt.step_end(8, 0)
    rt.checkpoint()
    rt.finalize()
    try:
        copus_torch.Runtime(8, 8, 8, 8, ckpt_dir=fp_dir,
                            save=lambda p, s: None, load=lambda p, s: None,
                            fingerprint="lm-h8").finalize()
        check(False, "a checkpoint of fingerprint lm-h4 is refused to lm-h8")
    except copus_torch.CopusError as e:
        check("'lm-h4'" in str(e) and "'lm-h8'" in str(e),
              "a checkpoint of fingerprint lm-h4 is refused to lm-h8, "
              "naming both (%s)" % e)

    # Clipping over tensor slices.
    codes, logs, _ = launch(2, tmp, "clip-t", mode="tensor_clip")
    check(codes == [0, 0], "tensor clipping run exits 0 (%s)" % codes)
    if None not in logs:
        lg = logs[0]
        check(abs(lg["norm"] / lg["ref"] - 1) < 1e-5 and
              all(abs(x["norm"] - lg["norm"]) < 1e-9 for x in logs),
              "clip_grad_norm_ over tensor slices: %.6f, torch's on the "
              "whole model %.6f" % (lg["norm"], lg["ref"]))
        check(all(x["grad_diff"] < 1e-6 for x in logs),
              "the clipped slices equal the whole model's clipped rows "
              "(%s)" % [x["grad_diff"] for x in logs])
    subprocess.call(["rm", "-rf", tmp])
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] in ("worker", "tensor_clip"):
        {"worker": worker, "tensor_clip": tensor_clip}[sys.argv[1]](
            json.loads(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "run":
        sys.exit(run())
    else:
        print("usage: test_pytorch_resume.py run", file=sys.stderr)
        sys.exit(2)
