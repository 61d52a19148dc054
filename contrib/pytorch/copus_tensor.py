"""Tensor-parallel linear layers for the PyTorch adapter (copus_torch).

A layer's weight is split over the ranks of a tensor group: the ranks of
one data-parallel replica and one pipeline stage, whose tensor ranks are
consecutive in libcopus's layout (tensor rank fastest, then pipeline,
then data). Two layers, used in pairs as in a transformer's MLP:

- ColumnParallelLinear splits the output features: each rank computes
  its share of the outputs. Its input is the whole activation; in the
  backward pass the input gradients of the ranks are summed.
- RowParallelLinear splits the input features: each rank multiplies its
  share of the inputs (a column-parallel layer's output, as it is) and
  the partial outputs are summed over the group; the bias is added once.

Usage, on every rank of the job (the same seed everywhere, so that every
rank draws the same full weights and keeps its slice):

    tp = copus_tensor.TensorParallel(tensor=2)      # after init_process_group
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        copus_tensor.ColumnParallelLinear(512, 2048, tp=tp), torch.nn.GELU(),
        copus_tensor.RowParallelLinear(2048, 512, tp=tp))
    if tp.data_degree > 1:
        model = DistributedDataParallel(model, process_group=tp.data_group)
    data = copus_torch.GlobalSampler(dataset, tp.data_rank, tp.data_degree)
    trainer = copus_torch.Trainer(model, optimizer, loss_fn, data, ...,
                                  tensor_degree=tp.degree)

The gradients of a slice are averaged over the data group only (give DDP
the data group); Trainer then sums the squared gradient norms of the
slices over the tensor group, so that libcopus measures the whole model.
PipelineTrainer takes such layers in its stages too: build them with
TensorParallel(tensor, pipeline) and pass it tensor_degree (no DDP).
Each tensor rank checkpoints its own slices; a job restarted under another
tensor degree has them cut and joined again by position, the optimizer's
state (momentum, Adam's moments) with them. The feature counts must be
multiples of every tensor degree the job is to run under. On one rank,
or with a degree of 1, the layers are plain linear layers.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

import copus_torch

# Parameters that hold a slice of a tensor-parallel weight carry this
# attribute: (dimension split, TensorParallel). copus_torch's Trainer reads
# it to checkpoint, reshard and measure them.
SPLIT_ATTR = copus_torch.SPLIT_ATTR


class TensorParallel:
    """This rank's place in a layout of data x pipeline x tensor ranks, and
    the process groups of its tensor slice and of its replicas.

    Every rank must build it, in the same order with respect to other
    process groups: torch.distributed.new_group is called for every group
    of the layout, on every rank. pipeline is the pipeline degree (the
    data degree is what remains of the world); rank and world are
    torch.distributed's unless given (world=1: a rank on its own).
    """

    def __init__(self, tensor, pipeline=1, rank=None, world=None):
        on = dist.is_available() and dist.is_initialized()
        if world is None:
            world = dist.get_world_size() if on else 1
            rank = dist.get_rank() if on else 0
        elif rank is None:
            rank = 0
        if tensor < 1 or pipeline < 1 or world % (tensor * pipeline):
            raise copus_torch.CopusError(
                "TensorParallel: %d ranks are not a multiple of tensor %d "
                "x pipeline %d" % (world, tensor, pipeline))
        if world > 1 and not on:
            raise copus_torch.CopusError(
                "TensorParallel: %d ranks need torch.distributed's process "
                "group (init_process_group first)" % world)
        data = world // (tensor * pipeline)
        at = copus_torch.coords_of_rank(data, pipeline, tensor, rank)
        self.degree, self.rank = tensor, at.tensor_rank
        self.pipeline_degree, self.pipeline_rank = pipeline, at.pipeline_rank
        self.data_degree, self.data_rank = data, at.data_rank
        grid = {}
        for r in range(world):
            c = copus_torch.coords_of_rank(data, pipeline, tensor, r)
            grid[(c.data_rank, c.pipeline_rank, c.tensor_rank)] = r
        # The tensor groups (one per replica and stage), then the data
        # groups (one per stage and slice): the same calls on every rank.
        self.group = self.data_group = None
        self.tensor_ranks = self.data_ranks = [rank]
        for d in range(data):
            for s in range(pipeline):
                ranks = [grid[(d, s, t)] for t in range(tensor)]
                g = dist.new_group(ranks) if on and world > 1 else None
                if rank in ranks:
                    self.group, self.tensor_ranks = g, ranks
        for s in range(pipeline):
            for t in range(tensor):
                ranks = [grid[(d, s, t)] for d in range(data)]
                g = dist.new_group(ranks) if on and world > 1 else None
                if rank in ranks:
                    self.data_group, self.data_ranks = g, ranks
        if tensor == 1:
            self.group = None

    def split(self, n, what):
        """This rank's share of n features."""
        if n % self.degree:
            raise copus_torch.CopusError(
                "%s: %d features do not split over tensor degree %d"
                % (what, n, self.degree))
        return n // self.degree


# -- the communication of the layers, as autograd functions ---------------
# Each is the identity when there is no tensor group (degree 1).

