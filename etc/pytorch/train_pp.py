#!/usr/bin/python3
"""train_dp.py in pipeline stages: PipelineTrainer cuts the model (an
nn.Sequential: embedding, blocks, head) into the plan's stages, runs each
rank's stage on its micro-batches (GPipe) with the activations sent to the
next stage, averages each stage's gradients over its replicas, clips over
the whole model, and checkpoints each stage by layer number, so that a job
resumed under another pipeline degree reads the layers it now holds. It
runs on CPU with gloo, as PipelineTrainer does.

    copus-torchrun --nproc 2 train_pp.py                pipeline 2
    copus-torchrun --nproc 4 train_pp.py --pipeline 2   pipeline 2 x data 2

See copus-pytorch(7).
"""

import torch
import torch.distributed as dist

import copus_launch
import copus_torch
import lm

p = lm.arguments(__doc__)
p.add_argument("--ckpt-dir", default="ckpt-pp",
               help="checkpoints, on a file system every node reads")
p.add_argument("--pipeline", type=int, default=None,
               help="pipeline degree (default: 2 on an even number of "
               "ranks)")
p.add_argument("--micro", type=int, default=4,
               help="micro-batches per step and replica")
args = p.parse_args()
rank, world, local_rank = copus_launch.init_distributed(backend="gloo")
torch.manual_seed(args.seed)
model = lm.build(args)
dataset = lm.dataset(args)


def sampler(replica, replicas):
    # Called once the plan is known: every stage of a replica reads the
    # same samples, those of its data rank.
    return copus_torch.GlobalSampler(dataset, replica, replicas,
                                     seed=args.seed)


trainer = copus_torch.PipelineTrainer(
    model, lambda params: torch.optim.AdamW(params, lr=args.lr,
                                            weight_decay=0.01),
    lm.loss_fn, sampler, global_batch=args.batch, n_micro=args.micro,
    ckpt_dir=args.ckpt_dir,
    pipeline_degree=args.pipeline or (2 if world % 2 == 0 else 1),
    clip_grad_norm=args.clip, optimizer=copus_torch.OPT_ADAM)
# The optimizer of this rank's stage exists once the trainer does.
sched = trainer.register(lm.warmup_cosine(trainer.optimizer, args.warmup,
                                          args.steps))

with trainer:
    while trainer.step < args.steps:
        loss = trainer.train_step()     # None but on the last stage
        sched.step()
        step = trainer.step
        if loss is not None and trainer.plan.data_rank == 0 and \
                step % args.log_every == 0:
            print("step %d loss %.4f lr %.2e stages %d" % (
                step, loss, sched.get_last_lr()[0],
                trainer.plan.pipeline_degree), flush=True)
dist.destroy_process_group()
