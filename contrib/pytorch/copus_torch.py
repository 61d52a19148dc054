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
- save and load of the model, the optimizer, the data position, the
  objects the user registers (a learning-rate scheduler, a loss scaler)
  and the runtime's own state, and the exit with the requeue code on a
  rescale,
- checks that stop a job training wrong in silence: a checkpoint of
  another model (its modules' settings, or a fingerprint), gradients that
  are not finite.

Usage:

    trainer = copus_torch.Trainer(model, optimizer, loss_fn, data,
                                  init_batch=64, max_batch=1024,
                                  min_local=8, max_local=256,
                                  ckpt_dir="/scratch/run1")
    sched = trainer.register(torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=1000))
    with trainer:
        while trainer.step < 1000:
            loss = trainer.train_step()
            sched.step()

A step ends (the checkpoint when one is due, the exit on a rescale) at
the next step's start, after the user's own work of the step such as the
scheduler's step(): a resumed run's learning rates are the uninterrupted
run's. The man page copus-pytorch(7) is the adapter's tutorial.

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

import math
import weakref

import torch
import torch.distributed as dist

from copus_lib import *  # noqa: F401,F403  (the adapter's public names)
from copus_lib import (AGREE_LEN, CopusError, OPT_SGD, Runtime, SPLIT_ATTR,
                       StepLoop, _reslice, _sqnorm, comm_device,
                       module_structure,
                       structure_difference)
from copus_pipeline import PipelineTrainer  # noqa: F401
from copus_launch import init_distributed  # noqa: F401


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


class _GradReduce:
    """The state of Trainer's DDP communication hook: each bucket's all-
    reduce starts when DDP hands the bucket over, and the hook of the
    last bucket (DDP hands them over in order) waits for all of them, in
    order, and completes their futures itself; the step's agreement rides
    on the last bucket.

    No Python is left for the process group's threads: a future's then()
    callback runs on a gloo thread and is released there, and releasing
    it takes the GIL; a thread that takes the GIL while the interpreter
    exits is ended by CPython (pthread_exit), and its unwinding through
    the callback's destructor, which may not throw, is std::terminate:
    SIGABRT after a finished job's last step (issue 26). The trainer is
    held weakly: DDP keeps the hook's state as long as the model lives.
    """

    def __init__(self, trainer, group, replicas):
        self.trainer = weakref.ref(trainer)
        self.group = group
        self.replicas = replicas
        self.pending = []   # (work, future, bucket buffer), in order

    @staticmethod
    def hook(self, bucket):
        tr = self.trainer() if self.trainer is not None else None
        in_step = tr is not None and tr._in_step
        if in_step and tr._measure:
            tr._hook_measure(bucket)
        buf = bucket.buffer()
        buf.div_(self.replicas)
        whole = out = buf
        if in_step and tr.fold_agreement and bucket.is_last() and \
                buf.dtype in (torch.float32, torch.float64):
            # The step's agreement rides on the last bucket (exact sums
            # in float32 and float64, not in float16).
            whole, out = tr._agree_fold(buf)
        fut = torch.futures.Future()
        self.pending.append((dist.all_reduce(whole, group=self.group,
                                             async_op=True), fut, out))
        if bucket.is_last():
            # The end of backward: DDP waits for every bucket next.
            self.wait()
        return fut

    def wait(self):
        """Wait for the all-reduces under way and complete their futures."""
        pending, self.pending = self.pending, []
        for i, (work, fut, buf) in enumerate(pending):
            try:
                work.wait()
            except Exception as e:
                for _, f, _ in pending[i:]:
                    f.set_exception(e)
                raise
            fut.set_result(buf)


