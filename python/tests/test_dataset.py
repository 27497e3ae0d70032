"""tiergnn.Dataset, generate, import_ogb and from_numpy against the CLI and the files.

The CLI is TG_CLI (else the repository's build/tiergnn); the shared Cora copy is
TG_SHARED_DIR/datasets/cora (else ../shared beside the repository), skipped when absent.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiergnn

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("TG_CLI", str(ROOT / "build" / "tiergnn"))
SHARED = Path(os.environ.get("TG_SHARED_DIR", ROOT.parent / "shared"))
CORA = SHARED / "datasets" / "cora"
GEN = dict(nodes=3000, avg_degree=10, feat_dim=16, classes=4, seed=2, threads=2)


def cli(*args):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no CLI at {CLI} (set TG_CLI)")
    r = subprocess.run([CLI, "-q", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def file_lines(path):
    """The `file = NAME SIZE CRC` lines of meta.txt: the dataset's bytes, in short."""
    text = (Path(path) / "meta.txt").read_text()
    return [ln for ln in text.splitlines() if ln.startswith("file =")]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return tiergnn.generate(tmp_path_factory.mktemp("ds") / "g", **GEN)


def test_generate_is_the_cli_generate(ds, tmp_path):
    args = []
    for k, v in GEN.items():
        args += ["--" + k.replace("_", "-"), v]
    cli("generate", tmp_path / "c", *args)
    assert file_lines(ds.path) == file_lines(tmp_path / "c")
    assert isinstance(ds, tiergnn.Dataset)


def test_fields_match_cli_info(ds):
    text = cli("info", ds.path)
    num = lambda key: int(re.search(rf"^{key}:\s+(\d+)", text, re.M).group(1))  # noqa: E731
    assert (ds.num_nodes, ds.num_edges) == (num("nodes"), num("edges")) == (3000, ds.indptr[-1])
    assert re.search(rf"^features:\s+3000 x {ds.feat_dim} f32", text, re.M)
    assert ds.num_classes == 4 and not ds.multi_label
    info = ds.info()
    # the library's report is the CLI's, less the derived/ listing the CLI adds
    assert text.startswith(info["text"])
    for name, f in info["files"].items():
        assert re.search(rf"{re.escape(name)}\s+{f['size']} bytes .* crc32 {f['crc32']:08x}", text)
    deg = np.diff(ds.indptr.astype(np.int64))
    assert info["in_degree"]["min"] == deg.min() and info["in_degree"]["max"] == deg.max()
    assert info["in_degree"]["no_in_neighbours"] == int((deg == 0).sum())
    assert sum(info["histogram"].values()) == ds.num_nodes
    assert info["labels"]["counts"] == dict(enumerate(np.bincount(ds.labels, minlength=4)))
    assert info["splits"] == {"train": 1800, "valid": 600, "test": 600, "none": 0}
    assert info["total_bytes"] == sum(os.path.getsize(Path(ds.path) / n) for n in info["files"])


def test_features_are_a_memmap_of_the_file(ds):
    x = ds.features
    assert isinstance(x, np.memmap) and x is ds.features
    assert not x.flags.writeable and x.dtype == np.float32 and x.shape == (3000, 16)
    assert Path(x.filename) == Path(ds.path) / "features.bin" and x.offset == 0
    raw = np.fromfile(Path(ds.path) / "features.bin", dtype="<f4").reshape(3000, 16)
    assert np.array_equal(np.asarray(x), raw)
    with pytest.raises(ValueError):
        x[0, 0] = 1.0


def test_labels_splits_and_csc(ds):
    p = Path(ds.path)
    assert np.array_equal(ds.labels, np.fromfile(p / "labels.bin", dtype="<i4"))
    seen = []
    for name in ("train", "valid", "test"):
        ids = ds.split(name)
        assert ids.dtype == np.int64
        assert np.array_equal(ids, np.fromfile(p / f"{name}_idx.bin", dtype="<u4"))
        seen.append(ids)
    assert len(np.unique(np.concatenate(seen))) == ds.num_nodes
    assert ds.indices.dtype == np.uint32 and len(ds.indices) == ds.num_edges
    with pytest.raises(ValueError, match="expected one of train, valid, test"):
        ds.split("val")


def test_f16_features(tmp_path):
    d = tiergnn.generate(tmp_path / "h", nodes=200, feat_dim=8, classes=2, feat_dtype="f16")
    assert d.features.dtype == np.float16 and d.features.shape == (200, 8)


