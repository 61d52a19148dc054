"""copus_tensor's tensor-parallel linear layers under copus_torch.Trainer on
CPU with gloo, against one process that trains the same model built of
plain nn.Linear layers (the same seed, the same global batch):

  2 processes (tensor 2): the loss, the parameters (slices joined), their
    gradients and momentum equal the single process's at every step;
  4 processes (data 2 x tensor 2, DDP over the data group): the same;
  2 processes (tensor 2) checkpoint at step 3 and exit 75; 1 process
    (tensor 1) resumes there (resharded), checkpoints at step 6; 2
    processes (tensor 2) resume there (resharded) to step 9: each equal
    to the single process at the same step and global sample;
  under PipelineTrainer, 4 processes (pipeline 2 x tensor 2) equal the
    single process and checkpoint at step 3; 1 process resumes there
    (4 shards joined) to step 5; 4 processes (pipeline 2 x tensor 2)
    resume there (1 shard cut in 4) to step 7: each equal to the single
    process.

The model uses all four of the layers' communications: a column-parallel
layer whose split output feeds a row-parallel layer, a row-parallel layer
that splits its whole input itself, and a column-parallel layer that
gathers its output.

Run by tests/test-pytorch.sh: test_pytorch_tensor.py run
"""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "pytorch"))

GLOBAL_BATCH = 16
STEPS = 9
TOL = 1e-5


def worker(args):
    import torch
    import torch.distributed as dist
    import copus_torch
    import copus_tensor

    rank, world, tensor = args["rank"], args["world"], args["tensor"]
    # A pipeline degree: PipelineTrainer, else Trainer.
    pipe = args.get("pipeline")
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", init_method=args["init"],
                                rank=rank, world_size=world)
    L = torch.nn.Linear
    if args["plain"]:
        tp = None
        data_rank, data_degree, tensor_rank = 0, 1, 0
        torch.manual_seed(0)
        model = torch.nn.Sequential(L(8, 32), torch.nn.Tanh(), L(32, 8),
                                    torch.nn.Tanh(), L(8, 8), torch.nn.Tanh(),
                                    L(8, 4))
    else:
        tp = copus_tensor.TensorParallel(tensor, pipe or 1)
        data_rank, data_degree = tp.data_rank, tp.data_degree
        tensor_rank = tp.rank
        C, R = copus_tensor.ColumnParallelLinear, \
            copus_tensor.RowParallelLinear
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            C(8, 32, tp=tp), torch.nn.Tanh(), R(32, 8, tp=tp),
            torch.nn.Tanh(), R(8, 8, tp=tp, input_is_parallel=False),
            torch.nn.Tanh(), C(8, 4, tp=tp, gather_output=True))
    module = model
    if data_degree > 1 and not pipe:
        model = torch.nn.parallel.DistributedDataParallel(
            model, process_group=tp.data_group)
    g = torch.Generator().manual_seed(5)
    xs = torch.randn(320, 8, generator=g)
    ys = torch.randn(320, 4, generator=g)
    sampler = copus_torch.GlobalSampler(
        [(xs[i], ys[i]) for i in range(320)], data_rank, data_degree, seed=3)
    out = args["out"] + ".%d" % rank
    losses = {}

    def dump(step):
        flat = lambda t: t.detach().double().reshape(-1).tolist()  # noqa
        stats = tr.rt.grad_stats()
        opt = tr.optimizer
        with torch.no_grad():
            dumps[str(step)] = {
                "loss": losses.get(step),
                "stats": [stats.sqr, stats.var] if stats else None,
                "params": {n: flat(q) for n, q in params},
                "grads": {n: flat(q.grad) for n, q in params
                          if q.grad is not None},
                "moms": {n: flat(opt.state[q]["momentum_buffer"])
                         for n, q in params
                         if "momentum_buffer" in opt.state.get(q, {})},
                "shapes": {n: list(q.shape) for n, q in params},
                "pos": sampler.pos}
        with open(out + ".tmp", "w") as f:
            json.dump(dumps, f)
        os.replace(out + ".tmp", out)

    make_opt = lambda ps: torch.optim.SGD(ps, lr=0.1,  # noqa: E731
                                          momentum=0.9)
    if pipe:
        tr = copus_torch.PipelineTrainer(
            model, make_opt, torch.nn.MSELoss(), sampler, GLOBAL_BATCH, 2,
            ckpt_dir=args.get("ckpt"), pipeline_degree=pipe,
            tensor_degree=tensor, on_rescale=dump)
        params = list(tr._named_params())
    else:
        tr = copus_torch.Trainer(
            model, make_opt(model.parameters()), torch.nn.MSELoss(), sampler,
            init_batch=GLOBAL_BATCH, max_batch=GLOBAL_BATCH,
            min_local=GLOBAL_BATCH // data_degree,
            max_local=GLOBAL_BATCH // data_degree, ckpt_dir=args.get("ckpt"),
            tensor_degree=tensor, on_rescale=dump)
        params = list(module.named_parameters())
    # Parameter names as nn.Sequential's state_dict has them ("2.weight"),
    # with the dimension along which a slice is cut.
    dumps = {"tensor_rank": tensor_rank, "data_rank": data_rank,
             "split": {n: getattr(q, copus_torch.SPLIT_ATTR)[0]
                       for n, q in params
                       if hasattr(q, copus_torch.SPLIT_ATTR)}}
    dumps["start"] = {"step": tr.step, "restored": tr.rt.info().restored,
                      "pos": sampler.pos}

    # The loss of the step that is about to end, for the dump that a
    # rescale's exit writes from optimizer_step.
    class Loss(torch.nn.MSELoss):
        def forward(self, a, b):
            v = super().forward(a, b)
            losses[tr.step + 1] = losses.get(tr.step + 1, 0.0) + \
                float(v) / tr.n_micro
            return v
    tr.loss_fn = Loss()
    while tr.step < args["steps"]:
        if tr.step == args.get("signal_at", -1) and rank == 0:
            os.kill(os.getpid(), signal.SIGUSR1)
        tr.train_step()
        # The step's end now (a checkpoint on a rescale), not at the next
        # step's start: the signal sent before the next step is then
        # caught at the end of that step.
        tr.end_step()
        dump(tr.step)
    tr.rt.finalize()
    if world > 1:
        dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(world, tensor, tmp, name, restart=0, plain=False, **kw):
    init = "tcp://127.0.0.1:%d" % free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", COPUS_HINTS="0",
               SLURM_RESTART_COUNT=str(restart))
    for k in list(env):
        if k.startswith("SLURM_") and k != "SLURM_RESTART_COUNT" or \
                k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            del env[k]
    out = os.path.join(tmp, name)
    procs = []
    for r in range(world):
        a = dict(rank=r, world=world, tensor=tensor, init=init, out=out,
                 plain=plain)
        a.update(kw)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "worker", json.dumps(a)], env=env))
    codes = [p.wait(timeout=120) for p in procs]
    dumps = []
    for r in range(world):
        try:
            with open(out + ".%d" % r) as f:
                dumps.append(json.load(f))
        except OSError:
            dumps.append(None)
    return codes, dumps


failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def whole(dumps, step):
    """The whole model at a step: each split parameter's slices joined in
    tensor-rank order (data replica 0's, from the ranks of its stage), the
    others as the first of them has them; with the mean loss over the
    replicas (of the last stage) and the global sample."""
    import torch
    if None in dumps or any(str(step) not in d for d in dumps):
        return None
    first = [d for d in dumps if d["data_rank"] == 0]
    first.sort(key=lambda d: d["tensor_rank"])
    out = {"loss": None, "pos": {d[str(step)]["pos"] for d in dumps},
           "stats": first[0][str(step)]["stats"]}
    losses = [d[str(step)]["loss"] for d in dumps if d["tensor_rank"] == 0
              and d[str(step)]["loss"] is not None]
    if losses:
        out["loss"] = sum(losses) / len(losses)
    for kind in ("params", "grads", "moms"):
        out[kind] = {}
        names = {n for d in first for n in d[str(step)]["shapes"]}
        for n in names:
            holders = [d for d in first if n in d[str(step)]["shapes"]]
            parts = [torch.tensor(d[str(step)][kind][n], dtype=torch.float64)
                     .view(d[str(step)]["shapes"][n])
                     for d in holders if n in d[str(step)][kind]]
            if len(parts) != len(holders):
                continue
            dim = holders[0]["split"].get(n)
            out[kind][n] = parts[0] if dim is None else torch.cat(parts, dim)
    return out


def replicas_agree(dumps, step):
    """The largest difference between a parameter slice on data replica 0
    and the same slice on the other replicas."""
    import torch
    worst = 0.0
    for d in dumps:
        for e in dumps:
            if e["data_rank"] == 0 and e["tensor_rank"] == d["tensor_rank"]:
                for n, v in d[str(step)]["params"].items():
                    a, b = torch.tensor(v), torch.tensor(
                        e[str(step)]["params"][n])
                    worst = max(worst, float((a - b).abs().max()))
    return worst


def max_diff(a, b):
    if set(a) != set(b) or not a:
        return float("inf")
    return max(float((a[n] - b[n]).abs().max()) if a[n].shape == b[n].shape
               else float("inf") for n in a)


def compare(dumps, ref, step, what, loss=True):
    got, want = whole(dumps, step), whole(ref, step)
    if got is None or want is None:
        check(False, "%s: a dump of step %d from every rank" % (what, step))
        return
    diffs = [max_diff(got[k], want[k]) for k in ("params", "grads", "moms")]
    check(max(diffs) < TOL,
          "%s: parameters, gradients and momentum at step %d equal the "
          "single process's (max differences %.2g, %.2g, %.2g)"
          % (what, step, *diffs))
    if loss:
        dl = abs(got["loss"] - want["loss"]) if got["loss"] is not None \
            else float("inf")
        check(dl < TOL, "%s: loss at step %d is the single process's "
              "(%r, %r)" % (what, step, got["loss"], want["loss"]))
    check(got["pos"] == want["pos"], "%s: at global sample %s at step %d "
          "(%s)" % (what, sorted(want["pos"]), step, sorted(got["pos"])))


