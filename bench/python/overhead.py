#!/usr/bin/env python3
"""overhead.py - what tiergnn.Loader costs over the C engine: batches per second with a consumer
that does nothing, every strategy, three ways, each run cold in its own cgroup:

    pass    bench_loader --mode pass: the engine's own training pass, a step that returns at once
    c       bench_loader --mode loader: the C loader (tiergnn/loader.h) drained, each batch
            released as it comes
    python  `for batch in tiergnn.Loader(...): pass` (--touch x / all: also take batch.x /
            batch.x, batch.blocks and batch.adjs)

    PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py data/g4m --mem 1200M \\
        --bench-loader build/bench_loader --strategies gnndrive,ginex,diskgnn \\
        --fanouts 10,10,10 --batch-size 1000 --epochs 2 --out runs/overhead

Prints one table (batches/s per epoch; python / c and python / pass), then a summary over all
epochs (seconds, the ratios, GB read, the process's own memory the budget reserved, the cgroup's
peak), and writes every run's JSON lines, log and both tables under --out. Each run: membudget
--evict DATASET MEM -- ...; --mem 0 runs without a cgroup or a budget. Python over C within 10%
is the goal (issue 30).

--set STRATEGY:KEY=VALUE changes one strategy's runs: mem=M (its --mem and cgroup), max-batches=N,
or any other KEY as a strategy option (--opt KEY=VALUE). The shared bench's measurement of all
eight strategies is one command (bench/README.md, "Loader overhead"):

    PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py data/g4m --mem 1200M \
        --set memory:mem=0 --set mmap:max-batches=10 --out runs/py-overhead-all
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STRATEGIES = "memory,mmap,gnndrive,pagraph,ginex,diskgnn,hier,gids"


def default_membudget():
    for p in (os.environ.get("MEMBUDGET", ""), os.path.join(ROOT, "..", "shared", "tools",
                                                            "membudget")):
        if p and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def peak_rss():
    """The process's peak RSS so far (VmHWM), bytes; 0 when /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            for ln in f:
                if ln.startswith("VmHWM:"):
                    return int(ln.split()[1]) << 10
    except OSError:
        pass
    return 0


def python_one(a):
    """One Python run: the loader drained, one JSON line per epoch (bench_loader's keys)."""
    if not a.numpy:
        try:
            import torch  # noqa: F401  (the loader hands out tensors, as a trainer gets them)
        except ImportError:
            pass
    import tiergnn

    t0 = time.perf_counter()  # as bench_loader's: from before the open

    kw = {}
    for o in a.opt:
        k, _, v = o.partition("=")
        kw[k.replace("-", "_")] = v if v else True
    if a.max_batches:
        kw["max_batches"] = a.max_batches
    kw["max_held"] = 2  # bench_loader's (tg_loader_opts_default): the same slots, the same budget
    if a.numpy:
        kw["numpy"] = True
    L = tiergnn.Loader(a.dataset, "train", fanouts=[int(f) for f in a.fanouts.split(",")],
                       batch_size=a.batch_size, strategy=a.strategy, mem=a.mem if a.mem != "0"
                       else None, seed=a.seed, num_epochs=a.epochs, threads=a.threads, **kw)
    open_s = time.perf_counter() - t0
    try:
        name = L.info()["strategy"]
    except Exception:  # the figures are extra
        name = a.strategy
    for e in range(a.epochs):
        if e:
            t0 = time.perf_counter()
        L.set_epoch(e)
        n = 0
        for b in L:
            if a.touch != "none":
                b.x
                if a.touch == "all":
                    b.blocks
                    b.adjs
            n += 1
        t = time.perf_counter() - t0
        rec = {"mode": "python", "strategy": name, "epoch": e, "batches": n, "time_s": t,
               "batches_per_s": n / t if t > 0 else 0.0, "open_s": open_s if e == 0 else 0.0}
        try:
            st = L.stats()
            for k in ("copy_s", "wait_s", "stall_s", "io_read_bytes"):
                if k in st:
                    rec[k] = st[k]
        except Exception:
            pass
        rec["rss_peak_bytes"] = peak_rss()  # as bench_loader's (VmHWM)
        print(json.dumps(rec), flush=True)
    L.close()


def run(cmd, mem, dataset, membudget, log):
    if mem != "0" and membudget:
        cmd = [membudget, "--evict", dataset, mem, "--"] + cmd
    with open(log, "w") as err:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    recs = [json.loads(s) for s in p.stdout.splitlines() if s.startswith("{")]
    return p.returncode, recs


