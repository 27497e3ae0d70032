#!/usr/bin/env python3
"""compare.py - the same plain-PyTorch GraphSAGE (python/examples/train_sage.py) trained on
tiergnn's loader with several strategies and on a loader written the PyG+ way
(pygplus_loader.py), each run cold in its own cgroup of --mem: epoch times side by side.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/compare.py data/g4m --mem 1200M \\
        --strategies diskgnn,ginex,gids --epochs 2 --out runs/compare

Model and batches as the issue asks: 3 x 256, fanouts 10,10,10, batch 1000 (--layers, --hidden,
--fanouts, --batch-size). Every run: membudget --evict DATASET MEM -- python3 ... (MEM 0: no
cgroup). tiergnn's loader gets --mem less --torch-mem (the model's activations and torch's
allocator, outside the loader's budget); the PyG+ loader has no budget: the cgroup is its
limit, and the page cache holds what the process leaves. After the last epoch each run
evaluates on --eval-max-nodes nodes of valid and test with the training fanouts (not timed
in the epochs). Prints a table and writes it, with every run's JSON lines and log, under --out.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "python", "examples")
sys.path.insert(0, HERE)
from overhead import default_membudget  # noqa: E402


def model_flags(a):
    flags = ["--layers", str(a.layers), "--hidden", str(a.hidden), "--fanouts", a.fanouts,
             "--batch-size", str(a.batch_size), "--epochs", str(a.epochs), "--seed", str(a.seed),
             "--eval-every", "0", "--eval-fanouts", "train", "--eval-max-nodes",
             str(a.eval_max_nodes), "--malloc-threshold", a.malloc_threshold, "--json"]
    if a.threads:
        flags += ["--threads", str(a.threads)]
    if a.max_batches:
        flags += ["--max-batches", str(a.max_batches)]
    return flags


def split_sample(a, split, path):
    """train_sage.py's eval_seeds without tiergnn: the split, or its fixed random sample."""
    import numpy as np
    from pygplus_loader import read_meta

    dt = np.uint32 if read_meta(path)["index_dtype"] == "u32" else np.uint64
    s = np.fromfile(os.path.join(path, split + "_idx.bin"), dtype=dt).astype(np.int64)
    if a.eval_max_nodes and a.eval_max_nodes < len(s):
        rng = np.random.default_rng([a.seed, {"valid": 1, "test": 2}[split]])
        s = np.sort(rng.choice(s, a.eval_max_nodes, replace=False))
    return s


