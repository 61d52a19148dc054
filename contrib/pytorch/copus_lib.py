"""libcopus from Python (ctypes; no compiled extension): the structures of
include/copus/copus.h and planner.h, the library's loading, and Runtime,
one process's libcopus context with Python callbacks. copus_torch's
Trainer and copus_pipeline's PipelineTrainer are built on it; a training
loop of another framework can use Runtime directly.

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
                ("model", ctypes.POINTER(PlannerDesc)),
                ("fingerprint", ctypes.c_char_p)]


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


def comm_device(group=None):
    """Where a tensor for a collective of group must be: the current CUDA
    device under NCCL, which reduces GPU tensors only; else the CPU."""
    if dist.is_available() and dist.is_initialized() and \
            dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


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
                 layer_costs=None, reshard=None, model=None,
                 fingerprint=None):
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
        if fingerprint is not None:
            # The user's name of the model's configuration: a checkpoint
            # written under another is refused.
            self._fp = str(fingerprint).encode()
            cfg.fingerprint = self._fp
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
            t = torch.tensor([values[i] for i in range(n)], dtype=torch.int64,
                             device=comm_device())
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            t = t.cpu()
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


def module_structure(module):
    """What a checkpoint records of a model's configuration, beyond its
    tensors' shapes: every submodule's class and its plain settings (the
    int, float, bool and str attributes, as an attention layer's head
    count), by the submodule's name."""
    out = {}
    for name, m in module.named_modules():
        fields = {"class": type(m).__qualname__}
        for k, v in sorted(vars(m).items()):
            if k.startswith("_") or k == "training":
                continue
            if isinstance(v, (bool, int, float, str)) or (
                    isinstance(v, tuple) and
                    all(isinstance(x, (bool, int, float, str)) for x in v)):
                fields[k] = v
        out[name or "(model)"] = fields
    return out


def structure_difference(saved, now):
    """The first setting in which two module_structure()s differ, as
    "<module>.<field>: <saved> in the checkpoint, <now> here", or None."""
    for name in sorted(set(saved) | set(now)):
        if name not in now:
            return "%s: in the checkpoint, not in this model" % name
        if name not in saved:
            return "%s: in this model, not in the checkpoint" % name
        a, b = saved[name], now[name]
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return "%s.%s: %r in the checkpoint, %r here" % (
                    name, k, a.get(k, "(absent)"), b.get(k, "(absent)"))
    return None


NONFINITE = ("raise", "skip", "ignore")


