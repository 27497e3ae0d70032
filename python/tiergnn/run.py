"""tiergnn's trainer, evaluation, inference, generator and importers, from Python.

    ds = tiergnn.generate("data/g", nodes=100000, feat_dim=64, classes=8)
    for epoch in tiergnn.train(ds, "runs/g", strategy="diskgnn", mem="1200M", fanouts=[10, 10],
                               epochs=3, disk_budget="4G"):
        print(epoch["epoch"], epoch["train_loss"], epoch["valid_acc"])
    tiergnn.evaluate(ds, "runs/g", split="test")           # {"acc", "loss", "count", "epoch"}
    pred, emb = tiergnn.infer(ds, "runs/g", "runs/g/pred", embeddings=True)

Options are the CLI's, with dashes as underscores (`tiergnn train --help`, `tiergnn strategies
NAME`): batch_size=1024 is --batch-size 1024, a list is comma-separated (fanouts=[10, 10] is
--fanouts 10,10), True is a flag (normalize_features=True), False and None leave an option out.
They are parsed by the CLI's own parsers, so defaults, checks and messages are the CLI's (an
unknown option names the nearest one), and a run gives what `tiergnn train` with the same
options gives, checkpoint for checkpoint. Every failure raises TierGNNError (a missing file:
FileNotFoundError too) with tiergnn's message.
"""

import atexit
import json
import os
import shutil
import sys
import tempfile

import numpy as np

from . import _run
from .dataset import Dataset, _map


def _value(v):
    if isinstance(v, (list, tuple)):
        return ",".join(_value(x) for x in v)
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(v)) if not isinstance(v, str) else v
    return str(v)


def _argv(opts, positional):
    """The CLI's argv for keyword options and positional arguments: --name=value, --flag,
    then "--" and the positional ones (a path starting with "--" stays a path)."""
    argv = []
    for key, v in opts.items():
        if isinstance(v, np.bool_):
            v = bool(v)
        if v is None or v is False:
            continue
        name = "--" + key.replace("_", "-")
        argv.append(name if v is True else f"{name}={_value(v)}")
    return argv + ["--"] + [os.fsdecode(os.fspath(p)) for p in positional]


# ---------------------------------------------------------------- training


_running = set()  # the runs started and not joined, for _stop_all


@atexit.register
def _stop_all():
    """At the interpreter's exit, runs whose generators were never closed stop at their next
    batch (with a resumable checkpoint) and their threads are joined."""
    for run in list(_running):
        run.stop()
        try:
            run.join()
        except Exception as e:  # joined all the same; the CLI would have said it on stderr
            print(f"tiergnn: {e}", file=sys.stderr)


def _is_epoch(d):
    return "epoch" in d and "best_epoch" not in d


def _epochs(run):
    """Yields the run's epoch lines as dicts; returns its final line (RUNDIR/result.json)."""
    final, ended = None, False
    run.start()
    _running.add(run)
    try:
        while not ended:
            line = run.readline()
            ended = line is None
            d = {} if ended else json.loads(line)
            if _is_epoch(d):
                yield d
            elif d:
                final = d
    finally:
        # an early close(), an exception in the consumer or Ctrl-C: the run stops at the next
        # batch (writing a checkpoint that resume=True continues) and its thread is joined
        if not ended:
            run.stop()
        _running.discard(run)
        run.join()
    return final


def train(dataset, out, progress=False, **opts):
    """Trains as `tiergnn train DATASET --out OUT [options]`: a generator of one dict per epoch
    (the JSON epoch line of --json), the run on a thread of its own with the GIL released.

    The options are parsed now (a bad one raises here); the run starts at the first next().
    Closing the generator early, an exception in the loop or KeyboardInterrupt stops the run at
    the next batch boundary, with a resumable checkpoint, and joins its thread. The generator's
    return value (StopIteration.value) is the final JSON object, also in OUT/result.json.
    progress=True draws the CLI's progress bar on stderr when it is a terminal.
    """
    run = _run.train_prepare(_argv(dict(opts, out=out), [dataset]), bool(progress))
    return _epochs(run)


def evaluate(dataset, checkpoint, split="test", **opts):
    """`tiergnn eval DATASET --checkpoint CHECKPOINT --split SPLIT --json`: a dict with split,
    acc, loss, count (labelled nodes) and epoch (the checkpoint's). CHECKPOINT: a run directory,
    or its best.bin / checkpoint.bin (last=True: the last checkpoint)."""
    return _run.evaluate(_argv(dict(opts, checkpoint=checkpoint, split=split), [dataset]))


