"""PyTorch adapter for libcopus (ctypes; no compiled extension).

It hooks a model wrapped in DistributedDataParallel (or a plain model on one
process) and does for the training loop what libcopus needs:

- per-micro-batch squared norms of the local gradient (from the change of
  .grad after each micro-batch; for the last micro-batch, inside a DDP
  communication hook, before the all-reduce) and the squared norm of the
  synchronised gradient,
- step timing, with the all-reduce reported as synchronisation time,
- the batch size, micro-batch and accumulation steps of the plan, and the
  learning-rate gain (AdaScale's for SGD, its square root for Adam),
- save and load of the model, the optimizer, the data position and the
  runtime's own state, and the exit with the requeue code on a rescale.

Usage:

    trainer = copus_torch.Trainer(model, optimizer, loss_fn, data,
                                  init_batch=64, max_batch=1024,
                                  min_local=8, max_local=256,
                                  ckpt_dir="/scratch/run1")
    while trainer.step < 1000:
        loss = trainer.train_step()

`data` is any object with `next_batch(n)` returning (inputs, targets) and
`state_dict()` / `load_state_dict()` for its position; GlobalSampler is one
that resumes at the same global sample on any number of replicas. To run
the backward pass yourself (a loss scaler, clipping), see Trainer's
micro_batches() and optimizer_step(). PipelineTrainer trains an
nn.Sequential in the plan's pipeline stages and data-parallel replicas, and
reshards its checkpoints when a job restarts under another layout. Trainer
also trains models of copus_tensor's tensor-parallel layers (pass
tensor_degree), and reshards their slices when the tensor degree changes.
The library is found through $COPUS_LIB, then the system's library path
(libcopus.so.0 when ldconfig's cache does not list it).
"""

import collections
import ctypes
import ctypes.util
import os
import sys

import torch
import torch.distributed as dist

COPUS_OK = 0
COPUS_ENODATA = -3
# The values of a step boundary's agreement (COPUS_AGREE_LEN in copus.h).
AGREE_LEN = 48
STATE_RUNNING, STATE_CHECKPOINTING, STATE_CHECKPOINTED = 0, 1, 2
OPT_SGD, OPT_ADAM = 0, 1


class CopusError(RuntimeError):
    pass


class BatchLimits(ctypes.Structure):
    _fields_ = [("init_batch", ctypes.c_double),
                ("max_batch", ctypes.c_double),
                ("min_local", ctypes.c_int),
                ("max_local", ctypes.c_int),
                ("accumulation", ctypes.c_bool)]


class PerfParams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_double) for n in
                ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r",
                 "beta_r", "gamma")]


class GradStats(ctypes.Structure):
    _fields_ = [("sqr", ctypes.c_double), ("var", ctypes.c_double)]


# The attribute of a parameter that is a slice of a tensor-parallel weight
# (copus_tensor): (the dimension split, its TensorParallel).
SPLIT_ATTR = "copus_tensor_split"

SAVE_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                           ctypes.c_int64)
LOAD_CB = SAVE_CB
AGREE_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                            ctypes.POINTER(ctypes.c_int64), ctypes.c_int)
BCAST_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_size_t)
PUBLISH_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)


class Layout(ctypes.Structure):
    _fields_ = [("data", ctypes.c_int), ("tensor", ctypes.c_int),
                ("pipeline", ctypes.c_int)]


class Shard(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p),
                ("pipeline_rank", ctypes.c_int),
                ("tensor_rank", ctypes.c_int),
                ("first_layer", ctypes.c_int),
                ("n_layers", ctypes.c_int)]


# A shard of a checkpoint as a reshard callback sees it: its file (None
# when this rank needs none of it), its stage and slice, its layers.
ShardFile = collections.namedtuple(
    "ShardFile", "path pipeline_rank tensor_rank first_layer n_layers")

RESHARD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.POINTER(Layout), ctypes.POINTER(Layout),
                              ctypes.POINTER(Shard), ctypes.POINTER(Shard),
                              ctypes.c_int)


class PlannerDesc(ctypes.Structure):
    # copus_planner_desc of include/copus/planner.h: a model the planner
    # describes (arch 1 transformer, 2 MoE, 3 Wide-ResNet).
    _fields_ = [(n, ctypes.c_int) for n in
                ("arch", "dtype_bytes", "layers", "hidden", "heads",
                 "seq_len", "vocab", "experts", "expert_group", "depth",
                 "width_factor", "channels", "classes", "image_size")]


ARCHS = {"tf": 1, "transformer": 1, "moe": 2, "wrn": 3, "wide_resnet": 3}


def planner_desc(model):
    """A PlannerDesc from a dict of copus_planner_desc's fields; "arch" may
    be a name ("tf", "moe", "wrn") or the enum's number."""
    fields = dict(model)
    arch = fields.pop("arch")
    d = PlannerDesc()
    d.arch = ARCHS[arch] if isinstance(arch, str) else int(arch)
    for k, v in fields.items():
        if k not in dict(PlannerDesc._fields_):
            raise CopusError("model: unknown field %r" % k)
        setattr(d, k, int(v))
    return d


class PlannerPlan(ctypes.Structure):
    # copus_planner_plan of include/copus/planner.h (64 stages at most).
    _fields_ = [("data", ctypes.c_int), ("pipeline", ctypes.c_int),
                ("tensor", ctypes.c_int),
                ("micro_batches", ctypes.c_int),
                ("data_inner", ctypes.c_int),
                ("first_layer", ctypes.c_int * 65),
                ("seconds", ctypes.c_double),
                ("compute_s", ctypes.c_double),
                ("tensor_s", ctypes.c_double),
                ("pipeline_s", ctypes.c_double),
                ("data_s", ctypes.c_double),
                ("overhead_s", ctypes.c_double),
                ("memory_bytes", ctypes.c_double)]

    def stages(self):
        """The first layer of every stage and the end."""
        return list(self.first_layer[:self.pipeline + 1])


