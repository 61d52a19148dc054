"""The PyTorch adapter on CPU with gloo: training on 1 and 2 processes, the
gradient noise estimate against a direct computation, and a rescale
(checkpoint, exit, restart with another world size, same progress).

Run by tests/test-pytorch.sh: test_pytorch.py run  (the worker mode
"worker" is what the runner starts for each process).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "contrib", "pytorch"))

DIM = 16
N = 4096


class Data:
    """A synthetic regression stream: y = x.w* + noise. Every rank takes
    its slice of each global batch; the position counts global samples."""

    def __init__(self, torch, rank, world):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(N, DIM, generator=g)
        self.w_true = torch.randn(DIM, 1, generator=g)
        self.y = self.x @ self.w_true + 0.5 * torch.randn(N, 1, generator=g)
        self.rank, self.world = rank, world
        self.pos = 0
        self.torch = torch
        self.skew = False

    def next_batch(self, n):
        start = self.pos + self.rank * n
        idx = self.torch.arange(start, start + n) % N
        self.pos += n * self.world
        if self.skew:
            # Ranks of different speeds and noise: their own measurements
            # differ, their plans must not.
            time.sleep(0.002 * self.rank)
            return self.x[idx] * (1 + self.rank), self.y[idx]
        return self.x[idx], self.y[idx]

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, s):
        self.pos = s["pos"]


class LossScaler:
    """The part of torch.cuda.amp.GradScaler's protocol a training loop
    uses, with a fixed scale (GradScaler itself needs CUDA)."""

    def __init__(self, scale):
        self.scale_value = scale

    def get_scale(self):
        return self.scale_value

    def scale(self, loss):
        return loss * self.scale_value

    def unscale_(self, opt):
        for g in opt.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.grad.div_(self.scale_value)

    def step(self, opt):
        opt.step()


def direct_noise(torch, model, data):
    """|G|^2 and tr(Sigma_1) of the full data set at the current model."""
    w = model.weight.detach().double().t()
    b = model.bias.detach().double()
    x, y = data.x.double(), data.y.double()
    r = x @ w + b - y                       # residuals, N x 1
    gw = 2 * r * x                          # per-sample gradient of w
    gb = 2 * r                              # and of b
    g = torch.cat([gw, gb], dim=1)
    G = g.mean(0)
    tr = float(((g - G) ** 2).sum(1).mean())
    return float((G ** 2).sum()), tr


def worker(args):
    import torch
    import torch.distributed as dist
    import copus_torch

    rank, world = args["rank"], args["world"]
    torch.manual_seed(0)
    if world > 1:
        dist.init_process_group("gloo", init_method=args["init"],
                                rank=rank, world_size=world)
    model = torch.nn.Linear(DIM, 1)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    # The learning rate each optimizer step used, as the optimizer saw it.
    used_lrs = []

    class RecordingSGD(torch.optim.SGD):
        def step(self, *a, **k):
            used_lrs.append(self.param_groups[0]["lr"])
            return super().step(*a, **k)
    opt = RecordingSGD(model.parameters(), lr=args["lr"])
    sched = None
    if args.get("steplr"):
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=args["steplr"],
                                                gamma=0.5)
    data = Data(torch, rank, world)
    data.skew = args.get("skew", False)
    loss_fn = torch.nn.MSELoss()
    out = args["out"] + ".%d" % rank
    log = {}

    def flush():
        with open(out + ".tmp", "w") as f:
            json.dump(log, f)
        os.replace(out + ".tmp", out)

    def on_rescale(step):
        with torch.no_grad():
            log.update(exit_step=step,
                       exit_eval=float(loss_fn(module(data.x), data.y)))
        flush()

    scaler = LossScaler(1024.0) if args.get("own_backward") else None
    tr = copus_torch.Trainer(model, opt, loss_fn, data, on_rescale=on_rescale,
                             init_batch=args.get("init_batch", 32),
                             max_batch=args.get("max_batch", 32),
                             min_local=4, max_local=args["max_local"],
                             ckpt_dir=args.get("ckpt"),
                             noise_decay=args.get("decay", 0.0),
                             replan_every=args.get("replan", 0),
                             prior=args.get("prior"), grad_scaler=scaler)
    info = tr.rt.info()
    module = model.module if world > 1 else model
    with torch.no_grad():
        eval_loss = float(loss_fn(module(data.x), data.y))
    log.update({"rank": rank, "restored": info.restored,
                "start_step": info.step, "start_pos": data.pos,
                "start_eval": eval_loss, "local": tr.plan.local,
                "accum": tr.plan.accum_steps, "losses": [], "evals": []})

    log["plans"] = []
    log["lrs"] = []
    while tr.step < args["steps"]:
        if tr.step == args.get("signal_at", -1) and \
                rank == args.get("signal_rank", 0):
            os.kill(os.getpid(), signal.SIGUSR1)
        if tr.step == args.get("break_ckpt_at", -1) and rank == 0:
            subprocess.call(["rm", "-rf", args["ckpt"]])
            with open(args["ckpt"], "w") as f:
                f.write("not a directory\n")
        if scaler is not None:
            # The user's own backward: a loss scaler, unscaling, clipping.
            total = 0.0
            for x, y in tr.micro_batches():
                loss = loss_fn(model(x), y) / tr.n_micro
                scaler.scale(loss).backward()
                total += float(loss)
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e6)
            tr.optimizer_step(lambda: scaler.step(opt))
            log["losses"].append(total)
        else:
            log["losses"].append(tr.train_step())
        if sched is not None:
            sched.step()
        log["plans"].append([tr.plan.local, tr.plan.accum_steps,
                             tr.plan.lr_gain])
        log["lrs"].append([used_lrs[-1], opt.param_groups[0]["lr"],
                           tr.plan.lr_gain])
        with torch.no_grad():
            log["evals"].append(float(loss_fn(module(data.x), data.y)))
        flush()
    g = tr.rt.grad_stats()
    sqr, trace = direct_noise(torch, module, data)
    log.update(end_step=tr.step, end_pos=data.pos,
               agree_calls=tr.rt.agree_calls,
               est_sqr=g.sqr if g else None, est_var=g.var if g else None,
               direct_sqr=sqr, direct_tr=trace,
               params=[float(p.detach().double().sum())
                       for p in module.parameters()])
    flush()
    tr.rt.finalize()
    if world > 1:
        dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(world, tmp, name, restart=0, **kw):
    """Start world worker processes; their exit codes and logs."""
    init = "tcp://127.0.0.1:%d" % free_port()
    procs = []
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("SLURM_") or k in ("RANK", "WORLD_SIZE",
                                           "LOCAL_RANK"):
            del env[k]
    env["SLURM_RESTART_COUNT"] = str(restart)
    env["OMP_NUM_THREADS"] = "1"
    out = os.path.join(tmp, name)
    for r in range(world):
        a = dict(rank=r, world=world, init=init, out=out, lr=0.05,
                 max_local=8, steps=40)
        a.update(kw)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "worker", json.dumps(a)], env=env))
    codes = [p.wait(timeout=300) for p in procs]
    logs = []
    for r in range(world):
        try:
            with open(out + ".%d" % r) as f:
                logs.append(json.load(f))
        except OSError:
            logs.append(None)
    return codes, logs


failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def mean(xs):
    return sum(xs) / len(xs)


def bad_arguments():
    """The adapter turns libcopus's errors into exceptions with a reason."""
    import copus_torch
    try:
        copus_torch.Runtime(init_batch=0, max_batch=8, min_local=1,
                            max_local=8)
        check(False, "Runtime(init_batch=0) raises CopusError")
    except copus_torch.CopusError as e:
        # The reason names what is wrong, not only "invalid argument".
        check("init_batch" in str(e),
              "Runtime(init_batch=0) raises CopusError naming init_batch (%s)"
              % e)
    rt = copus_torch.Runtime(init_batch=8, max_batch=8, min_local=1,
                             max_local=8)
    try:
        rt.step_end(1, 0)
        check(False, "step_end without step_begin raises")
    except copus_torch.CopusError as e:
        check("without step_begin" in str(e),
              "step_end without step_begin raises (%s)" % e)
    rt.finalize()


