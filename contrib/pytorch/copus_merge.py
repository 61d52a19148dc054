"""copus_merge: a copus checkpoint of copus_torch's Trainer or
PipelineTrainer, however it was sharded (pipeline stages, tensor slices,
a file per rank with save_all_ranks), as one ordinary PyTorch state_dict
of the whole, unsharded model:

    python3 -m copus_merge CKPT_DIR OUT.pt      (or copus-torch-merge)
    model.load_state_dict(torch.load("OUT.pt"))

or from Python, merge(ckpt_dir) -> state_dict (tensors on CPU).

It reads what libcopus wrote and nothing else, so it runs anywhere torch
does, without libcopus: the manifest copus.manifest of the checkpoint
directory (runtime/checkpoint-format.c) names the files, their sizes and
CRC-32s, the layout [data, tensor, pipeline] and the stages' layers. The
files are one per shard (pipeline stage and tensor slice), shard i being
pipeline rank i / tensor and tensor rank i % tensor; or, with
save_all_ranks, one per rank, of which data replica 0's are read. Each
file read is checked against its size and CRC-32 first. Trainer's files
hold the model's state_dict ("model") and which entries are slices of
which dimension ("tensor"); PipelineTrainer's hold each layer's state_dict
by layer number ("layers") and the slices by "<layer>.<name>" ("split").
Slices are joined along their dimension in tensor-rank order; an entry
that is not a slice is the first tensor rank's. Other keys are ignored.
"""

import argparse
import collections
import json
import os
import sys
import zlib

import torch

from copus_lib import CopusError, _reslice

MANIFEST = "copus.manifest"
PROG = "copus-torch-merge"


def read_manifest(ckpt_dir):
    """The manifest of ckpt_dir as a dict of what merging needs: step,
    world, all_ranks, layout (data, tensor, pipeline), data_inner, layers,
    stages (None when not recorded), files [(name, size, crc or None)]."""
    path = os.path.join(ckpt_dir, MANIFEST)
    try:
        with open(path, "rb") as f:
            o = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise CopusError("%s: no checkpoint manifest (is %s a copus "
                         "checkpoint directory?)" % (path, ckpt_dir))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CopusError("%s: unreadable manifest (%s)" % (path, e))

    def bad(field):
        return CopusError('%s: field "%s" is missing or invalid'
                          % (path, field))

    def count(v, field, low=0):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                v != int(v) or v < low:
            raise bad(field)
        return int(v)

    if not isinstance(o, dict):
        raise bad("the top level")
    version = count(o.get("copus_ckpt"), "copus_ckpt", 1)
    world = count(o.get("world"), "world", 1)
    step = count(o.get("step"), "step")
    layout = (world, 1, 1)
    if version >= 3:
        lay = o.get("layout")
        if not isinstance(lay, list) or len(lay) != 3:
            raise bad("layout")
        layout = tuple(count(x, "layout", 1) for x in lay)
        if layout[0] * layout[1] * layout[2] != world:
            raise bad("layout")
    layers = count(o.get("layers", 0), "layers")
    stages = o.get("stages")
    if stages is not None:
        if not isinstance(stages, list) or len(stages) != layout[2] + 1:
            raise bad("stages")
        stages = [count(x, "stages") for x in stages]
        if stages != sorted(stages) or stages[0] != 0 or \
                stages[-1] != layers:
            raise bad("stages")
    files = o.get("files")
    if not isinstance(files, list):
        raise bad("files")
    out = []
    for e in files:
        # Version 1 named each file with its size; 2 adds its CRC-32.
        if not isinstance(e, list) or len(e) not in (2, 3) or \
                not isinstance(e[0], str):
            raise bad("files")
        name = e[0]
        # A file name, never a path out of the directory.
        if "/" in name or name.startswith(".") or not name:
            raise bad("files")
        out.append((name, count(e[1], "files"),
                    count(e[2], "files") if len(e) == 3 else None))
    if version >= 2:
        all_ranks = count(o.get("save_all_ranks"), "save_all_ranks") != 0
    else:
        all_ranks = len(out) > 1
    want = world if all_ranks else layout[1] * layout[2]
    if out and len(out) != want:
        raise CopusError("%s: %d files for %d %s" % (
            path, len(out), want, "ranks" if all_ranks else "shards"))
    inner = o.get("data_inner", 0)
    return {"path": path, "step": step, "world": world,
            "all_ranks": all_ranks, "layout": layout,
            "data_inner": inner == 1, "layers": layers, "stages": stages,
            "files": out}


