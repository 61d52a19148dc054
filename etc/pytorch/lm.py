"""What the example training scripts share, none of it copus's: a small
transformer language model, a synthetic data set it can learn, its loss,
a learning-rate schedule and the command-line arguments.

The model is an nn.Sequential of an embedding, transformer blocks and a
head, so that PipelineTrainer can cut it into stages as it is; a block's
MLP may be given, so that train_tp.py can build it of tensor-parallel
layers.
"""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


def arguments(doc):
    """The examples' common arguments: small defaults that train in
    seconds on CPU."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument("--steps", type=int, default=40, help="optimizer steps")
    p.add_argument("--batch", type=int, default=16,
                   help="global batch (sequences per step)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=5, help="warm-up steps")
    p.add_argument("--clip", type=float, default=1.0,
                   help="gradient clipping: the largest total norm")
    p.add_argument("--bf16", action="store_true",
                   help="matrix products in bfloat16 (autocast)")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--seq", type=int, default=32, help="sequence length")
    p.add_argument("--dim", type=int, default=64, help="model width")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2,
                   help="transformer blocks")
    p.add_argument("--samples", type=int, default=4096,
                   help="sequences in the synthetic data set")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10, metavar="STEPS")
    return p


class Embed(nn.Module):
    def __init__(self, vocab, seq, dim):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))

    def forward(self, x):
        return self.tok(x) + self.pos[:x.shape[1]]


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then an MLP."""

    def __init__(self, dim, heads, mlp=None, amp=None):
        super().__init__()
        self.heads = heads
        # A dtype, which a checkpoint does not record (its settings are
        # plain numbers and strings): a run may resume in another
        # precision.
        self.amp = amp
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = mlp(dim) if mlp is not None else nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=self.amp or torch.bfloat16,
                            enabled=self.amp is not None):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            shape = (b, t, self.heads, d // self.heads)
            q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
            w = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            a = F.softmax(w.masked_fill(mask, float("-inf")), dim=-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            # The residual stream stays float32: what goes between two
            # pipeline stages.
            return (x + self.mlp(self.ln2(x))).float()


class Head(nn.Module):
    def __init__(self, dim, vocab):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        return self.out(self.ln(x)).float()


def build(args, mlp=None):
    """The model: nn.Sequential(Embed, Block x args.layers, Head)."""
    amp = torch.bfloat16 if args.bf16 else None
    return nn.Sequential(
        Embed(args.vocab, args.seq, args.dim),
        *[Block(args.dim, args.heads, mlp, amp) for _ in range(args.layers)],
        Head(args.dim, args.vocab))


def dataset(args):
    """Sequences that count up by a step of 1 to 4 from a random start
    (modulo the vocabulary), as (input, target) pairs: the target is the
    input shifted by one token, which the model learns to predict from
    the context. The same on every rank (seeded)."""
    g = torch.Generator().manual_seed(args.seed)
    start = torch.randint(0, args.vocab, (args.samples, 1), generator=g)
    step = torch.randint(1, 5, (args.samples, 1), generator=g)
    tokens = (start + step * torch.arange(args.seq + 1)) % args.vocab
    return [(tokens[i, :-1], tokens[i, 1:]) for i in range(args.samples)]


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           targets.reshape(-1))


def warmup_cosine(optimizer, warmup, total):
    """Linear warm-up over warmup steps, then a cosine decay to a tenth."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        done = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, done)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