def test_bad_datasets_raise_with_the_message(ds, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a dataset directory"):
        tiergnn.Dataset(tmp_path / "none")
    bad = tmp_path / "bad"
    shutil.copytree(ds.path, bad)
    with open(bad / "features.bin", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(tiergnn.TierGNNError, match="features.bin") as e:
        tiergnn.Dataset(bad)
    assert "1000" in str(e.value)
    meta = (bad / "meta.txt").read_text().replace("feat_dtype = f32", "feat_dtype = f64")
    (bad / "meta.txt").write_text(meta)
    with pytest.raises(tiergnn.TierGNNError, match=r"meta.txt: line \d+: feat_dtype"):
        tiergnn.Dataset(bad)


def test_generate_bad_option(tmp_path):
    with pytest.raises(tiergnn.TierGNNError, match="did you mean --feat-dim"):
        tiergnn.generate(tmp_path / "x", nodes=10, feat_dmi=3)
    with pytest.raises(tiergnn.TierGNNError, match="--nodes is required"):
        tiergnn.generate(tmp_path / "x")
    assert not (tmp_path / "x").exists()


def arrays_of(d):
    """edge_index, x, y, splits of a Dataset, as a PyG user holds them."""
    dst = np.repeat(np.arange(d.num_nodes), np.diff(d.indptr.astype(np.int64)))
    edge_index = np.stack([np.asarray(d.indices, dtype=np.int64), dst])
    splits = {n: d.split(n) for n in ("train", "valid", "test")}
    return edge_index, np.asarray(d.features), np.asarray(d.labels), splits


def test_from_numpy_round_trip(ds, tmp_path):
    edge_index, x, y, splits = arrays_of(ds)
    # a mask for one split, a list for another: both are accepted
    mask = np.zeros(ds.num_nodes, bool)
    mask[splits["valid"]] = True
    splits["valid"] = mask
    splits["test"] = splits["test"].tolist()
    # Fortran-ordered features and a torch tensor of edges, where torch is installed
    x = np.asfortranarray(x)
    try:
        import torch
        edge_index = torch.from_numpy(edge_index)
    except ImportError:
        pass
    out = tiergnn.from_numpy(tmp_path / "r", edge_index, x, y, splits, mem="64M")
    assert file_lines(out.path) == file_lines(ds.path)
    assert sorted(os.listdir(tmp_path)) == ["r"]  # the temporary .npy files are gone


def test_from_numpy_errors_leave_nothing(tmp_path):
    x = np.zeros((4, 2), np.float32)
    y = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match=r"shape \(2, E\)"):
        tiergnn.from_numpy(tmp_path / "a", np.zeros((3, 2), np.int64), x, y, {})
    bad_edges = np.array([[0, 1], [1, 9]])
    with pytest.raises(tiergnn.TierGNNError, match="edge_index.npy.*out of range"):
        tiergnn.from_numpy(tmp_path / "a", bad_edges, x, y, {"train": [0, 1]})
    with pytest.raises(tiergnn.TierGNNError, match="did you mean --dedup"):
        tiergnn.from_numpy(tmp_path / "a", bad_edges, x, y, {}, dedpu=True)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not CORA.is_dir(), reason=f"no Cora at {CORA}")
def test_cora_import_and_from_numpy_match_the_cli(tmp_path):
    cli("import", tmp_path / "cli", "--from", "ogb", CORA, "--split", "planetoid")
    ogb = tiergnn.import_ogb(CORA, tmp_path / "py", split="planetoid")
    assert file_lines(ogb.path) == file_lines(tmp_path / "cli")
    assert (ogb.num_nodes, ogb.num_edges, ogb.feat_dim, ogb.num_classes) == (2708, 10556, 1433, 7)
    edge_index, x, y, splits = arrays_of(ogb)
    arr = tiergnn.from_numpy(tmp_path / "np", edge_index, x, y, splits)
    assert file_lines(arr.path) == file_lines(tmp_path / "cli")


def test_info_lists_derived_files(tmp_path):
    d = tiergnn.generate(tmp_path / "d", nodes=500, feat_dim=8, classes=2, threads=2)
    assert d.info()["derived"] == [{"dir": str(tmp_path / "d" / "derived"), "entries": []}]
    # a neighbour-cache share given: the planned split may leave the neighbour cache out
    for _ in tiergnn.train(d, tmp_path / "r", strategy="ginex", ginex_split=50, epochs=1,
                           hidden=8, threads=2):
        pass
    (listing,) = d.info()["derived"]
    text = cli("info", d.path)
    assert f"derived:    {listing['dir']} ({len(listing['entries'])} entries" in text
    for e in listing["entries"]:
        assert e["state"] == "valid" and e["bytes"] > 0
        assert re.search(rf"^  {e['kind']}\s+{re.escape(e['params'])}\s.*valid$", text, re.M)