SMALL_MODEL = {"arch": "tf", "dtype_bytes": 2, "layers": 4, "hidden": 256,
               "heads": 4, "seq_len": 128, "vocab": 1000}


def planned_degrees():
    """A model descriptor lets the planner choose: Runtime.planned() gives
    the plan, PipelineTrainer trains the planner's stages, and refuses a
    Sequential that is not the planner's layers."""
    import torch
    import copus_torch
    rt = copus_torch.Runtime(init_batch=24, max_batch=24, min_local=1,
                             max_local=24, model=SMALL_MODEL,
                             pipeline_degree=0, tensor_degree=0,
                             gpu_type="a100")
    p = rt.planned()
    check(p is not None and (p.data, p.pipeline, p.tensor) == (1, 1, 1)
          and p.stages() == [0, 6] and p.micro_batches >= 1,
          "Runtime(model=...) plans one process: data, pipeline, tensor 1, "
          "stages [0, 6] (%s)" % ((p and (p.data, p.pipeline, p.tensor,
                                          p.stages())),))
    rt.finalize()
    rt = copus_torch.Runtime(init_batch=24, max_batch=24, min_local=1,
                             max_local=24)
    check(rt.planned() is None, "no model: planned() is None")
    rt.finalize()

    def seq(n):
        return torch.nn.Sequential(*[torch.nn.Linear(4, 4)
                                     for _ in range(n)])
    data = [(torch.ones(4), torch.zeros(4)) for _ in range(96)]
    sampler = copus_torch.GlobalSampler(data, 0, 1, seed=1)
    tr = copus_torch.PipelineTrainer(
        seq(6), lambda ps: torch.optim.SGD(ps, lr=0.01),
        torch.nn.MSELoss(), sampler, 24, 1, planner_model=SMALL_MODEL,
        gpu_type="a100")
    check(tr.first == 0 and tr.count == 6 and
          tr.micro * tr.n_micro == 24,
          "PipelineTrainer(planner_model=...) takes the planner's stage and "
          "micro-batches (%d layers from %d, %d x %d)"
          % (tr.count, tr.first, tr.n_micro, tr.micro))
    tr.train_step()
    check(tr.step == 1, "PipelineTrainer(planner_model=...) trains a step")
    tr.rt.finalize()
    try:
        copus_torch.PipelineTrainer(
            seq(5), lambda ps: torch.optim.SGD(ps, lr=0.01),
            torch.nn.MSELoss(), sampler, 24, 1, planner_model=SMALL_MODEL)
        check(False, "a Sequential of other layers than the planner's "
              "raises")
    except copus_torch.CopusError as e:
        check("6 layers" in str(e), "a Sequential of 5 layers for the "
              "planner's 6 raises (%s)" % e)


