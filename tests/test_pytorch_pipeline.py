"""copus_torch.PipelineTrainer on CPU with gloo: a six-layer nn.Sequential
trained with AdamW and a warm-up LambdaLR (built after the trainer and
registered with it) in pipeline stages and data-parallel replicas,
rescaled between layouts through resharded checkpoints, against one
process that trains the whole model uninterrupted.

  4 processes (data 2 x pipeline 2) to step 3, checkpoint, exit 75;
  4 processes resume there to step 6: bitwise equal to 4 uninterrupted;
  3 processes (pipeline 3) resume at step 6 (resharded) to step 9;
  2 processes (data 2, one stage) resume at step 9 (resharded) to step 12;
  4 processes (data 2 x pipeline 2) resume at step 12 (resharded) to 15;
each equal to the single process at the same step (float tolerance),
Adam's moments and step count included, at the same global sample, with
the same learning rate at every step.

  2 processes planned by the planner (planner_model=, data 2) to step 3,
  checkpoint, exit 75; 2 processes resume there to step 6: equal to the
  single process likewise.

Run by tests/test-pytorch.sh: test_pytorch_pipeline.py run
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

GLOBAL_BATCH = 24
N_MICRO = 2
# A model the planner plans as data 2 on 2 processes: 6 layers.
PLANNED = {"arch": "tf", "dtype_bytes": 2, "layers": 4, "hidden": 256,
           "heads": 4, "seq_len": 128, "vocab": 1000}


def warm_up(step):
    """The learning rate's factor: a warm-up of 4 steps, then decay."""
    return min(1.0, (step + 1) / 4.0) * 0.9 ** step


def worker(args):
    import torch
    import torch.distributed as dist
    import copus_torch

    rank, world, pipe = args["rank"], args["world"], args["pipeline"]
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", init_method=args["init"],
                                rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(),
        torch.nn.Linear(16, 16), torch.nn.Tanh(),
        torch.nn.Linear(16, 4), torch.nn.Identity())
    g = torch.Generator().manual_seed(5)
    xs = torch.randn(240, 8, generator=g)
    ys = torch.randn(240, 4, generator=g)
    data = [(xs[i], ys[i]) for i in range(240)]
    out = args["out"] + ".%d" % rank
    dumps = {}

    def dump(step):
        flat = lambda t: t.detach().double().reshape(-1).tolist()  # noqa
        with torch.no_grad():
            params = {n: flat(q) for n, q in tr._named_params()}
            # Adam's moments and step count, by parameter.
            opt = {"%s.%s" % (n, k): flat(v) if torch.is_tensor(v) else [v]
                   for n, q in tr._named_params()
                   for k, v in tr.optimizer.state.get(q, {}).items()}
        dumps[str(step)] = {"params": params, "opt": opt,
                            "lr": tr.optimizer.param_groups[0]["lr"],
                            "pos": tr.sampler.pos}
        with open(out + ".tmp", "w") as f:
            json.dump(dumps, f)
        os.replace(out + ".tmp", out)

    def layout(replica, replicas):
        return copus_torch.GlobalSampler(data, replica, replicas, seed=3)
    if args.get("planned"):
        # The planner chooses the data degree: the trainer builds the
        # sampler of its replica.
        kw = dict(planner_model=PLANNED, gpu_type="a100")
        sampler = layout
    else:
        kw = dict(pipeline_degree=pipe)
        at = copus_torch.coords_of_rank(world // pipe, pipe, 1, rank)
        sampler = layout(at.data_rank, world // pipe)
    tr = copus_torch.PipelineTrainer(
        model, lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.01),
        torch.nn.MSELoss(), sampler, GLOBAL_BATCH, N_MICRO,
        ckpt_dir=args.get("ckpt"), on_rescale=dump, **kw)
    # The optimizer is the trainer's: its scheduler comes after it.
    sched = tr.register(torch.optim.lr_scheduler.LambdaLR(tr.optimizer,
                                                          warm_up))
    dumps["start"] = {"step": tr.step, "restored": tr.rt.info().restored,
                      "pos": tr.sampler.pos, "data": tr.plan.data_degree,
                      "lr": tr.optimizer.param_groups[0]["lr"],
                      "pipeline": tr.plan.pipeline_degree}
    while tr.step < args["steps"]:
        if tr.step == args.get("signal_at", -1) and rank == 0:
            os.kill(os.getpid(), signal.SIGUSR1)
        tr.train_step()
        sched.step()
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


def launch(world, pipeline, tmp, name, restart=0, **kw):
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
        a = dict(rank=r, world=world, pipeline=pipeline, init=init, out=out)
        a.update(kw)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "worker", json.dumps(a)], env=env))
    codes = [p.wait(timeout=300) for p in procs]
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


def merged(dumps, step):
    """The whole model at a step, from the stages of all ranks."""
    params, opt, pos, lrs = {}, {}, set(), set()
    for d in dumps:
        if d is None or str(step) not in d:
            return None
        params.update(d[str(step)]["params"])
        opt.update(d[str(step)]["opt"])
        pos.add(d[str(step)]["pos"])
        lrs.add(d[str(step)]["lr"])
    return params, opt, pos, lrs


def max_diff(a, b):
    if a is None or b is None or set(a) != set(b):
        return float("inf")
    return max(abs(x - y) for n in a for x, y in zip(a[n], b[n]))