class Config(ctypes.Structure):
    # The layout of copus_config in include/copus/copus.h, field by field.
    _fields_ = [("size", ctypes.c_size_t),
                ("magic", ctypes.c_uint32),
                ("version", ctypes.c_uint32),
                ("limits", BatchLimits),
                ("optimizer", ctypes.c_int),
                ("prior", PerfParams),
                ("target_progress", ctypes.c_double),
                ("rank", ctypes.c_int),
                ("world", ctypes.c_int),
                ("local_rank", ctypes.c_int),
                ("nodes", ctypes.c_int),
                ("gpus_per_node", ctypes.c_int),
                ("gpu_type", ctypes.c_char_p),
                ("pipeline_degree", ctypes.c_int),
                ("tensor_degree", ctypes.c_int),
                ("layer_costs", ctypes.POINTER(ctypes.c_double)),
                ("n_layers", ctypes.c_int),
                ("ckpt_dir", ctypes.c_char_p),
                ("save_all_ranks", ctypes.c_int),
                ("save", SAVE_CB),
                ("load", LOAD_CB),
                ("cb_arg", ctypes.c_void_p),
                ("agree", AGREE_CB),
                ("bcast", BCAST_CB),
                ("comm_arg", ctypes.c_void_p),
                ("publish", PUBLISH_CB),
                ("publish_arg", ctypes.c_void_p),
                ("hint_interval", ctypes.c_double),
                ("rescale_signal", ctypes.c_int),
                ("exit_code", ctypes.c_int),
                ("exit_on_rescale", ctypes.c_int),
                ("agree_interval", ctypes.c_int),
                ("noise_decay", ctypes.c_double),
                ("no_signal_handler", ctypes.c_int),
                ("ckpt_interval", ctypes.c_double),
                ("reshard", RESHARD_CB),
                ("model", ctypes.POINTER(PlannerDesc))]


class JobInfo(ctypes.Structure):
    _fields_ = [("job_id", ctypes.c_uint32),
                ("restart_count", ctypes.c_int),
                ("nodes", ctypes.c_int),
                ("world", ctypes.c_int),
                ("rank", ctypes.c_int),
                ("local_rank", ctypes.c_int),
                ("gpus_per_node", ctypes.c_int),
                ("restored", ctypes.c_int),
                ("step", ctypes.c_int64),
                ("progress", ctypes.c_double),
                ("samples", ctypes.c_int64)]


class Plan(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_double),
                ("local", ctypes.c_int),
                ("accum_steps", ctypes.c_int),
                ("lr_gain", ctypes.c_double),
                ("efficiency", ctypes.c_double),
                ("throughput", ctypes.c_double),
                ("goodput", ctypes.c_double),
                ("data_degree", ctypes.c_int),
                ("pipeline_degree", ctypes.c_int),
                ("tensor_degree", ctypes.c_int),
                ("data_rank", ctypes.c_int),
                ("pipeline_rank", ctypes.c_int),
                ("tensor_rank", ctypes.c_int),
                ("first_layer", ctypes.c_int),
                ("n_layers", ctypes.c_int)]


class Degrees(ctypes.Structure):
    # copus_plan_degrees of copus/plan.h
    _fields_ = [("data", ctypes.c_int), ("pipeline", ctypes.c_int),
                ("tensor", ctypes.c_int)]


class Coords(ctypes.Structure):
    # copus_plan_coords of copus/plan.h
    _fields_ = [(n, ctypes.c_int) for n in
                ("data_rank", "pipeline_rank", "tensor_rank", "data_group",
                 "pipeline_group", "tensor_group")]


def coords_of_rank(data, pipeline, tensor, rank):
    """Where rank stands in a layout: the core's numbering of ranks."""
    out = Coords()
    d = Degrees(data, pipeline, tensor)
    if library().copus_plan_coords_of_rank(ctypes.byref(d), rank,
                                           ctypes.byref(out)) != COPUS_OK:
        raise CopusError("rank %d is not in data %d x pipeline %d x tensor %d"
                         % (rank, data, pipeline, tensor))
    return out


_lib = None


