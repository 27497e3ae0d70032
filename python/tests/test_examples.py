"""python/examples and bench/python, run briefly on CPU: train_sage.py against tiergnn train on
Cora, every example's flow on a small generated graph, train_ddp.py against one process,
train_pyg.py's skip (and its NeighborSampler conventions through a stand-in SAGEConv), the
PyG+ loader's sampling, compare.py and overhead.py.

The CLI is TG_CLI (else the repository's build/tiergnn); Cora is TG_SHARED_DIR/datasets/cora.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tiergnn = pytest.importorskip("tiergnn")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "python" / "examples"
BENCH = ROOT / "bench" / "python"
CLI = os.environ.get("TG_CLI", str(ROOT / "build" / "tiergnn"))
SHARED = Path(os.environ.get("TG_SHARED_DIR", ROOT.parent / "shared"))
PY = sys.executable

sys.path[:0] = [str(EXAMPLES), str(BENCH)]
train_sage = importlib.import_module("train_sage")
pygplus_loader = importlib.import_module("pygplus_loader")


def cli(*args):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no CLI at {CLI} (set TG_CLI)")
    r = subprocess.run([CLI, "-q", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(tiergnn.__path__[0]),
                                                  e.get("PYTHONPATH", "")] if p)
    return e


def json_lines(text):
    return [json.loads(s) for s in text.splitlines() if s.startswith("{")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    base = os.environ.get("TG_TEST_TMP")
    if base:
        d = Path(base) / "examples"
        d.mkdir(parents=True, exist_ok=True)
        return d
    return tmp_path_factory.mktemp("examples")


@pytest.fixture(scope="module")
def cora(workdir):
    src = SHARED / "datasets" / "cora"
    if not src.is_dir():
        pytest.skip(f"no Cora at {src} (set TG_SHARED_DIR)")
    d = workdir / "cora"
    if not (d / "meta.txt").exists():
        cli("import", d, "--from", "ogb", src, "--split", "planetoid", "--overwrite")
    return d


@pytest.fixture(scope="module")
def small(workdir):
    d = workdir / "small"
    cli("generate", d, "--nodes", 4000, "--avg-degree", 10, "--feat-dim", 32, "--classes", 8,
        "--train-frac", 0.3, "--valid-frac", 0.1, "--test-frac", 0.1, "--seed", 1,
        "--overwrite")
    return d


# The Cora comparison: hidden 64 and sampled batches keep one run's spread at about half a
# point (dropout masks and initial weights differ between the two); 8 seeds a side put the
# means' difference within 1 point but for a chance of about 1%.
CORA = ["--layers", "2", "--hidden", "64", "--fanouts", "10,10", "--batch-size", "32",
        "--epochs", "30", "--weight-decay", "5e-4", "--normalize-features", "--eval-every", "0"]
SEEDS = range(1, 9)


def test_train_sage_within_one_point_of_tiergnn_on_cora(cora, workdir):
    ours, theirs = [], []
    for s in SEEDS:
        out = workdir / f"cora-sage-{s}"
        shutil.rmtree(out, ignore_errors=True)
        lines = json_lines(cli("train", cora, "--strategy", "memory", "--model", "sage", *CORA,
                               "--checkpoint-every", "0", "--seed", s, "--threads", 1,
                               "--out", out, "--json"))
        theirs.append(lines[-1]["test_acc"])
        got = train_sage.main([str(cora), "--strategy", "memory", *CORA, "--seed", str(s),
                               "--threads", "1", "--json"])
        ours.append(got["test_acc"])
    diff = abs(np.mean(ours) - np.mean(theirs))
    assert diff <= 0.01, (ours, theirs)
    assert np.mean(ours) > 0.77, ours  # GraphSAGE on Cora: about 80%


@pytest.mark.parametrize("strategy", ["gnndrive", "ginex", "diskgnn", "gids"])
def test_train_sage_strategies(small, strategy, capsys):
    got = train_sage.main([str(small), "--strategy", strategy, "--mem", "256M", "--layers", "2",
                           "--hidden", "32", "--fanouts", "5,5", "--batch-size", "256",
                           "--epochs", "2", "--eval-every", "1", "--eval-fanouts", "train",
                           "--eval-max-nodes", "200", "--threads", "1", "--json"])
    recs = json_lines(capsys.readouterr().out)
    epochs = [r for r in recs if "epoch" in r]
    assert [r["epoch"] for r in epochs] == [1, 2]
    for r in epochs:
        assert r["batches"] == 5 and r["time_s"] > 0 and 0 <= r["wait_s"] <= r["time_s"]
        assert 0 <= r["test_acc"] <= 1
    assert got["test_acc"] > 0.3  # 8 classes: chance is 0.125


def test_train_sage_json_without_eval(small):
    r = subprocess.run([PY, str(EXAMPLES / "train_sage.py"), str(small), "--strategy", "mmap",
                        "--layers", "2", "--hidden", "16", "--fanouts", "5,5", "--epochs", "1",
                        "--max-batches", "2", "--json", "--threads", "1"],
                       capture_output=True, text=True, env=env())
    assert r.returncode == 0, r.stderr
    recs = json_lines(r.stdout)
    assert recs[0]["batches"] == 2 and "time_s" in recs[0] and "wait_s" in recs[0]
    assert recs[-1]["summary"]


def test_train_sage_refused_mem_says_why(small):
    r = subprocess.run([PY, str(EXAMPLES / "train_sage.py"), str(small), "--strategy",
                        "gnndrive", "--mem", "2M", "--epochs", "1", "--threads", "1"],
                       capture_output=True, text=True, env=env())
    assert r.returncode != 0
    assert "--mem" in r.stderr


# train_ddp.py: 2 ranks of batch 16 step on 32 seeds, as one process with batch 32 does (the
# rank rule leaves up to one batch per epoch unused). Tolerance: 3 points between the means
# of 2 seeds a side (one run's spread is about 1 point; 2 processes cost most of this test).
def test_train_ddp_reaches_one_process(cora):
    two, one = [], []
    for s in (1, 2):
        args = [str(cora), "--strategy", "memory", "--layers", "2", "--hidden", "64",
                "--fanouts", "10,10", "--epochs", "30", "--weight-decay", "5e-4",
                "--normalize-features", "--eval-every", "0", "--seed", str(s), "--threads",
                "1", "--json"]
        r = subprocess.run([PY, str(EXAMPLES / "train_ddp.py"), "--world-size", "2", *args,
                            "--batch-size", "16"], capture_output=True, text=True, env=env(),
                           timeout=300)
        assert r.returncode == 0, r.stderr
        recs = json_lines(r.stdout)
        assert recs[-1]["summary"] and recs[-1]["world_size"] == 2
        assert all(x["batches"] == 4 for x in recs[:-1])  # floor(9 / 2) batches per rank
        two.append(recs[-1]["test_acc"])
        one.append(train_sage.main(args + ["--batch-size", "32"])["test_acc"])
    assert abs(np.mean(two) - np.mean(one)) <= 0.03, (two, one)
    assert min(two) > 0.75, two  # GraphSAGE on Cora: about 80%


# ---------------------------------------------------------------- train_pyg.py


def test_train_pyg_without_pyg_exits_77(small):
    try:
        import torch_geometric  # noqa: F401
        pytest.skip("PyG is installed: the skip path does not run")
    except ImportError:
        pass
    r = subprocess.run([PY, str(EXAMPLES / "train_pyg.py"), str(small)], capture_output=True,
                       text=True, env=env())
    assert r.returncode == 77
    assert "torch_geometric" in r.stderr and "not installed" in r.stderr


# A stand-in for PyG's SAGEConv with its documented semantics (lin_l on the mean of the
# sources' features, with the bias; lin_r on the targets' own; (x_src, x_dst) and edge_index
# rows (source, target)), so that train_pyg.py's use of batch.adjs is checked without PyG.
PYG_STUB = '''
import torch
class Linear(torch.nn.Linear):
    pass
class SAGEConv(torch.nn.Module):
    def __init__(self, in_channels, out_channels, aggr="mean", bias=True):
        super().__init__()
        assert aggr == "mean"
        self.lin_l = Linear(in_channels, out_channels, bias=bias)
        self.lin_r = Linear(in_channels, out_channels, bias=False)
    def forward(self, x, edge_index):
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        src, dst = edge_index
        agg = x_src.new_zeros((x_dst.shape[0], x_src.shape[1]))
        agg.index_add_(0, dst, x_src[src])
        deg = torch.bincount(dst, minlength=x_dst.shape[0]).clamp(min=1)
        return self.lin_l(agg / deg.unsqueeze(1)) + self.lin_r(x_dst)
'''


def test_train_pyg_adjs_conventions_with_a_stand_in(cora, tmp_path):
    pkg = tmp_path / "torch_geometric"
    (pkg / "nn").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "nn" / "__init__.py").write_text(textwrap.dedent(PYG_STUB))
    e = env()
    e["PYTHONPATH"] = str(tmp_path) + os.pathsep + e["PYTHONPATH"]
    r = subprocess.run([PY, str(EXAMPLES / "train_pyg.py"), str(cora), "--strategy", "memory",
                        *CORA, "--seed", "1", "--threads", "1", "--json"],
                       capture_output=True, text=True, env=e)
    assert r.returncode == 0, r.stderr
    assert json_lines(r.stdout)[-1]["test_acc"] > 0.75


# ---------------------------------------------------------------- the PyG+ loader, bench/


def test_pygplus_loader_samples_as_tiergnn(small):
    L = pygplus_loader.PygPlusLoader(str(small), "train", [5, 3], 256, seed=1)
    batches = list(L)
    assert len(batches) == 5 and sum(b.batch_size for b in batches) == 1200
    seen = set()
    for b in batches:
        nodes = b.n_id
        assert len(np.unique(nodes)) == len(nodes)
        seen.update(nodes[:b.batch_size].tolist())
        for l, blk in enumerate(b.blocks):
            f = L.fanouts[l]
            dst = nodes[:blk.num_dst]
            deg = L.indptr[dst + 1] - L.indptr[dst]
            assert np.array_equal(np.diff(blk.indptr), np.minimum(deg, f))
            assert blk.indices.max() < blk.num_src
            for i in range(blk.num_dst):
                nb = nodes[blk.indices[blk.indptr[i]:blk.indptr[i + 1]]].tolist()
                allnb = L.indices[L.indptr[dst[i]]:L.indptr[dst[i] + 1]].tolist()
                assert len(set(nb)) == len(nb) and set(nb) <= set(allnb)
        assert b.blocks[-1].num_dst == b.batch_size
        assert b.blocks[0].num_src == len(nodes)
        assert np.array_equal(np.asarray(b.x), np.asarray(L.x[nodes]))
        ei, _, size = b.adjs[0]
        assert tuple(size) == (b.blocks[0].num_src, b.blocks[0].num_dst)
        assert int(ei.shape[1]) == len(b.blocks[0].indices)
    assert seen == set(np.fromfile(small / "train_idx.bin", dtype=np.uint32).tolist())


def test_compare_and_overhead_run(small, tmp_path):
    r = subprocess.run([PY, str(BENCH / "compare.py"), str(small), "--mem", "0",
                        "--strategies", "gnndrive", "--layers", "2", "--hidden", "16",
                        "--fanouts", "5,5", "--batch-size", "256", "--epochs", "1",
                        "--eval-max-nodes", "100", "--threads", "1", "--out",
                        str(tmp_path / "cmp")], capture_output=True, text=True, env=env())
    assert r.returncode == 0, r.stderr
    assert "| tiergnn gnndrive |" in r.stdout and "| pygplus |" in r.stdout
    assert "failed" not in r.stdout
    r = subprocess.run([PY, str(BENCH / "overhead.py"), str(small), "--mem", "0", "--modes",
                        "python", "--strategies", "memory,gnndrive", "--fanouts", "5,5",
                        "--batch-size", "256", "--epochs", "2", "--touch", "all",
                        "--set", "gnndrive:max-batches=2", "--out",
                        str(tmp_path / "ovh")], capture_output=True, text=True, env=env())
    assert r.returncode == 0, r.stderr
    table, _, summary = r.stdout.partition("\n\n")
    rows = [s for s in table.splitlines() if s.startswith(("| memory", "| gnndrive"))]
    assert len(rows) == 6 and not any("failed" in s for s in rows), r.stdout  # 2 epochs + all
    # the summary: one row per strategy, gnndrive's 2 batches per epoch by --set
    rows = [s for s in summary.splitlines() if s.startswith(("| memory", "| gnndrive"))]
    assert len(rows) == 2 and not any("failed" in s for s in rows), r.stdout
    assert rows[1].startswith("| gnndrive | none, 2 batches |"), r.stdout
    assert "| gnndrive | 1 | 2 |" in table, r.stdout
    # --set names what it expects
    r = subprocess.run([PY, str(BENCH / "overhead.py"), str(small), "--strategies", "memory",
                        "--set", "gids:mem=1G", "--out", str(tmp_path / "ovh2")],
                       capture_output=True, text=True, env=env())
    assert r.returncode != 0
    assert "--set gids:mem=1G: expected STRATEGY:KEY=VALUE with STRATEGY one of memory" in r.stderr


def test_gpu_script_flow_on_cpu(tmp_path):
    """bench/gpu/run.sh as on the GPU machine, on CPU and a small graph, with this build."""
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no CLI at {CLI} (set TG_CLI)")
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu" / "run.sh"), "--device", "cpu",
                        "--nodes", "10000", "--batch-size", "50", "--epochs", "1",
                        "--strategies", "diskgnn,gnndrive", "--mem", "512M", "--torch-mem", "200M",
                        "--eval-max-nodes", "50", "--tiergnn", CLI, "--pythonpath",
                        os.path.dirname(tiergnn.__path__[0]), "--python", PY, "--work",
                        str(tmp_path)], capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [s for s in r.stdout.splitlines() if s.startswith("| tiergnn-") or
            s.startswith("| pyg")]
    assert len(rows) == 3 and not any("failed" in s for s in rows), r.stdout + r.stderr


def test_bench_loader_pass_and_loader_agree(small):
    """bench/bench_loader (a -DTG_BENCH=ON build, beside the CLI): the engine's pass and the C
    loader drained yield the same batches per epoch, and say so in one JSON line each."""
    exe = Path(CLI).parent / "bench_loader"
    if not os.access(exe, os.X_OK):
        pytest.skip(f"no {exe} (a -DTG_BENCH=ON build)")
    for s in ("gnndrive", "diskgnn", "hier"):
        got = {}
        for mode in ("pass", "loader"):
            r = subprocess.run([str(exe), str(small), "--mode", mode, "--strategy", s, "--mem",
                                "128M", "--fanouts", "5,5", "--batch-size", "256",
                                "--epochs", "2"], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            recs = json_lines(r.stdout)
            assert [x["epoch"] for x in recs] == [0, 1] and all(x["mode"] == mode for x in recs)
            got[mode] = [x["batches"] for x in recs]
        assert got["pass"] == got["loader"] and got["pass"][0] > 0, (s, got)
    r = subprocess.run([str(exe), str(small), "--mode", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
