"""copus_merge (copus-torch-merge) on checkpoints that the adapter really
wrote, on CPU with gloo: each layout trains a small model 3 steps, takes a
checkpoint (copus_checkpoint on every rank) and dumps every rank's own
parameters at that step; the merged state_dict then loads strictly into
the plain, unsharded nn.Sequential of nn.Linear layers, and every rank's
parameters equal (torch.equal) their slice of it:

  Trainer with DDP on 2 processes (one file);
  Trainer with copus_tensor's layers at tensor degree 2 (a file a slice);
  PipelineTrainer in 2 stages (a file a stage);
  PipelineTrainer in 2 stages x tensor 2 (a file a stage and slice);
  Trainer at data 2 x tensor 2 with save_all_ranks (a file per rank, data
    replica 0's read).

And what it refuses, with a message naming the file: a shard with a byte
flipped (the command exits 1 with one line, no traceback), a missing
shard, a directory without a manifest, another step, slices that do not
join.

Run by tests/test-pytorch.sh: test_pytorch_merge.py run
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER = os.path.join(HERE, "..", "contrib", "pytorch")
sys.path.insert(0, ADAPTER)

GLOBAL_BATCH = 16
STEPS = 3


def worker(args):
    import torch
    import torch.distributed as dist
    import copus_lib
    import copus_torch
    import copus_tensor

    rank, world = args["rank"], args["world"]
    tensor, pipe = args["tensor"], args["pipeline"]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=args["init"], rank=rank,
                            world_size=world)
    if args.get("all_ranks"):
        # Runtime has no argument for it: set copus_config.save_all_ranks
        # on its way into copus_init.
        lib = copus_lib.library()
        real = lib.copus_init

        def init(cfg, ctx):
            cfg._obj.save_all_ranks = 1
            return real(cfg, ctx)
        lib.copus_init = init
    tp = copus_tensor.TensorParallel(tensor, pipe)
    torch.manual_seed(0)
    if tensor > 1:
        C, R = copus_tensor.ColumnParallelLinear, \
            copus_tensor.RowParallelLinear
        model = torch.nn.Sequential(
            C(8, 32, tp=tp), torch.nn.Tanh(), R(32, 8, tp=tp),
            torch.nn.Tanh(), R(8, 8, tp=tp, input_is_parallel=False),
            torch.nn.Tanh(), C(8, 4, tp=tp, gather_output=True))
    else:
        model = plain_model()
    g = torch.Generator().manual_seed(5)
    xs, ys = torch.randn(320, 8, generator=g), torch.randn(320, 4,
                                                           generator=g)
    sampler = copus_torch.GlobalSampler(
        [(xs[i], ys[i]) for i in range(320)], tp.data_rank, tp.data_degree,
        seed=3)
    make_opt = lambda ps: torch.optim.SGD(ps, lr=0.1,  # noqa: E731
                                          momentum=0.9)
    if args["kind"] == "pipeline":
        tr = copus_torch.PipelineTrainer(
            model, make_opt, torch.nn.MSELoss(), sampler, GLOBAL_BATCH, 2,
            ckpt_dir=args["ckpt"], pipeline_degree=pipe,
            tensor_degree=tensor)
        params = tr._named_params
    else:
        module = model
        if tp.data_degree > 1:
            model = torch.nn.parallel.DistributedDataParallel(
                model, process_group=tp.data_group)
        tr = copus_torch.Trainer(
            model, make_opt(model.parameters()), torch.nn.MSELoss(), sampler,
            init_batch=GLOBAL_BATCH, max_batch=GLOBAL_BATCH,
            min_local=GLOBAL_BATCH // tp.data_degree,
            max_local=GLOBAL_BATCH // tp.data_degree, ckpt_dir=args["ckpt"],
            tensor_degree=tensor)
        params = module.named_parameters
    while tr.step < STEPS:
        tr.train_step()
    # The last step's end (StepLoop's trainers end a step at the next
    # one's start), then a checkpoint of that step on every rank.
    if hasattr(tr, "end_step"):
        tr.end_step()
    tr.rt.checkpoint()
    # This rank's parameters at the checkpoint's step, named as the plain
    # nn.Sequential names them, with the dimension of each slice.
    torch.save({"step": tr.step, "tensor_rank": tp.rank,
                "params": {n: q.detach().clone() for n, q in params()},
                "split": {n: getattr(q, copus_torch.SPLIT_ATTR)[0]
                          for n, q in params()
                          if hasattr(q, copus_torch.SPLIT_ATTR)}},
               args["out"] + ".%d" % rank)
    tr.rt.finalize()
    dist.destroy_process_group()


def plain_model():
    import torch
    L = torch.nn.Linear
    return torch.nn.Sequential(L(8, 32), torch.nn.Tanh(), L(32, 8),
                               torch.nn.Tanh(), L(8, 8), torch.nn.Tanh(),
                               L(8, 4))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(tmp, name, world, kind, tensor=1, pipeline=1, all_ranks=False):
    """Train and checkpoint on world processes: the exit codes, the
    checkpoint directory and the ranks' dumps (None where missing)."""
    import torch
    init = "tcp://127.0.0.1:%d" % free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", COPUS_HINTS="0",
               SLURM_RESTART_COUNT="0")
    for k in list(env):
        if k.startswith("SLURM_") and k != "SLURM_RESTART_COUNT" or \
                k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "COPUS_CKPT_DIR"):
            del env[k]
    ckpt, out = os.path.join(tmp, name), os.path.join(tmp, name + ".dump")
    procs = []
    for r in range(world):
        a = dict(rank=r, world=world, kind=kind, tensor=tensor,
                 pipeline=pipeline, all_ranks=all_ranks, init=init,
                 ckpt=ckpt, out=out)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "worker", json.dumps(a)], env=env))
    codes = [p.wait(timeout=120) for p in procs]
    dumps = []
    for r in range(world):
        try:
            dumps.append(torch.load(out + ".%d" % r))
        except OSError:
            dumps.append(None)
    return codes, ckpt, dumps


failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def loads_and_equals_the_ranks(what, ckpt, dumps):
    """The merged state_dict loads strictly into the plain model, and each
    rank's parameters are their slice of it, bit for bit."""
    import torch
    import copus_merge
    try:
        state = copus_merge.merge(ckpt)
    except Exception as e:  # noqa: BLE001
        check(False, "%s: merged (%s)" % (what, e))
        return None
    model = plain_model()
    try:
        model.load_state_dict(state)
        loaded = True
    except RuntimeError as e:
        loaded = False
        print("      %s" % str(e).splitlines()[0])
    check(loaded, "%s: the merged state_dict (%d tensors) loads strictly "
          "into the plain model" % (what, len(state)))
    if not loaded:
        return None
    whole = dict(model.named_parameters())
    differ, seen = [], set()
    for r, d in enumerate(dumps):
        if d is None or d["step"] != STEPS:
            differ.append("rank %d dumped nothing at step %d" % (r, STEPS))
            continue
        for n, q in d["params"].items():
            seen.add(n)
            want = whole[n].detach()
            dim = d["split"].get(n)
            if dim is not None:
                k = q.shape[dim]
                want = want.narrow(dim, d["tensor_rank"] * k, k)
            if not torch.equal(q, want):
                differ.append("rank %d's %s (max difference %.3g)" % (
                    r, n, float((q - want).abs().max())
                    if q.shape == want.shape else float("inf")))
    check(not differ and seen == set(whole),
          "%s: every rank's parameters at step %d equal their slice of the "
          "merged model (%d parameters)%s" % (
              what, STEPS, len(seen),
              "; differ: " + ", ".join(differ) if differ else
              "" if seen == set(whole) else
              "; no rank holds " + ", ".join(sorted(set(whole) - seen))))
    return state


def command_env():
    """The command's environment: the adapter's modules, and a libcopus
    that cannot load (merging must not need it)."""
    return dict(os.environ, PYTHONPATH=ADAPTER,
                COPUS_LIB="/nonexistent/libcopus.so")


def manifest_files(ckpt):
    with open(os.path.join(ckpt, "copus.manifest")) as f:
        return json.load(f)["files"]


def refused(what, ckpt, words, **kw):
    """merge() refuses ckpt with a CopusError whose message holds words."""
    import copus_merge
    try:
        copus_merge.merge(ckpt, **kw)
        msg = None
    except copus_merge.CopusError as e:
        msg = str(e)
    check(msg is not None and all(w in msg for w in words),
          "%s: refused, naming %s (%s)" % (what, " and ".join(words), msg))