def pygplus_one(argv, prefetch, advice):
    """One run on the PyG+ loader: train_sage.py's model and loop, JSON lines as its."""
    sys.path.insert(0, EXAMPLES)
    import train_sage as ts
    from pygplus_loader import PygPlusLoader

    a = ts.parse_args(argv)
    ts.set_malloc_threshold(a.malloc_threshold)
    torch = ts.torch
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    t = time.perf_counter()
    loader = PygPlusLoader(a.dataset, "train", a.fanouts, a.batch_size, seed=a.seed,
                           prefetch=prefetch, max_batches=a.max_batches, advice=advice)
    open_s = time.perf_counter() - t
    model = ts.SAGE(loader.feat_dim, a.hidden, loader.num_classes, a.layers, a.dropout,
                    a.input_dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    for epoch in range(a.epochs):
        timer = ts.Timer()
        loader.set_epoch(epoch)
        rec = {"epoch": epoch + 1, "loader": "pygplus"}
        if epoch == 0:
            rec["open_s"] = open_s
        rec.update(ts.train_epoch(model, opt, loader, a, device, timer))
        rec["time_s"] = timer.elapsed()
        rec["wait_s"] = timer.wait
        if epoch + 1 == a.epochs:
            t = time.perf_counter()
            for split in ("valid", "test"):
                ev = PygPlusLoader(a.dataset, split_sample(a, split, a.dataset), a.fanouts,
                                   a.eval_batch_size or a.batch_size, shuffle=False,
                                   seed=a.seed, prefetch=0, advice=advice)
                rec[split + "_acc"] = accuracy(ts, model, ev, a, device)
            rec["eval_s"] = time.perf_counter() - t
        print(json.dumps(rec), flush=True)


def accuracy(ts, model, loader, a, device):
    torch = ts.torch
    model.eval()
    correct = count = 0
    with torch.no_grad():
        for b in loader:
            x, edges, y = ts.batch_inputs(b, device, a.normalize_features)
            out = model(x, edges)
            m = y >= 0
            correct += int((out[m].argmax(1) == y[m]).sum())
            count += int(m.sum())
    return correct / max(count, 1)


def run(cmd, a, log):
    if a.mem != "0" and a.membudget:
        cmd = [a.membudget, "--evict", a.dataset, a.mem, "--"] + cmd
    env = dict(os.environ)
    with open(log, "w") as err:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    recs = [json.loads(s) for s in p.stdout.splitlines() if s.startswith("{")]
    return p.returncode, [r for r in recs if not r.get("summary")]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one-pygplus":
        argv, prefetch = sys.argv[2:], 1
        if "--prefetch" in argv:
            i = argv.index("--prefetch")
            prefetch = int(argv[i + 1])
            del argv[i:i + 2]
        advice = "random"
        if "--advice" in argv:
            i = argv.index("--advice")
            advice = argv[i + 1]
            del argv[i:i + 2]
        return pygplus_one(argv, prefetch, advice)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--mem", default="1200M", help="each run's cgroup limit (0: none)")
    p.add_argument("--torch-mem", default="300M", help="taken off --mem for tiergnn's loader")
    p.add_argument("--strategies", default="diskgnn,ginex,gids")
    p.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE",
                   help="a strategy option for every tiergnn run (train_sage.py --opt)")
    p.add_argument("--no-pygplus", action="store_true")
    p.add_argument("--prefetch", type=int, default=1, help="PyG+ batches prepared ahead")
    p.add_argument("--advice", choices=("random", "normal"), default="random",
                   help="madvise of the PyG+ memmap (normal: the device's read-ahead per fault)")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--fanouts", default="10,10,10")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-batches", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--eval-max-nodes", type=int, default=5000)
    p.add_argument("--malloc-threshold", default="2M",
                   help="train_sage.py's, for every run (glibc's M_MMAP_THRESHOLD; 0: glibc's)")
    p.add_argument("--membudget", default=default_membudget())
    p.add_argument("--out", default="runs/compare")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    runs = []
    for s in a.strategies.split(","):
        if s:
            cmd = [sys.executable, os.path.join(EXAMPLES, "train_sage.py"), a.dataset,
                   "--strategy", s, "--torch-mem", a.torch_mem] + model_flags(a)
            cmd += ["--mem", a.mem] if a.mem != "0" else []
            for o in a.opt:
                cmd += ["--opt", o]
            runs.append(("tiergnn " + s, cmd))
    if not a.no_pygplus:
        runs.append(("pygplus", [sys.executable, os.path.abspath(__file__), "--one-pygplus",
                                 a.dataset, "--prefetch", str(a.prefetch), "--advice", a.advice]
                     + model_flags(a)))
    results = []
    for name, cmd in runs:
        tag = name.replace(" ", "-")
        rc, recs = run(cmd, a, os.path.join(a.out, tag + ".log"))
        with open(os.path.join(a.out, tag + ".jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
        ok = rc == 0 and len(recs) == a.epochs
        print("%s: %s" % (name, "ok" if ok else "failed (rc %d, see %s.log)" % (rc, tag)),
              file=sys.stderr, flush=True)
        results.append((name, recs if ok else None))
    table = format_table(results, a.epochs)
    print(table)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table + "\n")


def format_table(results, epochs):
    base = dict(results).get("pygplus")
    head = ["loader"] + ["epoch %d s" % (e + 1) for e in range(epochs)]
    head += ["waiting %d s" % (e + 1) for e in range(epochs)]
    head += ["test acc", "pygplus / this (last epoch)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, recs in results:
        if not recs:
            out.append("| %s | failed |" % name)
            continue
        cells = ["%.2f" % r["time_s"] for r in recs] + ["%.2f" % r["wait_s"] for r in recs]
        cells.append("%.4f" % recs[-1].get("test_acc", float("nan")))
        cells.append("%.2fx" % (base[-1]["time_s"] / recs[-1]["time_s"]) if base else "-")
        out.append("| %s | %s |" % (name, " | ".join(cells)))
    return "\n".join(out)


if __name__ == "__main__":
    main()
