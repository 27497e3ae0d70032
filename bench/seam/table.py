#!/usr/bin/python3
"""The before/after table of bench/seam/before_after.sh's OUTDIR: per strategy (and repetition)
the epoch time (bench.csv's epoch_time_s: the mean of epochs 2..N), the first epoch, the disk
bytes read per epoch, after/before ratios, and whether the two checkpoints are the same bytes.
Usage: table.py OUTDIR"""
import csv, filecmp, os, re, sys

def ckpt(d):
    """The checkpoint.bin of the one run folder below a bench folder, or None."""
    for sub in sorted(os.listdir(d)):
        p = os.path.join(d, sub, "checkpoint.bin")
        if os.path.exists(p):
            return p
    return None

out = sys.argv[1]
rows = {}
for d in sorted(os.listdir(out)):
    m = re.match(r"(before|after)-(.+?)(?:-(\d+))?$", d)
    p = os.path.join(out, d, "bench.csv")
    if not m or not os.path.exists(p):
        continue
    with open(p) as f:
        r = next(csv.DictReader(f))
    rows.setdefault((m.group(2), m.group(3) or "1"), {})[m.group(1)] = (d, r)

print("| strategy | run | epoch s before | after | ratio | first epoch s before | after | disk read / epoch GiB before | after | checkpoints |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
for (s, rep), v in sorted(rows.items()):
    if "before" not in v or "after" not in v:
        continue
    (db, b), (da, a) = v["before"], v["after"]
    f = lambda r, k: float(r[k]) if r.get(k) not in (None, "", "n/a") else float("nan")
    eb, ea = f(b, "epoch_time_s"), f(a, "epoch_time_s")
    cb, ca = ckpt(os.path.join(out, db)), ckpt(os.path.join(out, da))
    same = "missing" if not (cb and ca) else "identical" if filecmp.cmp(cb, ca, shallow=False) else "DIFFER"
    gib = lambda r: f(r, "disk_read_bytes_per_epoch") / 2**30
    print(f"| {s} | {rep} | {eb:.2f} | {ea:.2f} | {ea / eb:.2f} | {f(b, 'first_epoch_s'):.2f} | {f(a, 'first_epoch_s'):.2f} | {gib(b):.2f} | {gib(a):.2f} | {same} |")
