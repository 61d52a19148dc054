#!/usr/bin/python3
"""train_dp.py with tensor parallelism: each block's MLP is a
ColumnParallelLinear and a RowParallelLinear of copus_tensor, its weights
split over the ranks of a tensor group; the rest of the model is whole on
every rank. DistributedDataParallel averages over the replicas (the data
group), and Trainer(tensor_degree=...) checkpoints each rank's slices, cut
and joined again when the job resumes under another tensor degree.

    copus-torchrun --nproc 2 train_tp.py             tensor 2
    copus-torchrun --nproc 4 train_tp.py --tensor 2  tensor 2 x data 2

See copus-pytorch(7).
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import copus_launch
import copus_tensor
import copus_torch
import lm

p = lm.arguments(__doc__)
p.add_argument("--ckpt-dir", default="ckpt-tp",
               help="checkpoints, on a file system every node reads")
p.add_argument("--max-batch", type=int, default=64,
               help="the largest global batch copus may choose")
p.add_argument("--tensor", type=int, default=None,
               help="tensor degree (default: 2 on an even number of ranks)")
args = p.parse_args()
rank, world, local_rank = copus_launch.init_distributed()
device = torch.device("cuda") if torch.cuda.is_available() else \
    torch.device("cpu")
tp = copus_tensor.TensorParallel(
    tensor=args.tensor or (2 if world % 2 == 0 else 1))


def mlp(dim):
    # The column-parallel layer's output stays split; the row-parallel
    # layer sums the partial products over the tensor group.
    return nn.Sequential(
        copus_tensor.ColumnParallelLinear(dim, 4 * dim, tp=tp), nn.GELU(),
        copus_tensor.RowParallelLinear(4 * dim, dim, tp=tp))


# The same seed on every rank: every rank draws the same whole weights and
# keeps its slice.
torch.manual_seed(args.seed)
model = lm.build(args, mlp=mlp).to(device)
if tp.data_degree > 1:
    model = DistributedDataParallel(model, process_group=tp.data_group)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                              weight_decay=0.01)
sched = lm.warmup_cosine(optimizer, args.warmup, args.steps)
# The ranks of a tensor group read the same samples: one replica.
data = copus_torch.GlobalSampler(lm.dataset(args), tp.data_rank,
                                 tp.data_degree, seed=args.seed)
trainer = copus_torch.Trainer(
    model, optimizer, lm.loss_fn, data, init_batch=args.batch,
    max_batch=args.max_batch, min_local=2, max_local=args.max_batch,
    optimizer_kind=copus_torch.OPT_ADAM, ckpt_dir=args.ckpt_dir,
    tensor_degree=tp.degree)
trainer.register(sched)

with trainer:
    while trainer.step < args.steps:
        loss = 0.0
        for x, y in trainer.micro_batches():
            micro = lm.loss_fn(model(x.to(device)), y.to(device))
            (micro / trainer.n_micro).backward()
            loss += micro.item() / trainer.n_micro
        # The total norm over the whole model: the slices' squares summed
        # over the tensor group.
        trainer.clip_grad_norm_(args.clip)
        trainer.optimizer_step()
        sched.step()
        step = trainer.step
        if rank == 0 and step % args.log_every == 0:
            print("step %d loss %.4f lr %.2e batch %d tensor %d" % (
                step, loss, sched.get_last_lr()[0], trainer.plan.batch,
                tp.degree), flush=True)
dist.destroy_process_group()