def _outputs(path):
    """The arrays `tiergnn infer` wrote, as read-only memmaps, from the shapes in PATH.json."""
    with open(path + ".json") as f:
        info = json.load(f)
    n = info["num_nodes"]
    width = info.get("predictions_width", 1)
    shape = (n, width) if info.get("multi_label") else (n,)
    pred = _map(info["predictions"], np.dtype("<i4"), shape)
    if "embeddings" not in info:
        return pred, None
    emb = _map(info["embeddings"], np.dtype("<f4"), (n, info["embed_dim"]))
    return pred, emb



def infer(dataset, checkpoint, out, embeddings=False, **opts):
    """`tiergnn infer DATASET --checkpoint CHECKPOINT --out OUT`: the predictions of every node
    as a read-only memmap of OUT, int32 [N] (multi-label: [N, C] of 0/1); with embeddings=True
    the pair (predictions, embeddings), the latter a float32 [N, E] memmap of OUT.emb.
    format="npy" also writes OUT.npy (and OUT.emb.npy)."""
    r = _run.infer(_argv(dict(opts, checkpoint=checkpoint, out=out, embeddings=embeddings),
                         [dataset]))
    pred, emb = _outputs(r["out"])
    return (pred, emb) if embeddings else pred


# ---------------------------------------------------------------- datasets


def generate(path, **opts):
    """`tiergnn generate PATH --nodes N [options]` (nodes=, avg_degree=, feat_dim=, classes=,
    homophily=, seed=, mem=, overwrite=True, ...): a synthetic dataset, streamed within mem.
    Returns the Dataset."""
    _run.generate(_argv(opts, [path]))
    return Dataset(path)


def import_ogb(src, path, **opts):
    """`tiergnn import PATH --from ogb SRC [options]` (split=, undirected=True, dedup=True,
    self_loops=True, feat_dtype=, mem=, overwrite=True): an OGB node-property dataset in its
    raw layout, streamed within mem. Returns the Dataset."""
    _run.import_(_argv(dict(opts, **{"from": "ogb"}), [path, src]))
    return Dataset(path)


def _array(a):
    """A NumPy view of an array-like (a CPU torch.Tensor without a copy)."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        a = a.detach().cpu().numpy()
    return np.asarray(a)


_SPLIT_NAMES = ("train", "valid", "test")


def _split_ids(name, ids, n):
    ids = _array(ids)
    if ids.dtype == np.bool_:
        if ids.shape != (n,):
            raise ValueError(f"splits[{name!r}]: a mask must have shape ({n},), got {ids.shape}")
        return np.flatnonzero(ids)
    return ids.reshape(-1)


def _write_npy(tmp, edge_index, x, y, splits):
    # C order: np.save writes a Fortran-ordered array as such, which the importer refuses
    x = np.ascontiguousarray(_array(x))
    edge_index = np.ascontiguousarray(_array(edge_index))
    y = np.ascontiguousarray(_array(y))
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {edge_index.shape}")
    if y.ndim == 2 and y.shape[1] == 1:  # OGB's (N, 1) labels
        y = y.reshape(-1)
    unknown = set(splits) - set(_SPLIT_NAMES)
    if unknown:
        raise ValueError(f"splits: unknown name(s) {sorted(unknown)}; expected train, valid, test")
    np.save(os.path.join(tmp, "edge_index.npy"), edge_index)
    np.save(os.path.join(tmp, "feat.npy"), x)
    np.save(os.path.join(tmp, "labels.npy"), y)
    n = x.shape[0] if x.ndim else 0
    for name in _SPLIT_NAMES:
        ids = splits.get(name)
        ids = np.zeros(0, np.int64) if ids is None else _split_ids(name, ids, n)
        np.save(os.path.join(tmp, name + "_idx.npy"), ids)


def from_numpy(path, edge_index, x, y, splits, mem=None, **opts):
    """A dataset at PATH from arrays, through `tiergnn import --from npy`: edge_index [2, E]
    integer (row 0 the source, row 1 the target: PyG's convention), x [N, D] float16 / float32 /
    float64, y [N] integer labels (-1 = unlabelled; [N, 1] taken as [N]) or [N, C] of 0/1,
    splits {"train": ids, "valid": ids, "test": ids} (int ids or bool masks of length N; a name
    left out is an empty split). NumPy arrays or CPU torch tensors. The arrays are written as
    .npy files into a temporary directory beside PATH, removed at the end; the import streams
    them within mem and, as every import, leaves no half-written PATH on error. Options as
    `tiergnn import` (undirected=True, dedup=True, self_loops=True, feat_dtype="f16",
    overwrite=True). Returns the Dataset."""
    path = os.fsdecode(os.fspath(path))
    parent = os.path.dirname(os.path.abspath(path))
    tmp = tempfile.mkdtemp(prefix=os.path.basename(path) + ".npy-", dir=parent)
    try:
        _write_npy(tmp, edge_index, x, y, dict(splits))
        _run.import_(_argv(dict(opts, mem=mem, **{"from": "npy"}), [path, tmp]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Dataset(path)
