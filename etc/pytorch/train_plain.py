#!/usr/bin/python3
"""An ordinary PyTorch training script, without copus: a small transformer
language model (lm.py) trained data-parallel with DistributedDataParallel,
AdamW, a warm-up and cosine learning-rate schedule, gradient clipping and
optional bf16 autocast. It writes no checkpoints.

    python3 train_plain.py                       one process
    copus-torchrun --nproc 2 train_plain.py      two on this machine
    srun python3 train_plain.py                  Slurm's tasks

train_dp.py is the same training with copus: `diff -u train_plain.py
train_dp.py` shows what changes. See copus-pytorch(7).
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

import copus_launch
import lm

args = lm.arguments(__doc__).parse_args()
rank, world, local_rank = copus_launch.init_distributed()
device = torch.device("cuda") if torch.cuda.is_available() else \
    torch.device("cpu")
torch.manual_seed(args.seed)
model = lm.build(args).to(device)
model = DistributedDataParallel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                              weight_decay=0.01)
sched = lm.warmup_cosine(optimizer, args.warmup, args.steps)
sampler = DistributedSampler(lm.dataset(args), seed=args.seed)
loader = DataLoader(sampler.dataset, batch_size=args.batch // world,
                    sampler=sampler, drop_last=True)


def batches():
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


data = batches()
step = 0
while step < args.steps:
    x, y = next(data)
    optimizer.zero_grad()
    loss = lm.loss_fn(model(x.to(device)), y.to(device))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()
    sched.step()
    step += 1
    if rank == 0 and step % args.log_every == 0:
        print("step %d loss %.4f lr %.2e" % (
            step, loss.item(), sched.get_last_lr()[0]), flush=True)
dist.destroy_process_group()
