"""copus_torch.PipelineTrainer's safeguards on CPU with gloo, each against
a single process that trains the same model with plain PyTorch:

  a sampler laid out over the world (GlobalSampler's defaults) under
    pipeline 2 x data 2 stops every rank, naming the data degree and the
    fix; a function of (replica, replicas) builds it right;
  clipping (clip_grad_norm=) over pipeline 2 x data 2 and over pipeline 2
    x tensor 2 equals torch.nn.utils.clip_grad_norm_ on one process: the
    total norm and the parameters at every step;
  a bfloat16 activation between the stages arrives as bfloat16 (so do its
    gradients): the loss is finite and equals the single process's; a
    dtype that cannot travel is refused by name;
  a NaN in one stage of one replica stops every rank with the step named
    (nonfinite="raise"), or skips that step's optimizer step on every
    rank, the replicas equal (nonfinite="skip").

Run by tests/test-pytorch.sh: test_pytorch_pipeline_checks.py run
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "pytorch"))

GLOBAL_BATCH = 16
N_MICRO = 2
CLIP = 0.3
NAN_STEP = 3


def build(kind, tp=None):
    """The model of a test: the same layers on every rank and in the
    reference (tp None: plain layers)."""
    import torch
    import copus_tensor
    L = torch.nn.Linear

    class Poison(torch.nn.Tanh):
        """Tanh, but NaN at step NAN_STEP on the rank that args name."""
        at = None

        def forward(self, x):
            y = super().forward(x)
            return y * float("nan") if Poison.at else y

    class Cast(torch.nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.dtype = str(dtype)
            self._dtype = dtype

        def forward(self, x):
            return x.to(self._dtype)

    torch.manual_seed(0)
    if kind == "tensor":
        C, R = copus_tensor.ColumnParallelLinear, \
            copus_tensor.RowParallelLinear
        if tp is None:
            C = R = lambda i, o, **kw: L(i, o)  # noqa: E731
        return torch.nn.Sequential(
            C(8, 32, tp=tp), torch.nn.Tanh(), R(32, 8, tp=tp),
            torch.nn.Tanh(), R(8, 8, tp=tp, input_is_parallel=False),
            torch.nn.Tanh(), C(8, 4, tp=tp, gather_output=True)), Poison
    if kind == "bf16":
        # Stage 0 ends in bfloat16; stage 1 goes on in float32.
        return torch.nn.Sequential(
            L(8, 16), torch.nn.Tanh(), Cast(torch.bfloat16),
            Cast(torch.float32), L(16, 4), torch.nn.Identity()), Poison
    if kind == "complex":
        return torch.nn.Sequential(
            L(8, 16), torch.nn.Tanh(), Cast(torch.complex64),
            Cast(torch.float32), L(16, 4), torch.nn.Identity()), Poison
    return torch.nn.Sequential(
        L(8, 16), Poison(), L(16, 16), torch.nn.Tanh(), L(16, 4),
        torch.nn.Identity()), Poison


def dataset():
    import torch
    g = torch.Generator().manual_seed(5)
    xs = torch.randn(320, 8, generator=g)
    ys = torch.randn(320, 4, generator=g)
    return [(xs[i], ys[i]) for i in range(320)]


def worker(args):
    import torch
    import torch.distributed as dist
    import copus_torch
    import copus_tensor

    rank, world = args["rank"], args["world"]
    pipe, tensor = args.get("pipeline", 1), args.get("tensor", 1)
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", init_method=args["init"],
                                rank=rank, world_size=world)
    tp = copus_tensor.TensorParallel(tensor, pipe) \
        if args["model"] == "tensor" and world > 1 else None
    model, Poison = build(args["model"], tp)
    data = dataset()
    out = args["out"] + ".%d" % rank
    dumps = {"split": {}, "tensor_rank": 0, "data_rank": 0}

    def dump(step, named, loss, norm):
        dumps[str(step)] = {
            "loss": loss, "norm": norm,
            "params": {n: q.detach().double().reshape(-1).tolist()
                       for n, q in named},
            "shapes": {n: list(q.shape) for n, q in named}}
        with open(out + ".tmp", "w") as f:
            json.dump(dumps, f)
        os.replace(out + ".tmp", out)

    def poison(step):
        Poison.at = step == args.get("nan_step") and \
            rank == args.get("nan_rank")

    make_opt = lambda ps: torch.optim.SGD(ps, lr=0.1,  # noqa: E731
                                          momentum=0.9)
    if args.get("reference"):
        # Plain PyTorch on one process: the same micro-batches in order.
        sampler = copus_torch.GlobalSampler(data, 0, 1, seed=3)
        params = list(model.parameters())
        opt = make_opt(params)
        for step in range(1, args["steps"] + 1):
            opt.zero_grad()
            loss = 0.0
            for _ in range(N_MICRO):
                x, y = sampler.next_batch(GLOBAL_BATCH // N_MICRO)
                v = torch.nn.functional.mse_loss(model(x), y) / N_MICRO
                v.backward()
                loss += float(v)
            norm = None
            if args.get("clip"):
                norm = float(torch.nn.utils.clip_grad_norm_(
                    params, args["clip"]))
            opt.step()
            dump(step, list(model.named_parameters()), loss, norm)
        return

    def layout(replica, replicas):
        return copus_torch.GlobalSampler(data, replica, replicas, seed=3)
    at = copus_torch.coords_of_rank(world // (pipe * tensor), pipe, tensor,
                                    rank)
    sampler = {"default": lambda: copus_torch.GlobalSampler(data, seed=3),
               "function": lambda: layout,
               "explicit": lambda: layout(at.data_rank,
                                     world // (pipe * tensor))}[
        args.get("sampler", "explicit")]()
    kw = {"clip_grad_norm": args["clip"]} if args.get("clip") else {}
    tr = copus_torch.PipelineTrainer(
        model, make_opt, torch.nn.MSELoss(), sampler, GLOBAL_BATCH, N_MICRO,
        pipeline_degree=pipe, tensor_degree=tensor,
        nonfinite=args.get("nonfinite"), **kw)
    named = list(tr._named_params())
    dumps.update(tensor_rank=tr.plan.tensor_rank,
                 data_rank=tr.plan.data_rank,
                 split={n: getattr(q, copus_torch.SPLIT_ATTR)[0]
                        for n, q in named
                        if hasattr(q, copus_torch.SPLIT_ATTR)})
    while tr.step < args["steps"]:
        poison(tr.step + 1)
        loss = tr.train_step()
        tr.end_step()
        dumps["skipped"] = tr.skipped_steps
        dump(tr.step, named, loss, getattr(tr, "last_grad_norm", None))
    tr.close(destroy_process_group=world > 1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(world, tmp, name, **kw):
    """world processes of the worker; their exit codes (None: killed at
    the timeout), dumps and standard errors."""
    init = "tcp://127.0.0.1:%d" % free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", COPUS_HINTS="0")
    for k in list(env):
        if k.startswith("SLURM_") or \
                k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            del env[k]
    out = os.path.join(tmp, name)
    procs = []
    for r in range(world):
        a = dict(rank=r, world=world, init=init, out=out)
        a.update(kw)
        with open(out + ".err.%d" % r, "w") as err:
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "worker", json.dumps(a)],
                env=env, stderr=err))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=60))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)
    dumps, errs = [], []
    for r in range(world):
        try:
            with open(out + ".%d" % r) as f:
                dumps.append(json.load(f))
        except OSError:
            dumps.append(None)
        with open(out + ".err.%d" % r) as f:
            errs.append(f.read())
    return codes, dumps, errs


failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def whole(dumps, step):
    """The whole model at a step from data replica 0's ranks (split
    parameters' slices joined in tensor-rank order), the mean loss of the
    last stages and the total gradient norm as every rank has it."""
    import torch
    if None in dumps or any(str(step) not in d for d in dumps):
        return None
    first = sorted((d for d in dumps if d["data_rank"] == 0),
                   key=lambda d: d["tensor_rank"])
    at = [d[str(step)] for d in dumps]
    params = {}
    for n in {n for d in first for n in d[str(step)]["shapes"]}:
        holders = [d for d in first if n in d[str(step)]["shapes"]]
        parts = [torch.tensor(d[str(step)]["params"][n], dtype=torch.float64)
                 .view(d[str(step)]["shapes"][n]) for d in holders]
        dim = holders[0]["split"].get(n)
        params[n] = parts[0] if dim is None else torch.cat(parts, dim)
    losses = [a["loss"] for a in at if a["loss"] is not None]
    # Each replica's last stage has its replica's mean loss.
    return {"params": params,
            "loss": sum(losses) / len(losses) if losses else None,
            "norms": [a["norm"] for a in at]}


def max_diff(a, b):
    if set(a) != set(b) or not a:
        return float("inf")
    return max(float((a[n] - b[n]).abs().max()) if a[n].shape == b[n].shape
               else float("inf") for n in a)


def compare(dumps, ref, steps, what, tol=1e-5, norm=False):
    for step in range(1, steps + 1):
        got, want = whole(dumps, step), whole(ref, step)
        if got is None or want is None:
            check(False, "%s: a dump of step %d from every rank"
                  % (what, step))
            return
        dp = max_diff(got["params"], want["params"])
        dl = abs(got["loss"] - want["loss"]) \
            if got["loss"] is not None else float("inf")
        ok = dp < tol and dl < tol
        text = "parameters, loss"
        if norm:
            text += ", total gradient norm"
            n = want["norms"][0]
            dn = max(abs(g - n) if g is not None else float("inf")
                     for g in got["norms"])
            ok = ok and dn < tol * max(1.0, n)
        if not ok or step == steps:
            check(ok, "%s: %s at step %d equal the single process's (max "
                  "differences %.2g, %.2g%s)"
                  % (what, text, step, dp, dl,
                     ", %.2g of %.3g" % (dn, n) if norm else ""))
        if not ok:
            return


def sampler_checks(tmp):
    codes, _, errs = launch(4, tmp, "sampler", model="plain", pipeline=2,
                            sampler="default", steps=2)
    named = all("data degree 2" in e and
                "GlobalSampler(dataset, replica=" in e for e in errs)
    check(None not in codes and 0 not in codes and named,
          "pipeline 2 x data 2 with GlobalSampler's defaults: every rank "
          "stops, naming the data degree and the fix (%s; %s)"
          % (codes, errs[0].strip().splitlines()[-1:] if errs[0] else ""))


def clip_checks(tmp):
    codes, ref, _ = launch(1, tmp, "ref-clip", model="plain",
                           reference=True, clip=CLIP, steps=4)
    check(codes == [0] and ref[0] is not None and
          all(ref[0][str(s)]["norm"] > CLIP for s in (1, 2)),
          "reference: clip_grad_norm_ clips (norms %s)"
          % [ref[0][str(s)]["norm"] for s in range(1, 5)
             if ref[0] and str(s) in ref[0]])
    codes, got, errs = launch(4, tmp, "clip", model="plain", pipeline=2,
                              clip=CLIP, sampler="function", steps=4)
    check(codes == [0] * 4, "pipeline 2 x data 2 with clip_grad_norm and a "
          "sampler built from the plan: every rank exits 0 (%s%s)"
          % (codes, "" if codes == [0] * 4 else
             "; " + errs[0].strip()[-300:]))
    compare(got, ref, 4, "pipeline 2 x data 2, clip_grad_norm=%g" % CLIP,
            norm=True)
    codes, ref, _ = launch(1, tmp, "ref-tclip", model="tensor",
                           reference=True, clip=CLIP, steps=3)
    codes, got, errs = launch(4, tmp, "tclip", model="tensor", pipeline=2,
                              tensor=2, clip=CLIP, steps=3)
    check(codes == [0] * 4, "pipeline 2 x tensor 2 with clip_grad_norm: "
          "every rank exits 0 (%s%s)" % (codes, "" if codes == [0] * 4 else
                                         "; " + errs[0].strip()[-300:]))
    compare(got, ref, 3, "pipeline 2 x tensor 2, clip_grad_norm=%g" % CLIP,
            norm=True)


def dtype_checks(tmp):
    import torch
    import copus_pipeline
    codes, ref, _ = launch(1, tmp, "ref-bf16", model="bf16", reference=True,
                           steps=3)
    codes, got, errs = launch(2, tmp, "bf16", model="bf16", pipeline=2,
                              steps=3)
    check(codes == [0, 0], "pipeline 2 with a bfloat16 activation: both "
          "ranks exit 0 (%s%s)" % (codes, "" if codes == [0, 0] else
                                   "; " + errs[0].strip()[-300:]))
    w = whole(got, 3)
    finite = w is not None and w["loss"] is not None and \
        w["loss"] == w["loss"] and abs(w["loss"]) != float("inf")
    check(finite, "pipeline 2 with a bfloat16 activation: the loss is "
          "finite (%s)" % (w and w["loss"]))
    # The stages compute what one process does, bfloat16 rounding alike.
    compare(got, ref, 3, "pipeline 2, a bfloat16 activation", tol=1e-4)
    try:
        copus_pipeline.PipelineTrainer._header(
            torch.zeros(2, dtype=torch.complex64))
        check(False, "a complex64 activation is refused")
    except (copus_pipeline.CopusError, AttributeError) as e:
        check("complex64" in str(e) and "bfloat16" in str(e),
              "a complex64 activation is refused by name, the dtypes that "
              "travel named (%s)" % e)
    codes, _, errs = launch(2, tmp, "complex", model="complex", pipeline=2,
                            steps=1)
    check(None not in codes and 0 not in codes and "complex64" in errs[0]
          and "rank 0 sent no tensor" in errs[1],
          "pipeline 2 with a complex64 activation: both ranks stop, stage "
          "0 naming it, stage 1 naming stage 0 (%s; %s)"
          % (codes, [e.strip().splitlines()[-1:] for e in errs]))


def nonfinite_checks(tmp):
    # Rank 2 is stage 0 of replica 1: its NaN reaches stage 1 of replica
    # 1 forward, stage 0 of replica 0 through the gradients' all-reduce.
    codes, _, errs = launch(4, tmp, "raise", model="plain", pipeline=2,
                            steps=5, nan_step=NAN_STEP, nan_rank=2)
    named = all("step %d" % NAN_STEP in e for e in errs)
    check(None not in codes and 0 not in codes and named,
          "a NaN in one stage with nonfinite='raise': every rank stops "
          "with a non-zero code, naming step %d (%s; %s)"
          % (NAN_STEP, codes, errs[0].strip().splitlines()[-1:]))
    codes, got, errs = launch(4, tmp, "skip", model="plain", pipeline=2,
                              steps=5, nan_step=NAN_STEP, nan_rank=2,
                              nonfinite="skip", clip=CLIP)
    check(codes == [0] * 4 and None not in got and
          all(d["skipped"] == 1 for d in got),
          "a NaN in one stage with nonfinite='skip': every rank skips one "
          "step and exits 0 (%s, skipped %s)"
          % (codes, [d and d.get("skipped") for d in got]))
    if None in got or any(str(NAN_STEP) not in d for d in got):
        return
    still = all(d[str(NAN_STEP)]["params"] == d[str(NAN_STEP - 1)]["params"]
                for d in got)
    check(still, "nonfinite='skip': no rank's parameters change at step %d"
          % NAN_STEP)
    same = all(got[r][str(5)]["params"] == got[r + 2][str(5)]["params"]
               for r in (0, 1))
    check(same, "nonfinite='skip': the replicas' parameters are equal at "
          "step 5")


def run():
    tmp = tempfile.mkdtemp(prefix="copus-pipeline-checks-")
    sampler_checks(tmp)
    clip_checks(tmp)
    dtype_checks(tmp)
    nonfinite_checks(tmp)
    subprocess.call(["rm", "-rf", tmp])
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "worker":
        worker(json.loads(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "run":
        sys.exit(run())
    else:
        print("usage: test_pytorch_pipeline_checks.py run", file=sys.stderr)
        sys.exit(2)