def coords(layout, data_inner, rank):
    """(data, pipeline, tensor) rank of rank in a layout (data, tensor,
    pipeline): copus_plan_coords_of_layout of copus/plan.h, tensor rank
    fastest, then pipeline, then data; with data_inner (the planner's
    layout) the data ranks inside the pipeline ranks."""
    data, tensor, pipeline = layout
    t = rank % tensor
    if data_inner:
        return (rank // tensor) % data, rank // tensor // data, t
    return rank // tensor // pipeline, (rank // tensor) % pipeline, t


def shard_files(m):
    """{(pipeline rank, tensor rank): index in m["files"]}: the file of
    each shard, data replica 0's when every rank saved."""
    data, tensor, pipeline = m["layout"]
    if not m["all_ranks"]:
        return {(i // tensor, i % tensor): i for i in range(len(m["files"]))}
    out = {}
    for r in range(len(m["files"])):
        d, p, t = coords(m["layout"], m["data_inner"], r)
        if d == 0:
            out[(p, t)] = r
    return out


def check_file(path, size, crc):
    """Refuse a file that is missing or not the size and CRC-32 the
    manifest names."""
    try:
        have = os.path.getsize(path)
    except OSError as e:
        raise CopusError("%s: the manifest names it, but it cannot be read "
                         "(%s)" % (path, e.strerror or e))
    if have != size:
        raise CopusError("%s: %d bytes, the manifest says %d (truncated or "
                         "replaced)" % (path, have, size))
    if crc is None:
        return
    got = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            got = zlib.crc32(chunk, got)
    if got != crc:
        raise CopusError("%s: CRC-32 %08x, the manifest says %08x (the file "
                         "is corrupt)" % (path, got, crc))


def _load(path, step):
    # As the adapter itself reads its files (torch.load's defaults).
    try:
        saved = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001  (any unpickling failure)
        raise CopusError("%s: not a file of torch.save (%s)"
                         % (path, str(e).splitlines()[0] if str(e) else
                            type(e).__name__))
    if not isinstance(saved, dict) or \
            ("model" not in saved and "layers" not in saved):
        raise CopusError("%s: not a checkpoint of copus_torch's Trainer or "
                         "PipelineTrainer" % path)
    if saved.get("step") != step:
        raise CopusError("%s holds step %r, the manifest says %d"
                         % (path, saved.get("step"), step))
    return saved


def _join(name, dim, pieces, paths):
    """A slice's whole tensor: pieces {tensor rank: slice} joined along
    dim in tensor-rank order."""
    first = pieces[0]
    for t, q in pieces.items():
        ok = torch.is_tensor(q) and q.dim() == first.dim() and \
            0 <= dim < q.dim() and q.shape == first.shape
        if not ok:
            raise CopusError(
                "the slices of %s do not join along dimension %d: %s holds "
                "%s, %s holds %s" % (
                    name, dim, paths[0], _shape(first), paths[t], _shape(q)))
    return _reslice(pieces, len(pieces), 1, 0, dim)


def _shape(q):
    return list(q.shape) if torch.is_tensor(q) else type(q).__name__


def _trainer(saved, paths, tensor):
    """Trainer's files of tensor ranks 0 .. tensor - 1: its model."""
    for t, s in saved.items():
        split = s.get("tensor")
        degree = split["degree"] if split else 1
        rank = split["rank"] if split else 0
        if (degree, rank) != (tensor, t) and tensor > 1:
            raise CopusError("%s holds tensor slice %d of %d; the manifest "
                             "makes it slice %d of %d"
                             % (paths[t], rank, degree, t, tensor))
    split = (saved[0].get("tensor") or {}).get("model", {}) \
        if tensor > 1 else {}
    out = collections.OrderedDict()
    for name, v in saved[0]["model"].items():
        if name not in split:
            out[name] = v
            continue
        pieces = {}
        for t, s in saved.items():
            if name not in s["model"]:
                raise CopusError("%s has no %s; %s has" % (paths[t], name,
                                                          paths[0]))
            pieces[t] = s["model"][name]
        out[name] = _join(name, split[name], pieces, paths)
    return out


def _pipeline(saved, paths, m):
    """PipelineTrainer's files by (pipeline rank, tensor rank): the
    nn.Sequential's state_dict, "<layer>.<name>"."""
    _, tensor, pipeline = m["layout"]
    where = {}
    for p in range(pipeline):
        have = set(saved[(p, 0)]["layers"])
        st = m["stages"]
        if st is not None and have != set(range(st[p], st[p + 1])):
            raise CopusError("%s holds layers %s; the manifest's stage %d is "
                             "layers %d to %d" % (
                                 paths[(p, 0)], sorted(have), p, st[p],
                                 st[p + 1] - 1))
        for t in range(1, tensor):
            if set(saved[(p, t)]["layers"]) != have:
                raise CopusError("%s holds layers %s, %s holds %s" % (
                    paths[(p, 0)], sorted(have), paths[(p, t)],
                    sorted(saved[(p, t)]["layers"])))
        for i in have:
            if i in where:
                raise CopusError("layer %d is in both %s and %s" % (
                    i, paths[(where[i], 0)], paths[(p, 0)]))
            where[i] = p
    missing = sorted(set(range(m["layers"])) - set(where))
    if missing:
        raise CopusError("layers %s of %d are in none of the files"
                         % (missing, m["layers"]))
    out = collections.OrderedDict()
    for i in sorted(where):
        p = where[i]
        split = saved[(p, 0)].get("split", {}) if tensor > 1 else {}
        for k, v in saved[(p, 0)]["layers"][i].items():
            name = "%d.%s" % (i, k)
            if name not in split:
                out[name] = v
                continue
            pieces, at = {}, {}
            for t in range(tensor):
                sd = saved[(p, t)]["layers"][i]
                if k not in sd:
                    raise CopusError("%s has no %s; %s has" % (
                        paths[(p, t)], name, paths[(p, 0)]))
                pieces[t], at[t] = sd[k], paths[(p, t)]
            out[name] = _join(name, split[name], pieces, at)
    return out


def _merge(ckpt_dir, step=None):
    m = read_manifest(ckpt_dir)
    if step is not None and step != m["step"]:
        raise CopusError("%s holds the checkpoint of step %d, not %d "
                         "(copus keeps the latest only)"
                         % (m["path"], m["step"], step))
    if not m["files"]:
        raise CopusError("%s: the checkpoint of step %d has no files (the "
                         "job saved none)" % (m["path"], m["step"]))
    _, tensor, pipeline = m["layout"]
    which = shard_files(m)
    saved, paths = {}, {}
    for key in sorted(which):
        name, size, crc = m["files"][which[key]]
        paths[key] = os.path.join(ckpt_dir, name)
        check_file(paths[key], size, crc)
        saved[key] = _load(paths[key], m["step"])
    kinds = {"layers" in s for s in saved.values()}
    if len(kinds) != 1:
        raise CopusError("%s: the files are of both Trainer and "
                         "PipelineTrainer" % m["path"])
    if kinds == {True}:
        state = _pipeline(saved, paths, m)
    elif pipeline != 1:
        raise CopusError("%s: Trainer's files in %d pipeline stages"
                         % (m["path"], pipeline))
    else:
        state = _trainer({t: saved[(0, t)] for t in range(tensor)},
                         {t: paths[(0, t)] for t in range(tensor)}, tensor)
    return state, m, len(saved)


def merge(ckpt_dir, step=None):
    """The whole model's state_dict of the checkpoint in ckpt_dir (tensors
    on CPU), for the plain, unsharded model's load_state_dict. step, when
    given, must be the checkpoint's. Raises CopusError with a message
    naming the file at fault."""
    return _merge(ckpt_dir, step)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog=PROG, description="Merge a copus checkpoint of copus_torch's "
        "Trainer or PipelineTrainer (pipeline stages, tensor slices, a file "
        "per rank) into one PyTorch state_dict of the whole model.")
    ap.add_argument("ckpt_dir", metavar="CKPT_DIR",
                    help="the checkpoint directory (holds copus.manifest)")
    ap.add_argument("out", metavar="OUT.pt", help="the file to write")
    ap.add_argument("--step", type=int, metavar="N",
                    help="refuse the checkpoint unless it is of step N")
    args = ap.parse_args(argv)
    try:
        state, m, nread = _merge(args.ckpt_dir, args.step)
        # Written whole or not at all: a temporary file, then a rename.
        tmp = args.out + ".tmp"
        try:
            # A file object of ours: torch.save's own opening of a path
            # fails with a RuntimeError, not an OSError.
            with open(tmp, "wb") as f:
                torch.save(state, f)
            os.replace(tmp, args.out)
        except OSError as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise CopusError("cannot write %s: %s" % (
                e.filename or args.out, e.strerror or e))
    except CopusError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    data, tensor, pipeline = m["layout"]
    print("%s: wrote %s: step %d, data %d x pipeline %d x tensor %d, %d "
          "file(s) read, %d tensors" % (PROG, args.out, m["step"], data,
                                        pipeline, tensor, nread, len(state)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