class _CopyToTensor(torch.autograd.Function):
    """Forward: the input as it is. Backward: the gradient summed over
    the tensor group (every rank used the whole input)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTensor(torch.autograd.Function):
    """Forward: the partial outputs summed over the tensor group.
    Backward: the gradient as it is (each rank's share of the sum
    has the sum's gradient)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherFromTensor(torch.autograd.Function):
    """Forward: the slices of the last dimension joined in rank order.
    Backward: this rank's slice of the gradient."""

    @staticmethod
    def forward(ctx, x, group, degree, rank):
        ctx.rank, ctx.width = rank, x.shape[-1]
        parts = [torch.empty_like(x) for _ in range(degree)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        w = ctx.width
        return grad.narrow(-1, ctx.rank * w, w).contiguous(), None, None, None


class _ScatterToTensor(torch.autograd.Function):
    """Forward: this rank's slice of the last dimension. Backward: the
    slices' gradients joined (the whole input's gradient)."""

    @staticmethod
    def forward(ctx, x, group, degree, rank):
        ctx.group, ctx.degree = group, degree
        w = x.shape[-1] // degree
        return x.narrow(-1, rank * w, w).contiguous()

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        parts = [torch.empty_like(grad) for _ in range(ctx.degree)]
        dist.all_gather(parts, grad, group=ctx.group)
        return torch.cat(parts, dim=-1), None, None, None


def _slice_of(full, dim, tp):
    """This rank's slice of a full tensor, as a new parameter."""
    n = full.shape[dim] // tp.degree
    return torch.nn.Parameter(
        full.detach().narrow(dim, tp.rank * n, n).clone())


class _TensorLinear(torch.nn.Module):
    """What the two layers share: the full layer drawn as nn.Linear draws
    it (so a seed gives the same model under any tensor degree), or the
    nn.Linear given as full (from_linear), sliced. tp=None: one rank."""

    def __init__(self, in_features, out_features, bias, tp, dim, bias_dim,
                 full):
        super().__init__()
        self.tp = tp if tp is not None else TensorParallel(1, rank=0,
                                                           world=1)
        self.in_features, self.out_features = in_features, out_features
        if full is None:
            full = torch.nn.Linear(in_features, out_features, bias=bias)
        elif (full.in_features, full.out_features) != (in_features,
                                                       out_features):
            raise copus_torch.CopusError(
                "%s: the layer is %d x %d, not %d x %d"
                % (type(self).__name__, full.in_features, full.out_features,
                   in_features, out_features))
        self.tp.split(full.weight.shape[dim], type(self).__name__)
        self.weight = _slice_of(full.weight, dim, self.tp)
        setattr(self.weight, SPLIT_ATTR, (dim, self.tp))
        # The bias: sliced as the output features are (bias_dim 0), or
        # whole on every rank (None).
        if not bias:
            self.register_parameter("bias", None)
        elif bias_dim is None:
            self.bias = torch.nn.Parameter(
                full.bias.detach().clone() if full.bias is not None
                else torch.zeros(out_features))
        else:
            self.bias = _slice_of(full.bias if full.bias is not None
                                  else torch.zeros(out_features),
                                  bias_dim, self.tp)
            setattr(self.bias, SPLIT_ATTR, (bias_dim, self.tp))

    @classmethod
    def from_linear(cls, linear, tp=None, **kw):
        """The slice of this rank of an nn.Linear's weights."""
        return cls(linear.in_features, linear.out_features,
                   bias=linear.bias is not None, tp=tp, full=linear, **kw)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, tensor=%d/%d" % (
            self.in_features, self.out_features, self.tp.rank,
            self.tp.degree)


class ColumnParallelLinear(_TensorLinear):
    """y = x A^T + b with A's rows (the output features) and b split over
    the tensor group: this rank's output is its slice of y's last
    dimension, or the whole y with gather_output."""

    def __init__(self, in_features, out_features, bias=True, tp=None,
                 gather_output=False, full=None):
        super().__init__(in_features, out_features, bias, tp, 0, 0, full)
        self.gather_output = gather_output

    def forward(self, x):
        tp = self.tp
        if tp.group is not None:
            x = _CopyToTensor.apply(x, tp.group)
        y = F.linear(x, self.weight, self.bias)
        if self.gather_output and tp.group is not None:
            y = _GatherFromTensor.apply(y, tp.group, tp.degree, tp.rank)
        return y


class RowParallelLinear(_TensorLinear):
    """y = x A^T + b with A's columns (the input features) split over the
    tensor group: this rank multiplies its slice of x (a column-parallel
    layer's output; the whole x, split here, with input_is_parallel=False)
    and the partial products are summed; b is whole on every rank."""

    def __init__(self, in_features, out_features, bias=True, tp=None,
                 input_is_parallel=True, full=None):
        super().__init__(in_features, out_features, bias, tp, 1, None,
                         full)
        self.input_is_parallel = input_is_parallel

    def forward(self, x):
        tp = self.tp
        if not self.input_is_parallel and tp.group is not None:
            x = _ScatterToTensor.apply(x, tp.group, tp.degree, tp.rank)
        y = F.linear(x, self.weight)
        if tp.group is not None:
            y = _ReduceFromTensor.apply(y, tp.group)
        if self.bias is not None:
            y = y + self.bias
        return y