def sampler_resumes_across_world_sizes():
    """GlobalSampler: a job of two replicas stopped after 3 calls resumes
    on one or three replicas at the same global sample, and every sample
    of the data set comes once per epoch."""
    import torch
    import copus_torch

    data = [(torch.tensor([float(i)]), torch.tensor([0.0])) for i in range(40)]

    def take(samplers, n):
        got = []
        for s in samplers:
            got += [int(v) for v in s.next_batch(n)[0].reshape(-1)]
        return got

    two = [copus_torch.GlobalSampler(data, r, 2, seed=7) for r in range(2)]
    ref = [copus_torch.GlobalSampler(data, r, 2, seed=7) for r in range(2)]
    seen = []
    for _ in range(3):
        seen += take(two, 4)
        take(ref, 4)
    state = two[0].state_dict()
    expect = take(ref, 4) + take(ref, 4)   # the next 16 global samples
    one = copus_torch.GlobalSampler(data, 0, 1, seed=7)
    one.load_state_dict(state)
    check(take([one], 16) == expect,
          "GlobalSampler: one replica resumes at two replicas' sample")
    # Two steps of a global batch of 8 on four replicas of 2.
    four = [copus_torch.GlobalSampler(data, r, 4, seed=7) for r in range(4)]
    for s in four:
        s.load_state_dict(state)
    check(take(four, 2) + take(four, 2) == expect,
          "GlobalSampler: four replicas resume at two replicas' sample")
    full = copus_torch.GlobalSampler(data, 0, 1, seed=7)
    check(sorted(take([full], 40)) == list(range(40)),
          "GlobalSampler: an epoch holds every sample once")
    try:
        copus_torch.GlobalSampler(data, 0, 1, seed=8).load_state_dict(state)
        check(False, "GlobalSampler refuses another seed's position")
    except copus_torch.CopusError as e:
        check("seed" in str(e), "GlobalSampler refuses another seed's "
              "position (%s)" % e)