def refusals(tmp, ckpt):
    """What merging refuses, on copies of a checkpoint of 2 tensor
    slices."""
    import torch
    files = manifest_files(ckpt)
    env = command_env()
    # A byte flipped in the middle of the second slice: the command.
    bad = os.path.join(tmp, "flipped")
    shutil.copytree(ckpt, bad)
    path = os.path.join(bad, files[1][0])
    with open(path, "r+b") as f:
        f.seek(files[1][1] // 2)
        b = f.read(1)
        f.seek(files[1][1] // 2)
        f.write(bytes([b[0] ^ 0xff]))
    p = subprocess.run([sys.executable, "-m", "copus_merge", bad,
                        os.path.join(tmp, "flipped.pt")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and path in lines[0] and
          "CRC-32" in lines[0] and "Traceback" not in p.stderr and
          not os.path.exists(os.path.join(tmp, "flipped.pt")),
          "a shard with a byte flipped: the command exits 1 with one line "
          "naming it (%d: %s)" % (p.returncode, p.stderr.strip()))
    # A missing shard.
    gone = os.path.join(tmp, "missing")
    shutil.copytree(ckpt, gone)
    os.unlink(os.path.join(gone, files[0][0]))
    refused("a missing shard", gone, [os.path.join(gone, files[0][0])])
    # No manifest.
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    refused("a directory without a manifest", empty,
            [os.path.join(empty, "copus.manifest")])
    # Another step than the checkpoint's.
    refused("--step %d of a checkpoint of step %d" % (STEPS - 1, STEPS),
            ckpt, ["step %d, not %d" % (STEPS, STEPS - 1)], step=STEPS - 1)
    # A slice one row short, its size and CRC-32 made the manifest's: the
    # slices of 0.weight cannot join.
    short = os.path.join(tmp, "short")
    shutil.copytree(ckpt, short)
    path = os.path.join(short, files[1][0])
    s = torch.load(path)
    s["model"]["0.weight"] = s["model"]["0.weight"][1:].clone()
    torch.save(s, path)
    with open(os.path.join(short, "copus.manifest")) as f:
        m = json.load(f)
    with open(path, "rb") as f:
        m["files"][1][1:] = [os.path.getsize(path), zlib.crc32(f.read())]
    with open(os.path.join(short, "copus.manifest"), "w") as f:
        json.dump(m, f)
    refused("slices of different shapes", short, ["0.weight", path])


def run():
    import torch
    tmp = tempfile.mkdtemp(prefix="copus-merge-")
    layouts = [
        ("Trainer, DDP on 2 processes", "ddp", 2, "trainer", {}),
        ("Trainer, tensor 2", "tensor", 2, "trainer", {"tensor": 2}),
        ("PipelineTrainer, pipeline 2", "pipe", 2, "pipeline",
         {"pipeline": 2}),
        ("PipelineTrainer, pipeline 2 x tensor 2", "pipetensor", 4,
         "pipeline", {"pipeline": 2, "tensor": 2}),
        ("Trainer, data 2 x tensor 2, save_all_ranks", "allranks", 4,
         "trainer", {"tensor": 2, "all_ranks": True}),
    ]
    tensor_ckpt = None
    for what, name, world, kind, kw in layouts:
        codes, ckpt, dumps = launch(tmp, name, world, kind, **kw)
        nfiles = len(manifest_files(ckpt)) if os.path.exists(
            os.path.join(ckpt, "copus.manifest")) else 0
        check(codes == [0] * world and nfiles > 0,
              "%s: trains, checkpoints step %d in %d file(s) (exit %s)"
              % (what, STEPS, nfiles, codes))
        if codes == [0] * world and nfiles > 0:
            loads_and_equals_the_ranks(what, ckpt, dumps)
        if name == "tensor" and codes == [0] * world:
            tensor_ckpt = ckpt
    if tensor_ckpt is None:
        print("%d check(s) failed; the files are in %s"
              % (len(failures), tmp))
        return 1
    # The command, without libcopus, writes a file that torch.load reads
    # back as the same state_dict.
    import copus_merge
    out = os.path.join(tmp, "tensor.pt")
    p = subprocess.run([sys.executable, "-m", "copus_merge", tensor_ckpt,
                        out, "--step", str(STEPS)],
                       env=command_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    want = copus_merge.merge(tensor_ckpt)
    got = torch.load(out) if os.path.exists(out) else {}
    check(p.returncode == 0 and "step %d" % STEPS in p.stdout and
          p.stdout.count("\n") == 1 and list(got) == list(want) and
          all(torch.equal(got[k], want[k]) for k in want),
          "the command writes OUT.pt, the merged state_dict, and says so in "
          "one line (%d: %s)" % (p.returncode,
                                 (p.stdout + p.stderr).strip()))
    refusals(tmp, tensor_ckpt)
    if failures:
        print("%d check(s) failed; the files are in %s"
              % (len(failures), tmp))
        return 1
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "worker":
        worker(json.loads(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "run":
        sys.exit(run())
    else:
        print("usage: test_pytorch_merge.py run", file=sys.stderr)
        sys.exit(2)