def log_figures(log):
    """What a run's log says of its memory: the process's own memory the budget plan reserved
    (MiB) and the cgroup's peak (membudget's line, MiB); None where absent."""
    proc = peak = None
    try:
        with open(log) as f:
            text = f.read()
    except OSError:
        return proc, peak
    m = re.search(r"memory budget [^:]*: process ([\d.]+) (KiB|MiB|GiB)", text)
    if m:
        proc = float(m.group(1)) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]
    m = re.search(r"membudget: limit=\d+ peak=(\d+)", text)
    if m:
        peak = int(m.group(1)) / 2**20
    return proc, peak


def size_bytes(v):
    """"1200M" (K, M, G: powers of 1024) or plain bytes."""
    v = str(v).strip()
    mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(v[-1:].upper(), 1)
    try:
        return int(float(v[:-1] if mult > 1 else v) * mult)
    except ValueError:
        sys.exit("overhead.py: %r: expected a size (1200M, 2G, bytes)" % v)


def parse_sets(sets, strategies):
    """--set STRATEGY:KEY=VALUE into {strategy: {key: value}}."""
    out = {}
    for x in sets:
        s, _, kv = x.partition(":")
        k, eq, v = kv.partition("=")
        if s not in strategies or not k or not eq:
            sys.exit("overhead.py: --set %s: expected STRATEGY:KEY=VALUE with STRATEGY one of %s"
                     % (x, ",".join(strategies)))
        out.setdefault(s, {})[k] = v
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--mem", default="1200M", help="cgroup limit and budget of every run (0: none)")
    p.add_argument("--strategies", default=STRATEGIES)
    p.add_argument("--modes", default="pass,c,python")
    p.add_argument("--fanouts", default="10,10,10")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-batches", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--python-extra", default="0", metavar="SIZE",
                   help="raise the Python runs' --mem and cgroup by SIZE (0: the same --mem): "
                        "the interpreter's own memory beyond bench_loader's (the summary's "
                        "process MiB), so that the strategy's caches are the same size")
    p.add_argument("--set", action="append", default=[], metavar="STRATEGY:KEY=VALUE",
                   help="one strategy's mem=M, max-batches=N or strategy option KEY=VALUE")
    p.add_argument("--touch", choices=("none", "x", "all"), default="none")
    p.add_argument("--numpy", action="store_true", help="NumPy arrays, torch not imported")
    p.add_argument("--bench-loader", default=os.path.join(ROOT, "build", "bench_loader"))
    p.add_argument("--membudget", default=default_membudget())
    p.add_argument("--out", default="runs/overhead")
    p.add_argument("--one", choices=("python",), help=argparse.SUPPRESS)
    p.add_argument("--strategy", default="auto", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        return python_one(a)
    os.makedirs(a.out, exist_ok=True)
    strategies = a.strategies.split(",")
    sets = parse_sets(a.set, strategies)
    modes = a.modes.split(",")
    if ("pass" in modes or "c" in modes) and not os.access(a.bench_loader, os.X_OK):
        sys.exit("overhead.py: %s not found: build it with `make bench` (-DTG_BENCH=ON)"
                 % a.bench_loader)
    rows, summary = [], []
    for s in strategies:
        mine = dict(sets.get(s, {}))
        mem = mine.pop("mem", a.mem)
        max_batches = int(mine.pop("max-batches", a.max_batches))
        common = ["--fanouts", a.fanouts, "--batch-size", str(a.batch_size), "--epochs",
                  str(a.epochs), "--seed", str(a.seed), "--threads", str(a.threads)]
        if max_batches:
            common += ["--max-batches", str(max_batches)]
        for o in a.opt + ["%s=%s" % kv for kv in mine.items()]:
            common += ["--opt", o]
        res, figs = {}, {}
        for m in modes:
            run_mem = mem
            if m == "python":
                if mem != "0" and size_bytes(a.python_extra):
                    run_mem = str(size_bytes(mem) + size_bytes(a.python_extra))
                cmd = [sys.executable, os.path.abspath(__file__), "--one", "python", a.dataset,
                       "--strategy", s, "--touch", a.touch, "--mem", run_mem] + common
                if a.numpy:
                    cmd.append("--numpy")
            else:
                cmd = [a.bench_loader, a.dataset, "--mode", "loader" if m == "c" else "pass",
                       "--strategy", s] + common + (["--mem", mem] if mem != "0" else [])
            log = os.path.join(a.out, "%s-%s.log" % (s, m))
            rc, recs = run(cmd, run_mem, a.dataset, a.membudget, log)
            with open(os.path.join(a.out, "%s-%s.jsonl" % (s, m)), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in recs)
            res[m] = recs if rc == 0 and len(recs) == a.epochs else None
            figs[m] = log_figures(log)
            print("%s %s: %s" % (s, m, "ok" if res[m] else "failed (rc %d, see %s)" % (rc, log)),
                  file=sys.stderr, flush=True)
        rows.append((s, res))
        summary.append((s, mem, max_batches, res, figs))
    table = format_table(rows, modes, a.epochs)
    total = format_summary(summary, modes, a.python_extra)
    print(table)
    print()
    print(total)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table + "\n\n" + total + "\n")