# Throughput parameters known in advance, so that plans depend on the noise.
PRIOR = [0.02, 0.001, 0.1, 0.01, 0.05, 0.005, 1.5]


def run():
    tmp = tempfile.mkdtemp(prefix="copus-pytorch-")
    bad_arguments()
    planned_degrees()
    sampler_resumes_across_world_sizes()

    # One process: the batch of 32 is 4 micro-batches of 8.
    codes, logs = launch(1, tmp, "one")
    lg = logs[0]
    check(codes == [0], "one process exits 0 (%s)" % codes)
    if lg is not None:
        check(lg["local"] == 8 and lg["accum"] == 3,
              "one process plans 8 x 4 micro-batches (%d x %d)"
              % (lg["local"], lg["accum"] + 1))
        first, last = mean(lg["losses"][:5]), mean(lg["losses"][-5:])
        check(last < 0.2 * first,
              "one process: loss goes down (%.3f -> %.3f)" % (first, last))

    # Two processes with DDP: 16 per replica = 2 micro-batches of 8.
    codes, logs = launch(2, tmp, "two")
    check(codes == [0, 0], "two processes exit 0 (%s)" % codes)
    if None not in logs:
        first = mean(logs[0]["losses"][:5])
        last = mean(logs[0]["losses"][-5:])
        check(last < 0.2 * first,
              "two processes: loss goes down (%.3f -> %.3f)" % (first, last))
        check(logs[0]["params"] == logs[1]["params"],
              "two processes: the replicas hold the same parameters")

    # The step's agreement rides on the gradient all-reduce: the runtime
    # called no all-reduce of its own in 40 steps (one at init).
    if None not in logs:
        check(all(lg["agree_calls"] <= 1 for lg in logs),
              "two processes: no all-reduce of the runtime's per step "
              "(agree callback called %s times)"
              % [lg["agree_calls"] for lg in logs])

    # Ranks that measure different speeds and noise re-plan every 2 steps:
    # the same plans on both, the same parameters.
    codes, logs = launch(2, tmp, "replan", replan=2, skew=True, steps=20,
                         init_batch=4, max_batch=256, prior=PRIOR)
    check(codes == [0, 0], "re-planning processes exit 0 (%s)" % codes)
    if None not in logs:
        p0, p1 = logs[0]["plans"], logs[1]["plans"]
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(p0, p1)) if a != b]
        check(not diff, "re-planning ranks get the same plans (first "
              "difference: %s)" % (diff[:1],))
        check(any(p[2] > 1.0 for p in p0),
              "re-planning: the plans use the measured noise (gains %s)"
              % sorted(set(round(p[2], 3) for p in p0)))
        check(logs[0]["params"] == logs[1]["params"],
              "re-planning ranks hold the same parameters (%s vs %s)"
              % (logs[0]["params"], logs[1]["params"]))

    # The user's StepLR schedule stays in charge; the gain multiplies it.
    codes, logs = launch(1, tmp, "steplr", steplr=5, steps=12)
    lg = logs[0]
    check(codes == [0], "StepLR run exits 0 (%s)" % codes)
    if lg is not None:
        bad = [(i, used, after, gain) for i, (used, after, gain)
               in enumerate(lg["lrs"])
               if abs(after - 0.05 * 0.5 ** ((i + 1) // 5)) > 1e-12 or
               abs(used - gain * 0.05 * 0.5 ** (i // 5)) > 1e-12]
        check(not bad, "StepLR: each step uses the schedule's rate times the "
              "gain, and the schedule's rate stays (first wrong: %s)"
              % (bad[:1],))

    # The noise estimate at a fixed model (lr 0) against the full data set,
    # on one process (accumulation) and on two (DDP hook).
    # max_local 32 on one process: one micro-batch, consecutive steps.
    # The user's own backward (a loss scaler of 1024, clipping) on two.
    for world, max_local, what, own in (
            (1, 8, "accumulation", False),
            (2, 8, "DDP hook", False),
            (1, 32, "consecutive steps", False),
            (2, 8, "own backward with a loss scaler", True)):
        codes, logs = launch(world, tmp, "noise%d-%d-%d" % (world, max_local,
                                                           own),
                             lr=0.0, steps=400, decay=0.995,
                             max_local=max_local, own_backward=own)
        lg = logs[0]
        check(codes == [0] * world, "noise run (%s) exits 0" % what)
        check(lg is not None and lg["est_sqr"] is not None,
              "noise run (%s) has an estimate" % what)
        if lg is not None and lg["est_sqr"]:
            phi_est = 32 * lg["est_var"] / lg["est_sqr"]
            phi_dir = lg["direct_tr"] / lg["direct_sqr"]
            check(abs(lg["est_sqr"] / lg["direct_sqr"] - 1) < 0.15,
                  "%s: |G|^2 %.4f vs direct %.4f"
                  % (what, lg["est_sqr"], lg["direct_sqr"]))
            check(abs(phi_est / phi_dir - 1) < 0.2,
                  "%s: noise scale %.3f vs direct %.3f"
                  % (what, phi_est, phi_dir))

    # Rescale: two processes, rank 1 is signalled inside step 15; both
    # checkpoint after step 16 and exit 75; one process resumes there.
    ckpt = os.path.join(tmp, "ckpt")
    codes, logs = launch(2, tmp, "rs1", ckpt=ckpt, signal_at=15,
                         signal_rank=1)
    check(codes == [75, 75], "rescale: both ranks exit 75 (%s)" % codes)
    check(os.path.exists(os.path.join(ckpt, "copus.manifest")),
          "rescale: the manifest exists")
    before = logs[0]
    codes, logs = launch(1, tmp, "rs2", restart=1, ckpt=ckpt)
    after = logs[0]
    check(codes == [0], "restart on one process exits 0 (%s)" % codes)
    if before is not None and after is not None:
        check(before.get("exit_step") == 16 and after["restored"] == 1 and
              after["start_step"] == 16,
              "restart resumes at step 16 (exit at %s, restored %d at %d)"
              % (before.get("exit_step"), after["restored"],
                 after["start_step"]))
        check(after["start_pos"] == 16 * 32,
              "restart resumes at data position %d (%d)"
              % (16 * 32, after["start_pos"]))
        check(abs(after["start_eval"] - before.get("exit_eval", -1)) < 1e-6,
              "restart restores the model (eval %.6f vs %.6f)"
              % (after["start_eval"], before.get("exit_eval", -1)))
        check(after.get("end_step") == 40 and after["end_pos"] == 40 * 32,
              "restart finishes the 40 steps (%s)" % after.get("end_step"))
        check(after["evals"][-1] < 0.2 * before["start_eval"],
              "restart keeps learning (%.3f -> %.3f)"
              % (before["start_eval"], after["evals"][-1]))
    # A rescale checkpoint that cannot be written never kills the job:
    # both ranks train to the end.
    # The directory turns into a regular file after step 3.
    codes, logs = launch(2, tmp, "rsfail", ckpt=os.path.join(tmp, "gone"),
                         break_ckpt_at=3, signal_at=5, signal_rank=1,
                         steps=12)
    check(codes == [0, 0], "a failed rescale checkpoint: both ranks train "
          "on and exit 0 (%s)" % codes)
    if None not in logs:
        check(all(lg.get("end_step") == 12 for lg in logs),
              "a failed rescale checkpoint: both ranks reach step 12")
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
        print("usage: test_pytorch.py run", file=sys.stderr)
        sys.exit(2)