def run():
    tmp = tempfile.mkdtemp(prefix="copus-pipeline-")
    ckpt = os.path.join(tmp, "ckpt")
    codes, ref = launch(1, 1, tmp, "ref", steps=15)
    check(codes == [0], "reference: one process exits 0 (%s)" % codes)
    codes, unint = launch(4, 2, tmp, "unint", steps=6)
    check(codes == [0] * 4, "4 processes uninterrupted exit 0 (%s)" % codes)

    def compare(dumps, first, last, what):
        """Steps first..last of a run against the single process: the
        parameters and the optimizer's state (float tolerance), the
        learning rate (exactly, the restored one included) and the global
        sample."""
        dp = dm = 0.0
        lr, pos = [], []
        for step in range(first - 1, last + 1):
            want = merged(ref, step)
            if step == first - 1:
                # The learning rate as the run starts: restored or fresh.
                got = [d and d["start"].get("lr") for d in dumps]
                if step > 0 and set(got) != want[3]:
                    lr.append((step, sorted(want[3]), got))
                continue
            got = merged(dumps, step)
            if got is None or want is None:
                check(False, "%s: a dump of step %d from every rank"
                      % (what, step))
                return
            dp = max(dp, max_diff(got[0], want[0]))
            dm = max(dm, max_diff(got[1], want[1]))
            if got[3] != want[3]:
                lr.append((step, sorted(want[3]), sorted(got[3])))
            if got[2] != want[2]:
                pos.append((step, sorted(want[2]), sorted(got[2])))
        check(dp < 1e-5 and dm < 1e-5,
              "%s: parameters and Adam's moments and step at steps %d-%d "
              "equal the single process's (max difference %.2g, %.2g)"
              % (what, first, last, dp, dm))
        check(not lr, "%s: the learning rate at steps %d-%d is the single "
              "process's%s" % (what, first, last,
                               " (step, want, got: %s)" % lr if lr else ""))
        check(not pos, "%s: at the single process's global sample at steps "
              "%d-%d%s" % (what, first, last,
                           " (step, want, got: %s)" % pos if pos else ""))

    def resumed_at(dumps, step, what):
        if None not in dumps:
            check(all(d["start"]["step"] == step and d["start"]["restored"]
                      for d in dumps), "%s resume at step %d (%s)"
                  % (what, step, [d["start"]["step"] for d in dumps]))

    compare(unint, 1, 6, "4 processes uninterrupted")
    codes, a = launch(4, 2, tmp, "a", ckpt=ckpt, steps=15, signal_at=2)
    check(codes == [75] * 4, "4 processes checkpoint and exit 75 (%s)"
          % codes)
    compare(a, 1, 3, "4 processes")
    codes, a2 = launch(4, 2, tmp, "a2", restart=1, ckpt=ckpt, steps=15,
                       signal_at=5)
    check(codes == [75] * 4, "4 processes resume, exit 75 again (%s)"
          % codes)
    resumed_at(a2, 3, "4 processes")
    got, want = merged(a2, 6), merged(unint, 6)
    check(got is not None and want is not None and got[:2] == want[:2],
          "the same layout resumes bitwise: step 6 equals the uninterrupted "
          "run's, Adam's state included")
    compare(a2, 4, 6, "4 processes resumed")
    codes, b = launch(3, 3, tmp, "b", restart=2, ckpt=ckpt, steps=15,
                      signal_at=8)
    check(codes == [75] * 3, "3 processes in 3 stages resume from 2 stages "
          "and exit 75 at step 9 (%s)" % codes)
    resumed_at(b, 6, "3 processes")
    compare(b, 7, 9, "3 processes (pipeline 3)")
    codes, c = launch(2, 1, tmp, "c", restart=3, ckpt=ckpt, steps=15,
                      signal_at=11)
    check(codes == [75, 75], "2 processes in one stage resume from 3 "
          "stages and exit 75 at step 12 (%s)" % codes)
    resumed_at(c, 9, "2 processes")
    compare(c, 10, 12, "2 processes (data 2)")
    codes, d = launch(4, 2, tmp, "d", restart=4, ckpt=ckpt, steps=15)
    check(codes == [0] * 4, "4 processes (data 2 x pipeline 2) resume from "
          "one stage and finish (%s)" % codes)
    resumed_at(d, 12, "4 processes")
    compare(d, 13, 15, "4 processes (data 2 x pipeline 2) again")

    # The planner's layout: PipelineTrainer(planner_model=...).
    ckpt = os.path.join(tmp, "ckpt-planned")
    codes, p = launch(2, 1, tmp, "p", planned=True, ckpt=ckpt, steps=6,
                      signal_at=2)
    check(codes == [75, 75], "2 processes planned checkpoint and exit 75 "
          "(%s)" % codes)
    if None not in p:
        check(all(d["start"]["data"] == 2 for d in p),
              "the planner makes 2 processes data 2 (%s)"
              % [(d["start"]["data"], d["start"]["pipeline"]) for d in p])
    compare(p, 1, 3, "2 processes planned")
    codes, p2 = launch(2, 1, tmp, "p2", restart=1, planned=True, ckpt=ckpt,
                       steps=6)
    check(codes == [0, 0], "2 processes planned resume and finish (%s)"
          % codes)
    resumed_at(p2, 3, "2 processes planned")
    compare(p2, 4, 6, "2 processes planned, resumed")
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
        print("usage: test_pytorch_pipeline.py run", file=sys.stderr)
        sys.exit(2)