def library():
    """Load libcopus once: $COPUS_LIB, else the system's library path."""
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("COPUS_LIB") or ctypes.util.find_library("copus")
    if not path:
        # The runtime package's soname, for a library path that ldconfig's
        # cache does not list.
        path = "libcopus.so.0"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise CopusError("libcopus not found (%s): set COPUS_LIB to "
                         "libcopus.so" % e) from e
    P = ctypes.c_void_p
    sigs = {
        "copus_config_init": [ctypes.POINTER(Config), ctypes.c_size_t],
        "copus_init": [ctypes.POINTER(Config), ctypes.POINTER(P)],
        "copus_finalize": [P],
        "copus_info": [P, ctypes.POINTER(JobInfo)],
        "copus_step_begin": [P],
        "copus_sync_begin": [P],
        "copus_sync_end": [P],
        "copus_grad_local": [P, ctypes.c_double],
        "copus_grad_total": [P, ctypes.c_double],
        "copus_grad_dot": [P, ctypes.c_double],
        "copus_step_end": [P, ctypes.c_int, ctypes.c_int],
        "copus_grad_stats_get": [P, ctypes.POINTER(GradStats)],
        "copus_plan_get": [P, ctypes.POINTER(Plan)],
        "copus_planned": [P, ctypes.POINTER(PlannerPlan)],
        "copus_publish": [P],
        "copus_request_rescale": [P],
        "copus_checkpoint": [P],
        "copus_state": [P, ctypes.POINTER(ctypes.c_int)],
        "copus_exit_code": [P, ctypes.POINTER(ctypes.c_int)],
        "copus_agree_pack": [P, ctypes.POINTER(ctypes.c_double), ctypes.c_int],
        "copus_agree_unpack": [P, ctypes.POINTER(ctypes.c_double),
                               ctypes.c_int],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.copus_plan_coords_of_rank.argtypes = [ctypes.POINTER(Degrees),
                                              ctypes.c_int,
                                              ctypes.POINTER(Coords)]
    lib.copus_plan_coords_of_rank.restype = ctypes.c_int
    lib.copus_errmsg.argtypes = [P]
    lib.copus_errmsg.restype = ctypes.c_char_p
    lib.copus_strerror.argtypes = [ctypes.c_int]
    lib.copus_strerror.restype = ctypes.c_char_p
    _lib = lib
    return lib


class Runtime:
    """The libcopus context of this process, with Python callbacks."""

    def __init__(self, init_batch, max_batch, min_local, max_local,
                 accumulation=True, optimizer=OPT_SGD, ckpt_dir=None,
                 save=None, load=None, target_progress=0.0,
                 noise_decay=0.0, hint_interval=0.0, publish=None,
                 gpu_type=None, agree_interval=1, ckpt_interval=0.0,
                 prior=None, pipeline_degree=1, tensor_degree=1,
                 layer_costs=None, reshard=None, model=None):
        lib = library()
        self._lib = lib
        cfg = Config()
        self._check(lib.copus_config_init(ctypes.byref(cfg),
                                          ctypes.sizeof(cfg)),
                    "copus_config_init (does copus_torch match libcopus?)")
        cfg.limits = BatchLimits(init_batch, max_batch, min_local, max_local,
                                 accumulation)
        cfg.optimizer = optimizer
        if prior is not None:
            # Throughput parameters known in advance (alpha_c, beta_c,
            # alpha_n, beta_n, alpha_r, beta_r, gamma).
            cfg.prior = PerfParams(*prior)
        cfg.target_progress = target_progress
        cfg.pipeline_degree = pipeline_degree
        cfg.tensor_degree = tensor_degree
        if layer_costs:
            self._costs = (ctypes.c_double * len(layer_costs))(*layer_costs)
            cfg.layer_costs = self._costs
            cfg.n_layers = len(layer_costs)
        if model is not None:
            # The model travels in the hints; with pipeline_degree =
            # tensor_degree = 0 the planner chooses the degrees and stages
            # (planned()).
            self._model = planner_desc(model)
            cfg.model = ctypes.pointer(self._model)
        cfg.noise_decay = noise_decay
        cfg.hint_interval = hint_interval
        # Steps between two all-reduces of the rescale flag (gloo/NCCL).
        cfg.agree_interval = agree_interval
        # Seconds between periodic checkpoints (0: $COPUS_CKPT_INTERVAL).
        cfg.ckpt_interval = ckpt_interval
        # The adapter leaves the process itself, after tearing down torch.
        cfg.exit_on_rescale = 0
        if dist.is_available() and dist.is_initialized():
            cfg.rank = dist.get_rank()
            cfg.world = dist.get_world_size()
        self._keep = []
        if gpu_type:
            self._keep.append(gpu_type.encode())
            cfg.gpu_type = self._keep[-1]
        if ckpt_dir:
            self._keep.append(os.fsencode(ckpt_dir))
            cfg.ckpt_dir = self._keep[-1]
        self._save, self._load = save, load
        # ctypes callbacks must outlive the context: keep references.
        self._cbs = [SAVE_CB(self._on_save), LOAD_CB(self._on_load),
                     AGREE_CB(self._on_agree)]
        cfg.save, cfg.load, cfg.agree = self._cbs
        if reshard is not None:
            self._reshard = reshard
            self._cbs.append(RESHARD_CB(self._on_reshard))
            cfg.reshard = self._cbs[-1]
        if publish is not None:
            self._publish = publish
            self._cbs.append(PUBLISH_CB(self._on_publish))
            cfg.publish = self._cbs[-1]
        self.error = None
        # Calls of the agree callback (all-reduces of the runtime's own).
        self.agree_calls = 0
        self.ctx = ctypes.c_void_p()
        rc = lib.copus_init(ctypes.byref(cfg), ctypes.byref(self.ctx))
        if rc != COPUS_OK:
            # The context is gone: libcopus keeps the reason per thread.
            why = lib.copus_errmsg(None).decode()
            raise CopusError("copus_init: %s%s" % (
                why, " (%s)" % self.error if self.error else ""))

    def _check(self, rc, what):
        if rc != COPUS_OK:
            msg = self._lib.copus_errmsg(self.ctx).decode() \
                if getattr(self, "ctx", None) else \
                self._lib.copus_strerror(rc).decode()
            raise CopusError("%s: %s" % (what, msg))
        return rc

    # Callbacks from C: never let an exception cross into C.
    def _on_save(self, arg, path, step):
        try:
            self._save(os.fsdecode(path), step)
            return 0
        except Exception as e:  # noqa: BLE001
            self.error = "save: %r" % (e,)
            print("copus_torch: %s" % self.error, file=sys.stderr)
            return 1

    def _on_load(self, arg, path, step):
        try:
            self._load(os.fsdecode(path), step)
            return 0
        except Exception as e:  # noqa: BLE001
            self.error = "load: %r" % (e,)
            print("copus_torch: %s" % self.error, file=sys.stderr)
            return 1

    def _on_reshard(self, arg, step, old, now, mine, shards, n):
        try:
            lay = lambda l: (l.data, l.tensor, l.pipeline)  # noqa: E731

            def shard(s):
                return ShardFile(os.fsdecode(s.path) if s.path else None,
                                 s.pipeline_rank, s.tensor_rank,
                                 s.first_layer, s.n_layers)
            self._reshard(step, lay(old[0]), lay(now[0]), shard(mine[0]),
                          [shard(shards[i]) for i in range(n)])
            return 0
        except Exception as e:  # noqa: BLE001
            self.error = "reshard: %r" % (e,)
            print("copus_torch: %s" % self.error, file=sys.stderr)
            return 1

    def _on_agree(self, arg, values, n):
        self.agree_calls += 1
        try:
            t = torch.tensor([values[i] for i in range(n)], dtype=torch.int64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            for i in range(n):
                values[i] = int(t[i])
            return 0
        except Exception as e:  # noqa: BLE001
            print("copus_torch: agree: %r" % (e,), file=sys.stderr)
            return 1

    def _on_publish(self, arg, hint):
        try:
            self._publish(hint.decode())
            return 0
        except Exception:  # noqa: BLE001
            return 1

    def info(self):
        out = JobInfo()
        self._check(self._lib.copus_info(self.ctx, ctypes.byref(out)),
                    "copus_info")
        return out

    def plan(self):
        out = Plan()
        self._check(self._lib.copus_plan_get(self.ctx, ctypes.byref(out)),
                    "copus_plan_get")
        return out

    def planned(self):
        """The planner's plan (a PlannerPlan: degrees, micro_batches,
        data_inner, stages()), or None when the job chose its degrees."""
        out = PlannerPlan()
        rc = self._lib.copus_planned(self.ctx, ctypes.byref(out))
        if rc == COPUS_ENODATA:
            return None
        self._check(rc, "copus_planned")
        return out

    def grad_stats(self):
        out = GradStats()
        rc = self._lib.copus_grad_stats_get(self.ctx, ctypes.byref(out))
        if rc == COPUS_ENODATA:
            return None
        self._check(rc, "copus_grad_stats_get")
        return out

    def state(self):
        out = ctypes.c_int()
        self._check(self._lib.copus_state(self.ctx, ctypes.byref(out)),
                    "copus_state")
        return out.value

    def exit_code(self):
        out = ctypes.c_int()
        self._check(self._lib.copus_exit_code(self.ctx, ctypes.byref(out)),
                    "copus_exit_code")
        return out.value

    def step_begin(self):
        self._check(self._lib.copus_step_begin(self.ctx), "copus_step_begin")

    def sync_begin(self):
        self._check(self._lib.copus_sync_begin(self.ctx), "copus_sync_begin")

    def sync_end(self):
        self._check(self._lib.copus_sync_end(self.ctx), "copus_sync_end")

    def grad_local(self, sq):
        self._check(self._lib.copus_grad_local(self.ctx, sq),
                    "copus_grad_local")

    def grad_total(self, sq):
        self._check(self._lib.copus_grad_total(self.ctx, sq),
                    "copus_grad_total")

    def grad_dot(self, dot):
        self._check(self._lib.copus_grad_dot(self.ctx, dot), "copus_grad_dot")

    def step_end(self, local, accum_steps):
        self._check(self._lib.copus_step_end(self.ctx, local, accum_steps),
                    "copus_step_end")

    def request_rescale(self):
        self._check(self._lib.copus_request_rescale(self.ctx),
                    "copus_request_rescale")

    def agree_pack(self, out):
        """This rank's values of the step's agreement, to be summed over
        all ranks (with the gradients), into out: a contiguous float64
        tensor of AGREE_LEN values."""
        ptr = ctypes.cast(out.data_ptr(), ctypes.POINTER(ctypes.c_double))
        self._check(self._lib.copus_agree_pack(self.ctx, ptr, AGREE_LEN),
                    "copus_agree_pack")

    def agree_unpack(self, sums):
        """The sums over all ranks: a contiguous float64 tensor."""
        ptr = ctypes.cast(sums.data_ptr(), ctypes.POINTER(ctypes.c_double))
        self._check(self._lib.copus_agree_unpack(self.ctx, ptr, AGREE_LEN),
                    "copus_agree_unpack")

    def checkpoint(self):
        self._check(self._lib.copus_checkpoint(self.ctx), "copus_checkpoint")

    def finalize(self):
        if self.ctx:
            self._lib.copus_finalize(self.ctx)
            self.ctx = ctypes.c_void_p()


def _sqnorm(tensors, weights=None):
    """Sum of squared entries, tensor i's weighted by weights[i]: one BLAS
    dot per tensor, one sync in all."""
    total = None
    for i, t in enumerate(tensors):
        v = t.detach().reshape(-1)
        d = torch.dot(v, v)
        if weights is not None and weights[i] != 1.0:
            d = d * weights[i]
        total = d if total is None else total + d
    return 0.0 if total is None else float(total)


def _reslice(pieces, old_degree, new_degree, rank, dim):
    """Slice rank of new_degree of a tensor split along dim, from the
    slices {old rank: tensor} of old_degree that overlap it."""
    size = next(iter(pieces.values())).shape[dim]
    full = size * old_degree
    if full % new_degree:
        raise CopusError("a dimension of %d does not split over tensor "
                         "degree %d" % (full, new_degree))
    n = full // new_degree
    lo, hi = rank * n, (rank + 1) * n
    out = []
    for j in range(old_degree):
        a, b = max(lo, j * size), min(hi, (j + 1) * size)
        if a < b:
            if j not in pieces:
                raise CopusError("tensor slice %d of %d is in none of the "
                                 "shards read" % (j, old_degree))
            out.append(pieces[j].narrow(dim, a - j * size, b - a))
    return torch.cat(out, dim).clone()


class GlobalSampler:
    """A data set's samples in one global order, split among the data-
    parallel replicas, resumable at the same global sample on any number
    of replicas.

    Every replica calls next_batch(n) in step: each call takes the next
    replicas x n samples of the global order, and replica r gets the r-th
    n of them. The position counts global samples, so that the samples of
    an optimizer step depend only on its global batch, not on how it was
    split; state_dict() holds the position, and a job restarted on another
    number of replicas resumes at the same global sample. The order is a
    permutation of the data set per epoch, drawn from seed (shuffle) or
    the identity. dataset[i] returns (input, target) tensors; collate
    makes a batch of a list of them (default: stack each).
    """

    def __init__(self, dataset, replica=None, replicas=None, seed=0,
                 shuffle=True, collate=None):
        if replicas is None:
            on = dist.is_available() and dist.is_initialized()
            replicas = dist.get_world_size() if on else 1
            replica = dist.get_rank() if on else 0
        if not 0 <= replica < replicas:
            raise CopusError("GlobalSampler: replica %r is not in [0, %r)"
                             % (replica, replicas))
        self.dataset = dataset
        self.replica, self.replicas = replica, replicas
        self.seed, self.shuffle = seed, shuffle
        self.collate = collate or (lambda items: tuple(
            torch.stack(list(col)) for col in zip(*items)))
        self.pos = 0
        self._perm_epoch, self._perm = None, None

    def _order(self, epoch):
        if self._perm_epoch != epoch:
            n = len(self.dataset)
            if self.shuffle:
                g = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
                self._perm = torch.randperm(n, generator=g).tolist()
            else:
                self._perm = list(range(n))
            self._perm_epoch = epoch
        return self._perm

    def global_indices(self, start, count):
        """The data set indices of global samples start .. start+count-1."""
        n = len(self.dataset)
        out = []
        for g in range(start, start + count):
            out.append(self._order(g // n)[g % n])
        return out

    def indices(self, n):
        """This replica's indices of the next call, without taking them."""
        return self.global_indices(self.pos + self.replica * n, n)

    def next_batch(self, n):
        idx = self.indices(n)
        self.pos += n * self.replicas
        return self.collate([self.dataset[i] for i in idx])

    def state_dict(self):
        return {"pos": self.pos, "seed": self.seed, "shuffle": self.shuffle}

    def load_state_dict(self, s):
        if s.get("seed", self.seed) != self.seed or \
                s.get("shuffle", self.shuffle) != self.shuffle:
            raise CopusError("GlobalSampler: the checkpoint's order (seed %r, "
                             "shuffle %r) is not this sampler's (%r, %r)"
                             % (s.get("seed"), s.get("shuffle"), self.seed,
                                self.shuffle))
        self.pos = int(s["pos"])


class Trainer:
    """One optimizer step at a time, planned and measured by libcopus.

    train_step() runs a whole step. To run the backward pass yourself
    (a GradScaler, gradient clipping, a custom loss), iterate over
    micro_batches() and finish with optimizer_step():

        for x, y in trainer.micro_batches():
            loss = loss_fn(model(x), y) / trainer.n_micro
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        trainer.optimizer_step(lambda: scaler.step(optimizer))
        scaler.update()

    Each micro-batch's loss is divided by n_micro, so that .grad ends as
    the mean. With a loss scaler, pass it as grad_scaler: the gradients
    are measured before your unscaling and clipping, divided by its scale.

    A model of copus_tensor's layers (tensor_degree=tp.degree, DDP over
    tp.data_group when there are several replicas): each tensor rank
    checkpoints its own slices, and a checkpoint of another tensor degree
    is cut and joined again by position, optimizer state included.
    """

    def __init__(self, model, optimizer, loss_fn, data, init_batch,
                 max_batch, min_local, max_local, accumulation=True,
                 ckpt_dir=None, optimizer_kind=OPT_SGD, replan_every=0,
                 grad_stats=True, stats_every=1, on_rescale=None,
                 grad_scaler=None, fold_agreement=True, **runtime_args):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.data = data
        self.grad_stats = grad_stats
        self.grad_scaler = grad_scaler
        # Gradient norms on every stats_every-th step only: they cost a few
        # passes over the gradients per micro-batch.
        self.stats_every = max(1, int(stats_every))
        self._measure = grad_stats
        self._calls = 0
        self.replan_every = replan_every
        # Called with the checkpointed step just before the process exits.
        self.on_rescale = on_rescale
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.ddp = isinstance(model,
                              torch.nn.parallel.DistributedDataParallel)
        # The replicas average their gradients in DDP's process group: the
        # world, or the data group of a tensor-parallel model.
        self._group = model.process_group if self.ddp else None
        self._replicas = dist.get_world_size(self._group) if self.ddp else 1
        # The step's agreement travels with the gradients' all-reduce when
        # that reaches every rank.
        self.fold_agreement = fold_agreement and self.ddp and \
            self._replicas == dist.get_world_size()
        # Slices of tensor-parallel weights (copus_tensor): each rank holds
        # its slice's gradient and the whole of the others, so a squared
        # norm sums the slices over the tensor group and counts the others
        # once.
        self._split = {id(p): getattr(p, SPLIT_ATTR) for p in self.params
                       if hasattr(p, SPLIT_ATTR)}
        self._tp = next(iter(self._split.values()))[1] if self._split \
            else None
        self._weights = None
        if self._tp is not None and self._tp.group is not None:
            self._weights = {id(p): 1.0 if id(p) in self._split
                             else 1.0 / self._tp.degree
                             for p in self.params}
        if self._split:
            runtime_args.setdefault("reshard", self._reshard_state)
        self._agree_sums = None
        self._agree_out = torch.zeros(AGREE_LEN, dtype=torch.float64)
        self._in_step = False
        self._prev = None       # accumulated .grad before the last micro-batch
        self._hook_sq = 0.0     # local squared norm of the last micro-batch
        self._scratch = {}
        self._pair_prev = None  # the previous step's gradient (one process)
        self._scale = 1.0
        self.n_micro = 1
        self.rt = Runtime(init_batch, max_batch, min_local, max_local,
                          accumulation=accumulation,
                          optimizer=optimizer_kind, ckpt_dir=ckpt_dir,
                          save=self._save_state, load=self._load_state,
                          **runtime_args)
        if self.ddp:
            self.model.register_comm_hook(self, Trainer._comm_hook)
        self.plan = self.rt.plan()
        if self._tp is not None and \
                (self._tp.degree, self._tp.rank) != (self.plan.tensor_degree,
                                                     self.plan.tensor_rank):
            raise CopusError("Trainer: the model is slice %d of tensor "
                             "degree %d; the plan makes this rank slice %d "
                             "of %d (pass tensor_degree)"
                             % (self._tp.rank, self._tp.degree,
                                self.plan.tensor_rank,
                                self.plan.tensor_degree))

    @property
    def step(self):
        return self.rt.info().step

    def _pair_step(self):
        """This step's and the previous step's gradients as two estimates
        of the same gradient (the model moves little in one step): libcopus
        pairs them from the squared norm and their dot product."""
        cur = [p.grad.detach() for p in self.params]
        prev = self._pair_prev
        k = self._scale * self._scale
        w = self._weights_of(self.params)
        self.rt.grad_local(self._tensor_sum(_sqnorm(cur, w)) * k)
        if prev is not None:
            dot = None
            for i, (c, q) in enumerate(zip(cur, prev)):
                d = torch.dot(c.reshape(-1), q.reshape(-1))
                if w is not None:
                    d = d * w[i]
                dot = d if dot is None else dot + d
            if dot is not None:
                self.rt.grad_dot(self._tensor_sum(float(dot)) * k)
        prev = self._buffers("pair", cur)
        for q, c in zip(prev, cur):
            q.copy_(c)
        self._pair_prev = prev

    def _weights_of(self, params):
        """The weights of params' squared norms (None: all 1)."""
        if self._weights is None:
            return None
        return [self._weights[id(p)] for p in params]

    def _tensor_sum(self, x):
        """x summed over the tensor group: a squared norm of the whole
        model from its slices'."""
        if self._weights is None:
            return x
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, group=self._tp.group)
        return float(t[0])

    def _buffers(self, name, like):
        """Gradient-shaped scratch tensors, allocated once."""
        bufs = self._scratch.get(name)
        if bufs is None or len(bufs) != len(like):
            bufs = [torch.empty_like(t) for t in like]
            self._scratch[name] = bufs
        return bufs

    # -- checkpoint -------------------------------------------------------
    def _save_state(self, path, step):
        module = self.model.module if self.ddp else self.model
        state = {"model": module.state_dict(),
                 "optimizer": self.optimizer.state_dict(),
                 "data": self.data.state_dict(),
                 "rng": torch.get_rng_state(),
                 "step": step}
        if self._split:
            # Which entries are slices, and along which dimension: by name
            # in the model, by index in the optimizer's state.
            params = [q for g in self.optimizer.param_groups
                      for q in g["params"]]
            state["tensor"] = {
                "degree": self._tp.degree, "rank": self._tp.rank,
                "model": {n: self._split[id(q)][0]
                          for n, q in module.named_parameters()
                          if id(q) in self._split},
                "optimizer": {i: self._split[id(q)][0]
                              for i, q in enumerate(params)
                              if id(q) in self._split}}
        torch.save(state, path)

    def _read_state(self, path, step):
        state = torch.load(path)
        if state["step"] != step:
            raise CopusError("checkpoint %s holds step %d, manifest says %d"
                             % (path, state["step"], step))
        return state

    def _load_state(self, path, step):
        self._apply_state(self._read_state(path, step))

    def _reshard_state(self, step, old, now, mine, shards):
        """Restore a checkpoint of tensor-parallel slices written under
        another tensor degree: each slice of this rank is cut from the old
        slices that overlap it, joined in order, and so is its optimizer
        state (momentum, moments: the tensors of the parameter's shape)."""
        if old[2] != 1 or now[2] != 1:
            raise CopusError("Trainer: a checkpoint of pipeline stages "
                             "(%d, now %d) is PipelineTrainer's"
                             % (old[2], now[2]))
        saved = {s.tensor_rank: self._read_state(s.path, step)
                 for s in shards if s.path is not None}
        first = saved[min(saved)]
        split = first.get("tensor")
        if split is None or split["degree"] != old[1]:
            raise CopusError("Trainer: the checkpoint of step %d holds no "
                             "slices of tensor degree %d" % (step, old[1]))
        cut = lambda parts, dim: _reslice(  # noqa: E731
            parts, old[1], now[1], mine.tensor_rank, dim)
        model = dict(first["model"])
        for n, dim in split["model"].items():
            model[n] = cut({j: s["model"][n] for j, s in saved.items()}, dim)
        opt = first["optimizer"]
        state = {}
        for i, entry in opt["state"].items():
            dim = split["optimizer"].get(i)
            state[i] = {k: cut({j: s["optimizer"]["state"][i][k]
                                for j, s in saved.items()}, dim)
                        if dim is not None and torch.is_tensor(v) and
                        v.dim() > dim else v for k, v in entry.items()}
        self._apply_state(dict(first, model=model, optimizer=dict(
            opt, state=state)))

    def _apply_state(self, state):
        module = self.model.module if self.ddp else self.model
        module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.data.load_state_dict(state["data"])
        torch.set_rng_state(state["rng"])

    # -- DDP communication hook: the local gradient before the all-reduce --
    @staticmethod
    def _comm_hook(self, bucket):
        if self._measure and self._in_step:
            grads = bucket.gradients()
            w = self._weights_of(bucket.parameters())
            if self._prev is None:
                sq = _sqnorm(grads, w)
            else:
                prev = self._prev
                sq = _sqnorm((g if prev.get(p.data_ptr()) is None
                              else g - prev[p.data_ptr()]
                              for p, g in zip(bucket.parameters(), grads)), w)
            self._hook_sq += sq * self._scale * self._scale
        buf = bucket.buffer()
        buf.div_(self._replicas)
        if self.fold_agreement and self._in_step and bucket.is_last() and \
                buf.dtype in (torch.float32, torch.float64):
            # The step's agreement rides on the last bucket: no
            # all-reduce of its own.
            n = buf.numel()
            self.rt.agree_pack(self._agree_out)
            fut = dist.all_reduce(torch.cat([buf, self._agree_out.to(
                buf.dtype)]), group=self._group, async_op=True).get_future()

            def split(f):
                t = f.value()[0]
                self._agree_sums = t[n:]
                return t[:n]
            return fut.then(split)
        fut = dist.all_reduce(buf, group=self._group,
                              async_op=True).get_future()

        def done(f):
            return f.value()[0]
        return fut.then(done)

    # -- one optimizer step -----------------------------------------------
    def micro_batches(self):
        """Begin a step and yield its plan.accum_steps + 1 micro-batches of
        plan.local samples (inputs, targets); run forward and backward on
        each before taking the next, then call optimizer_step()."""
        rt, plan = self.rt, self.plan
        local, accum = plan.local, plan.accum_steps
        n_micro = accum + 1
        self.n_micro = n_micro
        # Each micro-batch's loss is scaled so that .grad ends as the mean;
        # a loss scaler's factor is divided out of the measurements.
        scale = 1.0
        if self.grad_scaler is not None:
            scale = float(self.grad_scaler.get_scale())
        self._scale = float(n_micro) / scale
        k_total = 1.0 / (scale * scale)
        # One gradient per step on one process: consecutive steps are the
        # two estimates, so measured steps come in pairs.
        pairs = n_micro == 1 and not self.ddp
        phase = self._calls % self.stats_every
        measure = self.grad_stats and (
            phase == 0 or (pairs and self.stats_every > 1 and phase == 1))
        if not pairs:
            self._pair_prev = None
        self._measure = measure
        self._calls += 1
        rt.step_begin()
        self._in_step = True
        self._agree_sums = None
        self.optimizer.zero_grad(set_to_none=False)
        prev_flat = None
        self._prev = None
        self._hook_sq = 0.0
        k = self._scale * self._scale
        for i in range(n_micro):
            x, y = self.data.next_batch(local)
            last = i == accum
            if self.ddp and not last:
                with self.model.no_sync():
                    yield x, y
            else:
                if last and measure and self.ddp and accum > 0:
                    self._prev = {p.data_ptr(): p.grad.detach().clone()
                                  for p in self.params}
                yield x, y
            if measure and pairs:
                pass
            elif measure and not (self.ddp and last):
                # The micro-batch's own gradient: the change of .grad.
                cur = [p.grad.detach() for p in self.params]
                w = self._weights_of(self.params)
                if prev_flat is None:
                    sq = _sqnorm(cur, w)
                else:
                    # Into buffers kept across steps: no allocation.
                    diff = self._buffers("diff", cur)
                    for d, c, q in zip(diff, cur, prev_flat):
                        torch.sub(c, q, out=d)
                    sq = _sqnorm(diff, w)
                rt.grad_local(self._tensor_sum(sq) * k)
                if not last:
                    prev_flat = self._buffers("prev", cur)
                    for q, c in zip(prev_flat, cur):
                        q.copy_(c)
        if self.ddp and measure:
            # DDP waited for the all-reduce at the end of backward.
            rt.grad_local(self._tensor_sum(self._hook_sq))
        if measure and pairs:
            self._pair_step()
        elif measure:
            rt.grad_total(self._tensor_sum(_sqnorm(
                (p.grad for p in self.params),
                self._weights_of(self.params))) * k_total)
        elif pairs:
            self._pair_prev = None
        if self._agree_sums is not None:
            rt.agree_unpack(self._agree_sums.to(torch.float64).contiguous())
            self._agree_sums = None

    def optimizer_step(self, step=None):
        """End the step: the optimizer's step (or step(), e.g.
        lambda: scaler.step(optimizer)) with every group's learning rate
        multiplied by the plan's gain for that call only, so that the
        user's learning-rate schedule stays in charge; then libcopus's
        step end. Exits the process with the requeue code when the
        scheduler asked for a rescale."""
        rt, plan = self.rt, self.plan
        groups = self.optimizer.param_groups
        lrs = [g["lr"] for g in groups]
        for g, lr in zip(groups, lrs):
            g["lr"] = lr * plan.lr_gain
        try:
            if step is None:
                self.optimizer.step()
            else:
                step()
        finally:
            for g, lr in zip(groups, lrs):
                g["lr"] = lr
        self._in_step = False
        rt.step_end(plan.local, plan.accum_steps)
        self.data_advance = plan.local * (plan.accum_steps + 1)
        if rt.state() == STATE_CHECKPOINTED:
            self.exit_for_rescale()
        if self.replan_every and self.step % self.replan_every == 0:
            self.plan = rt.plan()

    def train_step(self):
        """Run one step of plan.local x (plan.accum_steps + 1) samples per
        replica; returns the mean loss. Exits the process with the requeue
        code when the scheduler asked for a rescale."""
        total_loss = 0.0
        for x, y in self.micro_batches():
            loss = self.loss_fn(self.model(x), y) / self.n_micro
            loss.backward()
            total_loss += float(loss)
        self.optimizer_step()
        return total_loss

    def exit_for_rescale(self):
        code = self.rt.exit_code()
        if self.on_rescale is not None:
            self.on_rescale(self.rt.info().step)
        self.rt.finalize()
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class PipelineTrainer:
    """An nn.Sequential trained in the plan's pipeline stages and data-
    parallel replicas, on CPU with gloo (or any backend with send/recv).

    Every rank builds the whole model (the same initial parameters) and
    trains only its stage's layers: micro-batches go forward through the
    stages and their gradients back (GPipe: all forward, then all
    backward), activations by send/recv to the neighbouring stage of the
    same replica; the gradients of a stage are averaged over its replicas
    in one all-reduce. A checkpoint holds each stage's layers and their
    optimizer state by layer number (one file per stage, written by its
    first replica), so that a job restarted under another pipeline degree
    reads the stages that hold its layers (libcopus's reshard).

    A stage may hold copus_tensor's layers (tensor_degree > 1, the layers
    built with TensorParallel(tensor, pipeline)): activations then go to
    the neighbouring stage's rank of the same tensor rank, gradients are
    averaged over the replicas of the same stage and slice, and each slice
    is a shard of its own, cut and joined again under another tensor
    degree as Trainer's are.

    make_optimizer(params) builds the optimizer of a stage's parameters;
    sampler is a GlobalSampler-like object of the replicas (next_batch,
    state_dict, load_state_dict); global_batch samples a step in n_micro
    micro-batches per replica.

    With planner_model (a dict of copus_planner_desc's fields, see
    Runtime) the planner chooses the pipeline and data degrees, the
    micro-batches and each stage's layers, as the scheduler plans the
    job's cells; the Sequential then has the planner's layers of that
    model (its layers + 2 for a transformer), and a plan with tensor
    parallelism is refused (the Sequential's layers are built before the
    plan says its tensor degree).
    """

    def __init__(self, model, make_optimizer, loss_fn, sampler,
                 global_batch, n_micro, ckpt_dir=None, pipeline_degree=1,
                 layer_costs=None, on_rescale=None, tensor_degree=1,
                 planner_model=None, **runtime_args):
        self.layers = list(model)
        self.loss_fn = loss_fn
        self.sampler = sampler
        self.on_rescale = on_rescale
        self._pending = None    # state read by load/reshard, applied below
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        costs = layer_costs or [1.0] * len(self.layers)
        if planner_model is not None:
            # Known once the planner has chosen: the micro-batch.
            self.micro, self.n_micro = 1, 1
            self.rt = Runtime(global_batch, global_batch, 1, global_batch,
                              accumulation=True, ckpt_dir=ckpt_dir,
                              save=self._save_state, load=self._load_state,
                              pipeline_degree=0, tensor_degree=0,
                              model=planner_model,
                              reshard=self._reshard_state, **runtime_args)
            self._use_planned(global_batch)
        else:
            shard = pipeline_degree * tensor_degree
            data = self.world // shard
            if data < 1 or data * shard != self.world or \
                    global_batch % (data * n_micro) != 0:
                raise CopusError("PipelineTrainer: %d ranks, pipeline %d "
                                 "x tensor %d: the global batch %d is not "
                                 "a multiple of data x micro-batches"
                                 % (self.world, pipeline_degree,
                                    tensor_degree, global_batch))
            self.micro = global_batch // (data * n_micro)
            self.n_micro = n_micro
            self.rt = Runtime(global_batch, global_batch, self.micro,
                              self.micro, accumulation=True,
                              ckpt_dir=ckpt_dir, save=self._save_state,
                              load=self._load_state,
                              pipeline_degree=pipeline_degree,
                              tensor_degree=tensor_degree,
                              layer_costs=costs,
                              reshard=self._reshard_state, **runtime_args)
        self.plan = self.rt.plan()
        p = self.plan
        inner = self.planned is not None and self.planned.data_inner
        self.first, self.count = p.first_layer, p.n_layers
        self.stage = torch.nn.Sequential(
            *self.layers[self.first:self.first + self.count])
        self.params = list(self.stage.parameters())
        self.optimizer = make_optimizer(self.params)
        self._names = {id(q): n for n, q in self._named_params()}
        # Slices of tensor-parallel weights (copus_tensor), by name.
        self._split = {n: getattr(q, SPLIT_ATTR)[0]
                       for n, q in self._named_params()
                       if hasattr(q, SPLIT_ATTR)}
        for n, q in self._named_params():
            tp = getattr(q, SPLIT_ATTR, (0, None))[1]
            if tp is not None and (tp.degree, tp.rank) != \
                    (p.tensor_degree, p.tensor_rank):
                raise CopusError("PipelineTrainer: %s is slice %d of tensor "
                                 "degree %d; the plan makes this rank slice "
                                 "%d of %d" % (n, tp.rank, tp.degree,
                                               p.tensor_rank,
                                               p.tensor_degree))

        def rank_of(d, s, t):
            # The planner may lay the data ranks inside the pipeline
            # ranks (data_inner); libcopus's plan follows it.
            if inner:
                return (s * p.data_degree + d) * p.tensor_degree + t
            for r in range(self.world):
                c = coords_of_rank(p.data_degree, p.pipeline_degree,
                                   p.tensor_degree, r)
                if (c.data_rank, c.pipeline_rank, c.tensor_rank) == (d, s, t):
                    return r
        t = p.tensor_rank
        self.prev = rank_of(p.data_rank, p.pipeline_rank - 1, t) \
            if p.pipeline_rank > 0 else None
        self.next = rank_of(p.data_rank, p.pipeline_rank + 1, t) \
            if p.pipeline_rank < p.pipeline_degree - 1 else None
        # Every rank creates every data group (one per stage and tensor
        # slice), in the same order.
        self.group = None
        for s in range(p.pipeline_degree):
            for u in range(p.tensor_degree):
                ranks = [rank_of(d, s, u) for d in range(p.data_degree)]
                g = dist.new_group(ranks) if self.world > 1 else None
                if (s, u) == (p.pipeline_rank, t):
                    self.group = g
        if self._pending is not None:
            self._apply(self._pending)
            self._pending = None

    def _use_planned(self, global_batch):
        """The planner's degrees, micro-batches and stages, checked
        against what this trainer can run."""
        pl = self.planned = self.rt.planned()
        if pl.tensor != 1:
            raise CopusError("PipelineTrainer: the planner chose tensor "
                             "degree %d; the Sequential's layers were "
                             "built without its slices" % pl.tensor)
        if pl.first_layer[pl.pipeline] != len(self.layers):
            raise CopusError("PipelineTrainer: the planner's model has %d "
                             "layers, the Sequential %d"
                             % (pl.first_layer[pl.pipeline],
                                len(self.layers)))
        self.n_micro = pl.micro_batches
        self.micro = global_batch // (pl.data * pl.micro_batches)

    planned = None

    @property
    def step(self):
        return self.rt.info().step

    def _named_params(self):
        for i in range(self.first, self.first + self.count):
            for n, q in self.layers[i].named_parameters():
                yield "%d.%s" % (i, n), q

    # -- checkpoints: layers and optimizer state by layer number ----------
    def _save_state(self, path, step):
        opt = self.optimizer.state_dict()
        by_name = {}
        for i, q in enumerate(self.params):
            if i in opt["state"]:
                by_name[self._names[id(q)]] = opt["state"][i]
        torch.save({"step": step,
                    "layers": {i: self.layers[i].state_dict()
                               for i in range(self.first,
                                              self.first + self.count)},
                    "optim": by_name,
                    "groups": [{k: v for k, v in g.items() if k != "params"}
                               for g in opt["param_groups"]],
                    "split": self._split,
                    "sampler": self.sampler.state_dict()}, path)

    def _read(self, path, step, state):
        saved = torch.load(path)
        if saved["step"] != step:
            raise CopusError("checkpoint %s holds step %d, manifest says %d"
                             % (path, saved["step"], step))
        state["layers"].update(saved["layers"])
        state["optim"].update(saved["optim"])
        state["split"].update(saved.get("split", {}))
        state["groups"] = saved["groups"]
        state["sampler"] = saved["sampler"]

    def _load_state(self, path, step):
        state = {"layers": {}, "optim": {}, "split": {}}
        self._read(path, step, state)
        self._pending = state

    def _reshard_state(self, step, old, now, mine, shards):
        # The stages read, by old tensor slice.
        slices = {}
        for s in shards:
            if s.path is not None:
                self._read(s.path, step, slices.setdefault(
                    s.tensor_rank, {"layers": {}, "optim": {}, "split": {}}))
        first, count = mine.first_layer, mine.n_layers
        missing = [i for i in range(first, first + count)
                   if not slices or
                   any(i not in v["layers"] for v in slices.values())]
        if missing:
            raise CopusError("layers %s are in none of the shards read"
                             % missing)
        # This rank's tensor slices, cut from the old slices that overlap.
        state = slices[min(slices)]
        split = state["split"]
        cut = lambda get, dim: _reslice(  # noqa: E731
            {j: get(v) for j, v in slices.items()}, old[1], now[1],
            mine.tensor_rank, dim)
        for i in range(first, first + count):
            for k in state["layers"][i]:
                dim = split.get("%d.%s" % (i, k))
                if dim is not None:
                    state["layers"][i][k] = cut(
                        lambda v: v["layers"][i][k], dim)
        for n, entry in state["optim"].items():
            dim = split.get(n)
            if dim is not None:
                state["optim"][n] = {
                    k: cut(lambda v: v["optim"][n][k], dim)
                    if torch.is_tensor(x) and x.dim() > dim else x
                    for k, x in entry.items()}
        self._pending = state

    def _apply(self, state):
        for i in range(self.first, self.first + self.count):
            self.layers[i].load_state_dict(state["layers"][i])
        for g, saved in zip(self.optimizer.param_groups, state["groups"]):
            g.update(saved)
        for n, q in self._named_params():
            if n in state["optim"]:
                self.optimizer.state[q] = {
                    k: v.clone() if torch.is_tensor(v) else v
                    for k, v in state["optim"][n].items()}
        self.sampler.load_state_dict(state["sampler"])

    # -- one step: GPipe over the stages, all-reduce over the replicas ----
    def _send(self, t, peer):
        shape = torch.zeros(8, dtype=torch.int64)
        shape[0] = t.dim()
        shape[1:1 + t.dim()] = torch.tensor(t.shape)
        dist.send(shape, peer)
        dist.send(t.contiguous(), peer)

    def _recv(self, peer):
        shape = torch.zeros(8, dtype=torch.int64)
        dist.recv(shape, peer)
        t = torch.empty(*shape[1:1 + int(shape[0])].tolist())
        dist.recv(t, peer)
        return t

    def train_step(self):
        """One optimizer step of the global batch; the mean loss on the
        last stage (None elsewhere). Exits with the requeue code when the
        scheduler asked for a rescale."""
        rt = self.rt
        rt.step_begin()
        for q in self.params:
            q.grad = None
        saved, total = [], 0.0
        for _ in range(self.n_micro):
            x, y = self.sampler.next_batch(self.micro)
            a = x if self.prev is None else self._recv(self.prev)
            a.requires_grad_(self.prev is not None)
            out = self.stage(a)
            if self.next is not None:
                self._send(out.detach(), self.next)
            else:
                out = self.loss_fn(out, y) / self.n_micro
                total += float(out)
            saved.append((a, out))
        for a, out in reversed(saved):
            if self.next is None:
                out.backward()
            else:
                out.backward(self._recv(self.next))
            if self.prev is not None:
                self._send(a.grad, self.prev)
        rt.sync_begin()
        if self.group is not None and self.plan.data_degree > 1:
            grads = [q.grad if q.grad is not None else torch.zeros_like(q)
                     for q in self.params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=self.group)
            flat.div_(self.plan.data_degree)
            off = 0
            for q, g in zip(self.params, grads):
                q.grad = flat[off:off + g.numel()].view_as(g).clone()
                off += g.numel()
        rt.sync_end()
        groups = self.optimizer.param_groups
        lrs = [g["lr"] for g in groups]
        for g, lr in zip(groups, lrs):
            g["lr"] = lr * self.plan.lr_gain
        try:
            self.optimizer.step()
        finally:
            for g, lr in zip(groups, lrs):
                g["lr"] = lr
        rt.step_end(self.micro, self.n_micro - 1)
        if rt.state() == STATE_CHECKPOINTED:
            code = rt.exit_code()
            if self.on_rescale is not None:
                self.on_rescale(rt.info().step)
            rt.finalize()
            if dist.is_initialized():
                dist.destroy_process_group()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return total if self.next is None else None
