"""copus_torch.PipelineTrainer on CPU with gloo: a six-layer nn.Sequential
trained in pipeline stages and data-parallel replicas, rescaled between
layouts through resharded checkpoints, against one process that trains the
whole model uninterrupted.

  4 processes (data 2 x pipeline 2) to step 3, checkpoint, exit 75;
  4 processes resume there to step 6: bitwise equal to 4 uninterrupted;
  3 processes (pipeline 3) resume at step 6 (resharded) to step 9;
  2 processes (data 2, one stage) resume at step 9 (resharded) to step 12;
each equal to the single process at the same step (float tolerance),
momentum buffers included, at the same global sample.

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
    at = copus_torch.coords_of_rank(world // pipe, pipe, 1, rank)
    sampler = copus_torch.GlobalSampler(data, at.data_rank, world // pipe,
                                        seed=3)
    out = args["out"] + ".%d" % rank
    dumps = {}

    def dump(step):
        with torch.no_grad():
            params = {n: q.detach().double().reshape(-1).tolist()
                      for n, q in tr._named_params()}
            moms = {n: tr.optimizer.state[q]["momentum_buffer"].double()
                    .reshape(-1).tolist()
                    for n, q in tr._named_params()
                    if "momentum_buffer" in tr.optimizer.state.get(q, {})}
        dumps[str(step)] = {"params": params, "moms": moms,
                            "pos": sampler.pos}
        with open(out + ".tmp", "w") as f:
            json.dump(dumps, f)
        os.replace(out + ".tmp", out)

    tr = copus_torch.PipelineTrainer(
        model, lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
        torch.nn.MSELoss(), sampler, GLOBAL_BATCH, N_MICRO,
        ckpt_dir=args.get("ckpt"), pipeline_degree=pipe, on_rescale=dump)
    dumps["start"] = {"step": tr.step, "restored": tr.rt.info().restored,
                      "pos": sampler.pos}
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
    params, moms, pos = {}, {}, set()
    for d in dumps:
        if d is None or str(step) not in d:
            return None
        params.update(d[str(step)]["params"])
        moms.update(d[str(step)]["moms"])
        pos.add(d[str(step)]["pos"])
    return params, moms, pos


def max_diff(a, b):
    if a is None or b is None or set(a) != set(b):
        return float("inf")
    return max(abs(x - y) for n in a for x, y in zip(a[n], b[n]))


def run():
    tmp = tempfile.mkdtemp(prefix="copus-pipeline-")
    ckpt = os.path.join(tmp, "ckpt")
    codes, ref = launch(1, 1, tmp, "ref", steps=12)
    check(codes == [0], "reference: one process exits 0 (%s)" % codes)
    codes, unint = launch(4, 2, tmp, "unint", steps=6)
    check(codes == [0] * 4, "4 processes uninterrupted exit 0 (%s)" % codes)

    def compare(dumps, step, what, exact=False):
        got, want = merged(dumps, step), merged(ref, step)
        if got is None or want is None:
            check(False, "%s: parameters at step %d" % (what, step))
            return
        dp, dm = max_diff(got[0], want[0]), max_diff(got[1], want[1])
        check(dp < 1e-5 and dm < 1e-5,
              "%s: parameters and momentum at step %d equal the single "
              "process's (max difference %.2g, %.2g)" % (what, step, dp, dm))
        check(got[2] == want[2], "%s: at global sample %s at step %d (%s)"
              % (what, sorted(want[2]), step, sorted(got[2])))

    compare(unint, 6, "4 processes uninterrupted")
    codes, a = launch(4, 2, tmp, "a", ckpt=ckpt, steps=12, signal_at=2)
    check(codes == [75] * 4, "4 processes checkpoint and exit 75 (%s)"
          % codes)
    compare(a, 3, "4 processes")
    codes, a2 = launch(4, 2, tmp, "a2", restart=1, ckpt=ckpt, steps=12,
                       signal_at=5)
    check(codes == [75] * 4, "4 processes resume, exit 75 again (%s)"
          % codes)
    if None not in a2:
        check(all(d["start"]["step"] == 3 and d["start"]["restored"]
                  for d in a2), "4 processes resume at step 3")
    got, want = merged(a2, 6), merged(unint, 6)
    check(got is not None and want is not None and got[:2] == want[:2],
          "the same layout resumes bitwise: step 6 equals the uninterrupted "
          "run's")
    codes, b = launch(3, 3, tmp, "b", restart=2, ckpt=ckpt, steps=12,
                      signal_at=8)
    check(codes == [75] * 3, "3 processes in 3 stages resume from 2 stages "
          "and exit 75 at step 9 (%s)" % codes)
    if None not in b:
        check(all(d["start"]["step"] == 6 for d in b),
              "3 processes resume at step 6")
    compare(b, 9, "3 processes (pipeline 3)")
    codes, c = launch(2, 1, tmp, "c", restart=3, ckpt=ckpt, steps=12)
    check(codes == [0, 0], "2 processes in one stage resume from 3 stages "
          "and finish (%s)" % codes)
    compare(c, 12, "2 processes (data 2)")
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
