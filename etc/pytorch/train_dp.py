#!/usr/bin/python3
"""train_plain.py with copus: copus_torch's Trainer chooses each step's
batch size, micro-batches and learning-rate gain for the GPUs the job has,
and checkpoints the training (the model, AdamW, the data position, the
registered schedule) when the scheduler resizes the job, which then exits
with the requeue code 75 and resumes where it stopped.

    python3 train_dp.py                          one process
    copus-torchrun --nproc 2 train_dp.py         two on this machine
    sbatch train.sbatch                          an elastic Slurm job

`diff -u train_plain.py train_dp.py` shows what changes. See
copus-pytorch(7).
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import copus_launch
import copus_torch
import lm

p = lm.arguments(__doc__)
p.add_argument("--ckpt-dir", default="ckpt",
               help="checkpoints, on a file system every node reads")
p.add_argument("--max-batch", type=int, default=64,
               help="the largest global batch copus may choose")
args = p.parse_args()
rank, world, local_rank = copus_launch.init_distributed()
device = torch.device("cuda") if torch.cuda.is_available() else \
    torch.device("cpu")
torch.manual_seed(args.seed)
model = lm.build(args).to(device)
model = DistributedDataParallel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                              weight_decay=0.01)
sched = lm.warmup_cosine(optimizer, args.warmup, args.steps)
data = copus_torch.GlobalSampler(lm.dataset(args), seed=args.seed)
trainer = copus_torch.Trainer(
    model, optimizer, lm.loss_fn, data, init_batch=args.batch,
    max_batch=args.max_batch, min_local=2, max_local=args.max_batch,
    optimizer_kind=copus_torch.OPT_ADAM, ckpt_dir=args.ckpt_dir)
trainer.register(sched)

while trainer.step < args.steps:
    loss = 0.0
    for x, y in trainer.micro_batches():    # .grad zeroed first
        micro = lm.loss_fn(model(x.to(device)), y.to(device))
        (micro / trainer.n_micro).backward()
        loss += micro.item() / trainer.n_micro
    trainer.clip_grad_norm_(args.clip)
    trainer.optimizer_step()
    sched.step()
    step = trainer.step
    if rank == 0 and step % args.log_every == 0:
        print("step %d loss %.4f lr %.2e batch %d" % (
            step, loss, sched.get_last_lr()[0], trainer.plan.batch),
            flush=True)
trainer.close()     # the last step's end, on every rank
dist.destroy_process_group()
