"""PipelineTrainer: an nn.Sequential trained in libcopus's pipeline stages,
tensor slices and data-parallel replicas (see copus_torch for the
adapter as a whole; this module is imported by it)."""

import torch
import torch.distributed as dist

from copus_lib import (CopusError, Runtime, SPLIT_ATTR, StepLoop, _reslice,
                       _sqnorm, coords_of_rank, module_structure,
                       structure_difference)

# The dtypes an activation and its gradient travel in between the stages,
# by their code in the message's header (0: none; -1 in a header: the
# sender refused its tensor and stops).
DTYPES = (None, torch.float32, torch.float64, torch.float16, torch.bfloat16)
HEADER = 8      # int64s: dimensions, dtype code, up to 6 sizes


class PipelineTrainer(StepLoop):
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
    global_batch samples a step in n_micro micro-batches per replica.

    The sampler: every stage and tensor slice of a replica must read the
    same samples, so a sampler of the replicas (GlobalSampler) is laid
    out by the plan's data degree, not by the world: GlobalSampler(
    dataset, replica=data rank, replicas=data degree). sampler may be a
    function (replica, replicas) -> sampler, called once the plan is
    known (the way to go with planner_model, whose data degree nobody
    knows before), or a sampler (next_batch, state_dict,
    load_state_dict); one with replica and replicas attributes of
    another layout (GlobalSampler's defaults: the rank and the world)
    stops every rank with a CopusError that says what to build.

    Activations and their gradients go between the stages in their own
    dtype: float32, float64, float16 or bfloat16 (a stage that ends in
    bfloat16, or runs under autocast, sends bfloat16), up to 6
    dimensions; a tensor of another dtype stops both ranks, naming it.

    clip_grad_norm (or train_step(clip=...)) clips the gradients, once
    averaged over the replicas and before the optimizer's step, to that
    total norm over the whole model: every stage's, each tensor slice
    once (see clip_grad_norm_); the norm before clipping is in
    last_grad_norm. nonfinite says what a step whose loss or gradients
    are not finite on any rank does, alike on every rank: "raise"
    (default) stops every rank with a CopusError naming the step,
    "skip" skips its optimizer step (skipped_steps counts them),
    "ignore" takes it.

    register(obj) saves a learning-rate scheduler or any object with
    state_dict() and load_state_dict() with the checkpoint and restores
    it; the trainer builds the optimizer, so build its scheduler after
    the trainer (trainer.optimizer) and register it before the first
    step. A step ends (libcopus counts it, checkpoints when one is due,
    exits with the requeue code on a rescale) at the next train_step()'s
    start or at end_step(), after the user's own work of the step (the
    scheduler's step()); close(), or the trainer as a context manager,
    ends the last step and the runtime on every rank.

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
                 planner_model=None, nonfinite=None, clip_grad_norm=None,
                 **runtime_args):
        self._loop_init(nonfinite)
        self.layers = list(model)
        self.structure = module_structure(model)
        self.loss_fn = loss_fn
        self.clip_grad_norm = clip_grad_norm
        self.last_grad_norm = None
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
        self.sampler = self._laid_out(sampler)
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

    def _laid_out(self, sampler):
        """The sampler of this rank's replica: built by sampler(replica,
        replicas) when it is a function, else checked on every rank to
        read the plan's data rank of its data degree."""
        p = self.plan
        if callable(sampler) and not hasattr(sampler, "next_batch"):
            sampler = sampler(p.data_rank, p.data_degree)
        has = (getattr(sampler, "replica", None),
               getattr(sampler, "replicas", None))
        bad = torch.tensor([None not in has and
                            has != (p.data_rank, p.data_degree)],
                           dtype=torch.float64)
        # One rank's sampler may be wrong alone: every rank stops.
        if self.world > 1:
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        if not bad[0]:
            return sampler
        self.rt.finalize()
        why = "another rank's sampler" if has == (p.data_rank,
                                                  p.data_degree) \
            else "the sampler reads as replica %s of %s;" % has
        raise CopusError(
            "PipelineTrainer: %s the plan makes this rank data rank %d of "
            "data degree %d (pipeline %d x tensor %d): every stage and "
            "tensor slice of a replica must read the same samples. Build "
            "it as GlobalSampler(dataset, replica=trainer's data rank, "
            "replicas=data degree), or pass a function (replica, "
            "replicas) -> sampler, called once the plan is known"
            % (why, p.data_rank, p.data_degree, p.pipeline_degree,
               p.tensor_degree))

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
                    "user": self._user_state(),
                    "structure": self.structure,
                    "sampler": self.sampler.state_dict()}, path)

    def _read(self, path, step, state):
        saved = torch.load(path)
        if saved["step"] != step:
            raise CopusError("checkpoint %s holds step %d, manifest says %d"
                             % (path, saved["step"], step))
        state["layers"].update(saved["layers"])
        state["optim"].update(saved["optim"])
        state["split"].update(saved.get("split", {}))
        differ = structure_difference(saved.get("structure", self.structure),
                                      self.structure)
        if differ is not None:
            raise CopusError("the checkpoint of step %d is of another model: "
                             "%s" % (step, differ))
        state["groups"] = saved["groups"]
        state["sampler"] = saved["sampler"]
        state["user"] = saved.get("user")

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
        self._keep_user_state(state.get("user"), state["groups"])

    # -- one step: GPipe over the stages, all-reduce over the replicas ----
    @staticmethod
    def _header(t):
        """The header that precedes t: its dimensions, dtype and sizes;
        CopusError for a tensor that cannot travel."""
        if t.dtype not in DTYPES or t.dim() > HEADER - 2:
            raise CopusError(
                "PipelineTrainer: an activation or gradient of %s with %d "
                "dimensions cannot go between the stages (dtypes %s; %d "
                "dimensions at most)" % (t.dtype, t.dim(), ", ".join(
                    str(d).replace("torch.", "") for d in DTYPES[1:]),
                    HEADER - 2))
        head = torch.zeros(HEADER, dtype=torch.int64)
        head[0], head[1] = t.dim(), DTYPES.index(t.dtype)
        head[2:2 + t.dim()] = torch.tensor(t.shape, dtype=torch.int64)
        return head

    def _send(self, t, peer):
        try:
            head = self._header(t)
        except CopusError:
            # The peer waits for a tensor: it learns why none comes.
            dist.send(torch.full((HEADER,), -1, dtype=torch.int64), peer)
            raise
        dist.send(head, peer)
        dist.send(t.contiguous(), peer)

    def _recv(self, peer):
        head = torch.zeros(HEADER, dtype=torch.int64)
        dist.recv(head, peer)
        if int(head[1]) < 1:
            raise CopusError("PipelineTrainer: rank %d sent no tensor: its "
                             "activation or gradient cannot go between the "
                             "stages (see its error)" % peer)
        t = torch.empty(*head[2:2 + int(head[0])].tolist(),
                        dtype=DTYPES[int(head[1])])
        dist.recv(t, peer)
        return t

    def train_step(self, clip=None):
        """One optimizer step of the global batch; the mean loss on the
        last stage (None elsewhere). clip (default: the trainer's
        clip_grad_norm) clips the averaged gradients to that total norm
        before the optimizer's step; give every rank the same. The step
        ends (a checkpoint, the exit with the requeue code on a rescale)
        at the next step's start or end_step(), after the user's own work
        of the step."""
        rt = self.rt
        self._begin()
        rt.step_begin()
        clip = self.clip_grad_norm if clip is None else clip
        self.last_grad_norm = None
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
        # Every rank decides alike: the stages' gradients differ.
        skip = self.nonfinite != "ignore" and not self._finite(
            [q.grad for q in self.params], None,
            [total] if self.next is None else ()) and \
            self._nonfinite_step(total if self.next is None else None)
        if clip is not None and not skip:
            self.clip_grad_norm_(clip)
        groups = self.optimizer.param_groups
        lrs = [g["lr"] for g in groups]
        for g, lr in zip(groups, lrs):
            g["lr"] = lr * self.plan.lr_gain
        try:
            if not skip:
                self.optimizer.step()
        finally:
            for g, lr in zip(groups, lrs):
                g["lr"] = lr
        self._end_args = (self.micro, self.n_micro - 1)
        return total if self.next is None else None

    def clip_grad_norm_(self, max_norm):
        """Clip the gradients to a total norm of max_norm over the whole
        model, as torch.nn.utils.clip_grad_norm_ on one process does: the
        squares of every stage's gradients, each tensor slice's once and
        the parameters that every tensor rank holds whole once in all.
        Call it on every rank (train_step does, given clip) once the
        replicas' gradients are averaged. Returns the total norm before
        clipping, kept in last_grad_norm."""
        p = self.plan
        grads = [q.grad for q in self.params if q.grad is not None]
        weights = [1.0 if hasattr(q, SPLIT_ATTR) else 1.0 / p.tensor_degree
                   for q in self.params if q.grad is not None]
        sq = torch.tensor([_sqnorm(grads, weights)], dtype=torch.float64)
        if self.world > 1:
            # Over the world: every replica holds the same gradients,
            # every rank gets the same sum.
            dist.all_reduce(sq)
        total = float(sq[0] / p.data_degree) ** 0.5
        coef = float(max_norm) / (total + 1e-6)
        if coef < 1.0:
            for g in grads:
                g.mul_(coef)
        self.last_grad_norm = total
        return total