class StepLoop:
    """What Trainer and PipelineTrainer share: the state a user registers
    with the checkpoint, the end of a step, non-finite gradients, and the
    end of training.

    A step ends in three parts: the optimizer's step (optimizer_step(), or
    inside train_step()), then the user's own per-step work (the learning-
    rate scheduler's step(), counters, logging), then end_step(): libcopus
    counts the step and, when a checkpoint is due or the scheduler asked
    for a rescale, saves one (the model, the optimizer, the data position
    and every registered object, as they are after the user's work) and on
    a rescale exits with the requeue code. end_step() runs by itself at
    the start of the next step and in close(): call it yourself only to
    end a step earlier.
    """

    def _loop_init(self, nonfinite, grad_scaler=None):
        if nonfinite is None:
            # A loss scaler skips the steps of non-finite gradients itself.
            nonfinite = "ignore" if grad_scaler is not None else "raise"
        if nonfinite not in NONFINITE:
            raise CopusError("nonfinite must be one of %s, not %r"
                             % (", ".join(NONFINITE), nonfinite))
        self.nonfinite = nonfinite
        self.skipped_steps = 0
        self._user = {}
        # Read from a checkpoint, waiting for their objects' register().
        self._user_saved = None
        self._groups_saved = None
        self._end_args = None   # (local, accum_steps) of the step to end
        self._last_step = 0
        self._closed = False

    # -- the user's state ---------------------------------------------------
    def register(self, obj, name=None):
        """Save obj's state_dict() with every checkpoint and restore it with
        load_state_dict(): a learning-rate scheduler, a loss scaler, the
        user's own counters. name (default: obj's class name) identifies
        it in the checkpoint: give the same names in the same job. When
        the job resumed from a checkpoint, obj is restored here, and so
        are the optimizer's hyperparameters (learning rate, momentum) as
        they were saved, whatever a scheduler built after the trainer set
        them to. Returns obj."""
        if not (callable(getattr(obj, "state_dict", None)) and
                callable(getattr(obj, "load_state_dict", None))):
            raise CopusError("register: %r has no state_dict() and "
                             "load_state_dict()" % (obj,))
        name = name or type(obj).__name__
        if name in self._user:
            raise CopusError("register: %r is registered already (give "
                             "each object its own name)" % name)
        self._user[name] = obj
        if self._user_saved is not None:
            if name in self._user_saved:
                obj.load_state_dict(self._user_saved.pop(name))
                self._restore_groups()
            else:
                print("copus_torch: warning: the checkpoint of step %d has "
                      "no state of %r: it starts afresh"
                      % (self.rt.info().step, name), file=sys.stderr)
        return obj

    def _user_state(self):
        return {n: o.state_dict() for n, o in self._user.items()}

    def _keep_user_state(self, user, groups):
        """A checkpoint's registered state and optimizer hyperparameters,
        restored now for the objects registered already, later for the
        others."""
        self._user_saved = dict(user or {})
        self._groups_saved = groups
        for name in list(self._user_saved):
            if name in self._user:
                self._user[name].load_state_dict(self._user_saved.pop(name))

    def _restore_groups(self):
        if self._groups_saved is None:
            return
        for g, saved in zip(self.optimizer.param_groups, self._groups_saved):
            for k, v in saved.items():
                if k != "params":
                    g[k] = v

    def _check_user_claimed(self):
        """Before the first step after a restore: every object whose state
        the checkpoint holds has been registered again."""
        if self._user_saved:
            names = sorted(self._user_saved)
            raise CopusError(
                "the checkpoint of step %d holds the state of %s, which "
                "this run has not registered: register %s before the "
                "first step (trainer.register(obj, name)), or its state "
                "is lost" % (self.rt.info().step, ", ".join(map(repr, names)),
                             "them" if len(names) > 1 else "it"))
        self._user_saved = None

    # -- the end of a step ----------------------------------------------------
    @property
    def step(self):
        """Steps done: the optimizer's steps, the one whose end_step() is
        still to come included."""
        if not self.rt.ctx:
            # Closed: the steps done when it closed.
            return self._last_step
        return self.rt.info().step + (self._end_args is not None)

    def _begin(self):
        """Every step's beginning: the previous step's end."""
        if self._closed:
            raise CopusError("the trainer is closed")
        self.end_step()
        self._check_user_claimed()

    def end_step(self):
        """End the step whose optimizer step is done: libcopus's step end,
        a checkpoint when one is due, the exit with the requeue code on a
        rescale. Does nothing when no step waits for its end."""
        if self._end_args is None:
            if self.rt.ctx:
                self._last_step = self.rt.info().step
            return
        local, accum = self._end_args
        self._end_args = None
        self.rt.step_end(local, accum)
        self._last_step = self.rt.info().step
        if self.rt.state() == STATE_CHECKPOINTED and not self._closed:
            self.exit_for_rescale()
        self._after_end()

    def _after_end(self):
        pass

    def exit_for_rescale(self):
        """Leave the process with the requeue code, its checkpoint done:
        the user's on_rescale, the teardown of close(destroy_process_group
        =True), then os._exit, whatever the first two raise: the
        checkpoint is written, and the job's next run resumes from it."""
        code = self.rt.exit_code()
        try:
            if self.on_rescale is not None:
                self.on_rescale(self.rt.info().step)
        except Exception as e:  # noqa: BLE001
            print("copus_torch: on_rescale: %r" % (e,), file=sys.stderr)
        try:
            self._teardown(destroy=True)
        except Exception as e:  # noqa: BLE001
            print("copus_torch: teardown before the requeue exit: %r"
                  % (e,), file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    # -- non-finite gradients ---------------------------------------------------
    def _finite(self, grads, group=None, also=()):
        """Whether every gradient (and every value of also) is finite on
        every rank of group: a process group, None for the world, False
        for this rank alone."""
        grads = [g for g in grads if g is not None]
        # On the gradients' device: a sum on the GPU is not added into a
        # tensor on the CPU, and NCCL all-reduces GPU tensors only.
        device = grads[0].device if grads else \
            comm_device(group if group is not False else None)
        t = torch.zeros(1, dtype=torch.float64, device=device)
        for g in grads:
            t += g.detach().float().sum().double().abs()
        for v in also:
            t += abs(float(v))
        bad = torch.isfinite(t).logical_not().double()
        if group is not False and dist.is_available() and \
                dist.is_initialized() and dist.get_world_size(group) > 1:
            dist.all_reduce(bad, op=dist.ReduceOp.MAX, group=group)
        return float(bad[0]) == 0.0

    def _nonfinite_step(self, loss=None):
        """A step whose gradients are not finite: stop or skip it, as
        nonfinite says. Returns True when the optimizer's step is to be
        skipped."""
        step = self.rt.info().step + 1
        what = "step %d: the gradients are not finite" % step
        if loss is not None:
            what += " (loss %s)" % loss
        if self.nonfinite == "raise":
            raise CopusError(what + "; stopping (nonfinite='raise'; "
                             "nonfinite='skip' skips such steps)")
        self.skipped_steps += 1
        print("copus_torch: %s: the optimizer's step is skipped (%d so "
              "far)" % (what, self.skipped_steps), file=sys.stderr)
        return True

    # -- the end of training -----------------------------------------------------
    def close(self, destroy_process_group=False):
        """End training on every rank, in this order: the last step's end,
        the wait for every collective of the trainer's still under way,
        the release of the trainer by its hooks, the runtime's teardown,
        and, with destroy_process_group, torch.distributed's default
        group. Call it on every rank (or use the trainer as a context
        manager); a job that returns from it exits 0, and so does one
        that destroys the group itself after it."""
        if self._closed:
            return
        self._closed = True
        self.end_step()
        self._teardown(destroy=destroy_process_group)

    def _detach(self, wait=True):
        """Wait for the trainer's collectives still under way (wait) and
        drop the references that its hooks into torch hold: nothing of the
        trainer's may be left for torch's threads to run or release."""

    def _teardown(self, destroy):
        self._detach()
        self.rt.finalize()
        if destroy and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.close()
        else:
            # Training failed: no collective and no wait for one (a rank
            # may be gone), the runtime only.
            self._closed = True
            self._detach(wait=False)
            self.rt.finalize()
        return False