def run():
    if importlib.util.find_spec("torch") is None:
        print("SKIP: torch is not importable by %s" % sys.executable)
        return 77
    tmp = tempfile.mkdtemp(prefix="copus-tensor-")
    ckpt = os.path.join(tmp, "ckpt")
    codes, ref = launch(1, 1, tmp, "ref", plain=True, steps=STEPS)
    check(codes == [0], "reference: one process of nn.Linear exits 0 (%s)"
          % codes)

    codes, t2 = launch(2, 2, tmp, "t2", steps=STEPS)
    check(codes == [0, 0], "2 processes (tensor 2) exit 0 (%s)" % codes)
    for step in range(1, STEPS + 1):
        compare(t2, ref, step, "tensor 2")
    # The gradient statistics libcopus measured: of the whole model, the
    # slices' squared norms summed over the tensor group.
    got, want = whole(t2, STEPS), whole(ref, STEPS)
    ok = got is not None and want is not None and got["stats"] and \
        want["stats"] and all(abs(a - b) <= 1e-4 * abs(b)
                              for a, b in zip(got["stats"], want["stats"]))
    check(ok, "tensor 2: the gradient statistics equal the single "
          "process's (%s, %s)" % (got and got["stats"],
                                  want and want["stats"]))

    codes, d2 = launch(4, 2, tmp, "d2t2", steps=4)
    check(codes == [0] * 4, "4 processes (data 2 x tensor 2) exit 0 (%s)"
          % codes)
    for step in range(1, 5):
        compare(d2, ref, step, "data 2 x tensor 2")
    if None not in d2 and all("4" in d for d in d2):
        worst = replicas_agree(d2, 4)
        check(worst == 0.0, "data 2 x tensor 2: both replicas hold the "
              "same slices at step 4 (max difference %.2g)" % worst)

    codes, a = launch(2, 2, tmp, "a", ckpt=ckpt, steps=STEPS, signal_at=2)
    check(codes == [75, 75], "2 processes (tensor 2) checkpoint at step 3 "
          "and exit 75 (%s)" % codes)
    compare(a, ref, 3, "tensor 2 before the checkpoint")
    codes, b = launch(1, 1, tmp, "b", restart=1, ckpt=ckpt, steps=STEPS,
                      signal_at=5)
    check(codes == [75], "1 process (tensor 1) resumes from tensor 2, "
          "checkpoints at step 6 and exits 75 (%s)" % codes)
    if None not in b:
        check(all(d["start"]["step"] == 3 and d["start"]["restored"]
                  for d in b), "1 process resumes at step 3")
    compare(b, ref, 4, "tensor 1 resumed from tensor 2")
    compare(b, ref, 6, "tensor 1 resumed from tensor 2")
    codes, c = launch(2, 2, tmp, "c", restart=2, ckpt=ckpt, steps=STEPS)
    check(codes == [0, 0], "2 processes (tensor 2) resume from tensor 1 and "
          "finish (%s)" % codes)
    if None not in c:
        check(all(d["start"]["step"] == 6 and d["start"]["restored"]
                  for d in c), "2 processes resume at step 6")
    compare(c, ref, 7, "tensor 2 resumed from tensor 1")
    compare(c, ref, STEPS, "tensor 2 resumed from tensor 1")

    # PipelineTrainer: stages of tensor-parallel layers.
    ckpt = os.path.join(tmp, "ckpt-pipeline")
    codes, pa = launch(4, 2, tmp, "pa", pipeline=2, ckpt=ckpt, steps=STEPS,
                       signal_at=2)
    check(codes == [75] * 4, "4 processes (pipeline 2 x tensor 2) "
          "checkpoint at step 3 and exit 75 (%s)" % codes)
    for step in range(1, 4):
        compare(pa, ref, step, "pipeline 2 x tensor 2")
    codes, pb = launch(1, 1, tmp, "pb", pipeline=1, restart=1, ckpt=ckpt,
                       steps=STEPS, signal_at=4)
    check(codes == [75], "1 process resumes from pipeline 2 x tensor 2, "
          "checkpoints at step 5 and exits 75 (%s)" % codes)
    if None not in pb:
        check(all(d["start"]["step"] == 3 and d["start"]["restored"]
                  for d in pb), "1 process resumes at step 3")
    compare(pb, ref, 5, "pipeline 1 x tensor 1 resumed from 2 x 2")
    codes, pc = launch(4, 2, tmp, "pc", pipeline=2, restart=2, ckpt=ckpt,
                       steps=7)
    check(codes == [0] * 4, "4 processes (pipeline 2 x tensor 2) resume "
          "from one process and finish (%s)" % codes)
    if None not in pc:
        check(all(d["start"]["step"] == 5 and d["start"]["restored"]
                  for d in pc), "4 processes resume at step 5")
    compare(pc, ref, 7, "pipeline 2 x tensor 2 resumed from 1 x 1")
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
        print("usage: test_pytorch_tensor.py run", file=sys.stderr)
        sys.exit(2)