def format_table(rows, modes, epochs):
    head = "| strategy | epoch | batches | " + " | ".join("%s batches/s" % m for m in modes)
    extra = []
    if "python" in modes and "c" in modes:
        extra.append("python / c")
    if "python" in modes and "pass" in modes:
        extra.append("python / pass")
    head += "".join(" | " + e for e in extra) + " |"
    out = [head, "|" + "---|" * (3 + len(modes) + len(extra))]
    for s, res in rows:
        for e in range(epochs):
            r = {m: res[m][e] if res.get(m) else None for m in modes}
            nb = next((v["batches"] for v in r.values() if v), "-")
            cells = ["%.2f" % r[m]["batches_per_s"] if r[m] else "failed" for m in modes]
            for x in extra:
                num, den = x.split(" / ")
                if r.get(num) and r.get(den) and r[den]["batches_per_s"] > 0:
                    # time ratio: python's epoch over the reference's (1.10 = 10% slower)
                    cells.append("%.3f" % (r[num]["time_s"] / r[den]["time_s"]))
                else:
                    cells.append("-")
            out.append("| %s | %d | %s | %s |" % (s, e + 1, nb, " | ".join(cells)))
        # all epochs together: a strategy that prepares the next epoch during this one makes a
        # consumer that does nothing wait for it at the next epoch's start, whichever it is
        tot = {m: (sum(r["batches"] for r in res[m]), sum(r["time_s"] for r in res[m]))
               if res.get(m) else None for m in modes}
        cells = ["%.2f" % (tot[m][0] / tot[m][1]) if tot[m] else "failed" for m in modes]
        for x in extra:
            num, den = x.split(" / ")
            cells.append("**%.3f**" % (tot[num][1] / tot[den][1]) if tot.get(num) and tot.get(den)
                         else "-")
        nb = next((t[0] for t in tot.values() if t), "-")
        out.append("| %s | all | %s | %s |" % (s, nb, " | ".join(cells)))
    return "\n".join(out)


def format_summary(summary, modes, python_extra="0"):
    """All epochs per strategy: seconds, python / c and python / pass, GB read, the process's own
    memory the budget reserved and the cgroup's peak (MiB), mode by mode."""
    def cell(vals, fmt):
        return " / ".join(fmt % v if v is not None else "-" for v in vals)

    ratios = [x for x in ("c", "pass") if "python" in modes and x in modes]
    head = ("| strategy | --mem | " + " | ".join("%s s" % m for m in modes)
            + "".join(" | python / %s" % x for x in ratios)
            + " | GB read %s | process MiB %s | cgroup peak MiB %s |"
            % ((" / ".join(modes),) * 3))
    out = [head, "|" + "---|" * (2 + len(modes) + len(ratios) + 3)]
    for s, mem, max_batches, res, figs in summary:
        secs = {m: sum(r["time_s"] for r in res[m]) if res.get(m) else None for m in modes}
        cells = ["%.1f" % secs[m] if secs[m] is not None else "failed" for m in modes]
        for x in ratios:
            cells.append("**%.3f**" % (secs["python"] / secs[x])
                         if secs["python"] is not None and secs[x] else "-")
        gb = [sum(r.get("io_read_bytes", 0) for r in res[m]) / 1e9 if res.get(m) else None
              for m in modes]
        cells += [cell(gb, "%.1f"), cell([figs[m][0] for m in modes], "%.0f"),
                  cell([figs[m][1] for m in modes], "%.0f")]
        label = mem if mem != "0" else "none"
        if mem != "0" and size_bytes(python_extra) and "python" in modes:
            label += " (python +%s)" % python_extra
        if max_batches:
            label += ", %d batches" % max_batches
        out.append("| %s | %s | %s |" % (s, label, " | ".join(cells)))
    return "\n".join(out)


if __name__ == "__main__":
    main()