class Trainer(StepLoop):
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
    the mean. With a loss scaler, pass it as grad_scaler (and register
    it): the gradients are measured before your unscaling and clipping,
    divided by its scale, and the scaler skips the steps of non-finite
    gradients. Without one, nonfinite="raise" (the default) stops the job
    on every rank at a step whose gradients are not finite, "skip" skips
    that step's optimizer step, "ignore" leaves it to the user.
    clip_grad_norm_() clips over the whole model, tensor slices included.

    A model of copus_tensor's layers (tensor_degree=tp.degree, DDP over
    tp.data_group when there are several replicas): each tensor rank
    checkpoints its own slices, and a checkpoint of another tensor degree
    is cut and joined again by position, optimizer state included.
    """

    def __init__(self, model, optimizer, loss_fn, data, init_batch,
                 max_batch, min_local, max_local, accumulation=True,
                 ckpt_dir=None, optimizer_kind=OPT_SGD, replan_every=0,
                 grad_stats=True, stats_every=1, on_rescale=None,
                 grad_scaler=None, fold_agreement=True, nonfinite=None,
                 **runtime_args):
        self._loop_init(nonfinite, grad_scaler)
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
        # The agreement: packed into _agree_out, summed after the last
        # bucket in _agree_buf, the sums (_agree_sums, its tail) waiting
        # for the end of micro_batches.
        self._agree_sums = None
        self._agree_out = torch.zeros(AGREE_LEN, dtype=torch.float64)
        self._agree_buf = None
        self._agree_views = None
        self._in_step = False
        self._prev = None       # accumulated .grad before the last micro-batch
        self._hook_sq = 0.0     # local squared norm of the last micro-batch
        self._scratch = {}
        self._pair_prev = None  # the previous step's gradient (one process)
        self._scale = 1.0
        self.n_micro = 1
        self._loss = None
        self._stats = []
        # The model's configuration, which a checkpoint must match.
        self.structure = module_structure(
            model.module if self.ddp else model)
        self.rt = Runtime(init_batch, max_batch, min_local, max_local,
                          accumulation=accumulation,
                          optimizer=optimizer_kind, ckpt_dir=ckpt_dir,
                          save=self._save_state, load=self._load_state,
                          **runtime_args)
        self._reduce = None
        if self.ddp:
            self._reduce = _GradReduce(self, self._group, self._replicas)
            self.model.register_comm_hook(self._reduce, _GradReduce.hook)
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

    def _pair_step(self):
        """This step's and the previous step's gradients as two estimates
        of the same gradient (the model moves little in one step): libcopus
        pairs them from the squared norm and their dot product."""
        cur = [p.grad.detach() for p in self.params]
        prev = self._pair_prev
        k = self._scale * self._scale
        w = self._weights_of(self.params)
        self._stat("local", self._tensor_sum(_sqnorm(cur, w)) * k)
        if prev is not None:
            dot = None
            for i, (c, q) in enumerate(zip(cur, prev)):
                d = torch.dot(c.reshape(-1), q.reshape(-1))
                if w is not None:
                    d = d * w[i]
                dot = d if dot is None else dot + d
            if dot is not None:
                self._stat("dot", self._tensor_sum(float(dot)) * k)
        prev = self._buffers("pair", cur)
        for q, c in zip(prev, cur):
            q.copy_(c)
        self._pair_prev = prev

    def _stat(self, kind, value):
        """A measurement of the step, reported to libcopus at the end of
        its micro-batches (_stats_flush)."""
        self._stats.append((kind, value))

    def _stats_flush(self):
        """Report the step's measurements; a step of non-finite
        gradients reports none (optimizer_step stops or skips it)."""
        stats, self._stats = self._stats, []
        if not all(math.isfinite(v) for _, v in stats):
            self._pair_prev = None
            return
        report = {"local": self.rt.grad_local, "total": self.rt.grad_total,
                  "dot": self.rt.grad_dot}
        for kind, value in stats:
            report[kind](value)

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
        t = torch.tensor([x], dtype=torch.float64,
                         device=comm_device(self._tp.group))
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
                 "user": self._user_state(),
                 "structure": self.structure,
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
        differ = structure_difference(state.get("structure", self.structure),
                                      self.structure)
        if differ is not None:
            raise CopusError("the checkpoint of step %d is of another model: "
                             "%s" % (state["step"], differ))
        module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.data.load_state_dict(state["data"])
        torch.set_rng_state(state["rng"])
        self._keep_user_state(state.get("user"),
                              state["optimizer"]["param_groups"])

    # -- DDP communication hook: the local gradient before the all-reduce --
    def _hook_measure(self, bucket):
        """The squared norm of the last micro-batch's gradient in bucket,
        before the all-reduce."""
        grads = bucket.gradients()
        w = self._weights_of(bucket.parameters())
        if self._prev is None:
            sq = _sqnorm(grads, w)
        else:
            prev = self._prev

            def change(p, g):
                q, d = prev.get(p.data_ptr(), (None, None))
                if q is None:
                    return g
                return torch.sub(g, q.view_as(g), out=d.view_as(g))
            sq = _sqnorm([change(p, g) for p, g in
                          zip(bucket.parameters(), grads)], w)
        self._hook_sq += sq * self._scale * self._scale

    def _agree_fold(self, buf):
        """The last bucket with the step's agreement after it, in one
        tensor kept across steps: one all-reduce carries both (a second
        one, however small, costs its latency again). Returns the tensor
        and the view of it that holds the bucket."""
        n = buf.numel()
        t = self._agree_buf
        if t is None or t.numel() != n + AGREE_LEN or \
                t.dtype != buf.dtype or t.device != buf.device:
            t = torch.empty(n + AGREE_LEN, dtype=buf.dtype,
                            device=buf.device)
            self._agree_buf = t
            self._agree_views = (t[:n], t[n:])
        head, tail = self._agree_views
        self.rt.agree_pack(self._agree_out)
        head.copy_(buf)
        tail.copy_(self._agree_out)
        self._agree_sums = tail
        return t, head

    def _detach(self, wait=True):
        """Wait for the gradient all-reduces still under way (wait) and
        cut the communication hook loose from the trainer: after close(),
        the model's backward averages the gradients as plain DDP does."""
        if self._reduce is not None:
            if wait:
                self._reduce.wait()
            self._reduce.trainer = None
        self._agree_sums = None

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
        self._begin()
        self._loss = None
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
                if last and measure and self.ddp and prev_flat is not None:
                    # .grad before the last micro-batch, copied after the
                    # one before it; the hook's differences go to scratch
                    # buffers too: no allocation per step.
                    diff = self._buffers("diff", prev_flat)
                    self._prev = {p.data_ptr(): (q, d) for p, q, d in
                                  zip(self.params, prev_flat, diff)}
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
                self._stat("local", self._tensor_sum(sq) * k)
                if not last:
                    prev_flat = self._buffers("prev", cur)
                    for q, c in zip(prev_flat, cur):
                        q.copy_(c)
        if self.ddp and measure:
            # DDP waited for the all-reduce at the end of backward.
            self._stat("local", self._tensor_sum(self._hook_sq))
        if measure and pairs:
            self._pair_step()
        elif measure:
            self._stat("total", self._tensor_sum(_sqnorm(
                (p.grad for p in self.params),
                self._weights_of(self.params))) * k_total)
        elif pairs:
            self._pair_prev = None
        self._stats_flush()
        if self._agree_sums is not None:
            # To the host in float64 (from a GPU: the step's one sync).
            self._agree_out.copy_(self._agree_sums)
            self._agree_sums = None
            rt.agree_unpack(self._agree_out)

    def optimizer_step(self, step=None):
        """The optimizer's step (or step(), e.g.
        lambda: scaler.step(optimizer)) with every group's learning rate
        multiplied by the plan's gain for that call only, so that the
        user's learning-rate schedule stays in charge. Gradients that are
        not finite stop the job or skip the step (nonfinite). The step
        ends at end_step(), after the user's scheduler has stepped: by
        itself at the next step's start."""
        plan = self.plan
        self._in_step = False
        skip = False
        if self.nonfinite != "ignore":
            group = self._tp.group if self._tp is not None else False
            if not self._finite([p.grad for p in self.params], group):
                skip = self._nonfinite_step(self._loss)
        groups = self.optimizer.param_groups
        lrs = [g["lr"] for g in groups]
        for g, lr in zip(groups, lrs):
            g["lr"] = lr * plan.lr_gain
        try:
            if skip:
                pass
            elif step is None:
                self.optimizer.step()
            else:
                step()
        finally:
            for g, lr in zip(groups, lrs):
                g["lr"] = lr
        self._end_args = (plan.local, plan.accum_steps)
        self.data_advance = plan.local * (plan.accum_steps + 1)

    def _after_end(self):
        if self.replan_every and self.rt.info().step % self.replan_every == 0:
            self.plan = self.rt.plan()

    def train_step(self):
        """Run one step of plan.local x (plan.accum_steps + 1) samples per
        replica; returns the mean loss. The step ends (a checkpoint, the
        exit on a rescale) at the next step's start or end_step()."""
        total_loss = 0.0
        for x, y in self.micro_batches():
            loss = self.loss_fn(self.model(x), y) / self.n_micro
            loss.backward()
            total_loss += float(loss)
        self._loss = total_loss
        self.optimizer_step()
        return total_loss

    def clip_grad_norm_(self, max_norm):
        """Clip the gradients to a total norm of max_norm, as
        torch.nn.utils.clip_grad_norm_ does, over the whole model: the
        slices of tensor-parallel weights summed over their tensor group.
        Returns the total norm before clipping (a float). With a loss
        scaler, unscale first."""
        grads = [p.grad for p in self.params if p.grad is not None]
        w = self._weights_of([p for p in self.params if p.grad is not None])
        total = self._tensor_sum(_sqnorm(grads, w)) ** 0.5
        coef = float(max_norm) / (total + 1e-6)
        if coef < 1.0:
            for g in grads:
                g.mul_(coef)
        return total
