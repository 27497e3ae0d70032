#!/bin/sh
# Writes the seed corpora of fuzz/corpus/TARGET: a few small valid (and some nearly valid) inputs
# per target, the starting points the fuzzers mutate. fuzz_ckpt's seeds are real checkpoints,
# written by the target itself (TG_FUZZ_SEEDS), so it must be built first (make fuzz, or
# cmake --build build-fuzz --target fuzz_ckpt). Usage: fuzz/make_corpus.sh [FUZZ_BUILD]
set -eu
build=${1:-build-fuzz}
dir=$(dirname "$0")/corpus
seed() { # TARGET NAME: stdin to corpus/TARGET/NAME
    mkdir -p "$dir/$1"
    cat >"$dir/$1/$2"
}

# ---- fuzz_csv: byte 0 = reader flags (low nibble) and refill chunk (high nibble), then the file
printf '\0000,1\n1,2\n2,3\n' | seed fuzz_csv ints
printf '\021# comment\n1.5,-2e-3,nan\r\n,7\n\n3.25,1e308,-0\n' | seed fuzz_csv floats
printf '\000100\t200\n200 300 extra\n' | seed fuzz_csv tabs
{ printf '\000'; printf '1,2\n3,4\n5,6\n' | gzip -9n; } | seed fuzz_csv gzip

# ---- fuzz_meta: meta.txt text
seed fuzz_meta generated <<'EOF'
# tiergnn dataset (docs/FORMAT.md)
format_version = 1
num_nodes = 24
num_edges = 62
feat_dim = 3
feat_dtype = f32
index_dtype = u32
num_classes = 3
multi_label = 0
num_train = 14
num_valid = 4
num_test = 6
source = generate --nodes 24
# file = NAME SIZE_BYTES CRC32
file = indptr.bin 200 1a2b3c4d
file = indices.bin 248 00000000
file = features.bin 288 0badf00d
file = labels.bin 96 ffffffff
file = train_idx.bin 56 12345678
file = valid_idx.bin 16 9abcdef0
file = test_idx.bin 24 00c0ffee
EOF
sed -e 's/feat_dtype = f32/feat_dtype = f16/' -e 's/features.bin 288/features.bin 144/' \
    -e 's/multi_label = 0/multi_label = 1/' -e 's/labels.bin 96/labels.bin 288/' \
    "$dir/fuzz_meta/generated" | seed fuzz_meta f16-multi-label

# ---- fuzz_npy: .npy files, format 1.0 (f4, i8) and 2.0 (f8)
npy() { # MAJOR DESCR SHAPE DATA-BYTES...: the header padded to 64 bytes, then the data
    major=$1 descr=$2 shape=$3
    shift 3
    dict="{'descr': '$descr', 'fortran_order': False, 'shape': $shape, }"
    pre=$((major == 1 ? 10 : 12))
    len=$(((${#dict} + 1 + pre + 63) / 64 * 64 - pre))
    printf '\223NUMPY'
    if [ "$major" = 1 ]; then
        printf "\\001\\000\\$(printf %o $((len % 256)))\\$(printf %o $((len / 256)))"
    else
        printf "\\002\\000\\$(printf %o $((len % 256)))\\$(printf %o $((len / 256)))\\000\\000"
    fi
    printf "%-$((len - 1))s\n" "$dict"
    printf "$@"
}
npy 1 '<f4' '(2, 3)' '\000\000\200\077\000\000\000\100\000\000\100\100\000\000\200\100\000\000\240\100\000\000\300\100' |
    seed fuzz_npy f4-2x3
npy 1 '<i8' '(3,)' '\001\0\0\0\0\0\0\0\002\0\0\0\0\0\0\0\377\377\377\377\377\377\377\377' |
    seed fuzz_npy i8-3
npy 2 '<f8' '(1, 2)' '\0\0\0\0\0\0\360\077\0\0\0\0\0\0\0\100' | seed fuzz_npy f8-v2

# ---- fuzz_dataset: byte 0 = base / fix-ups / training, then an edit program
printf '\000' | seed fuzz_dataset verify-only
printf '\010' | seed fuzz_dataset train-memory
printf '\031' | seed fuzz_dataset f16-train-mmap
printf '\050' | seed fuzz_dataset train-gnndrive
printf '\012\101\000\000\030' | seed fuzz_dataset indices-id-24-crc-fixed
printf '\016\120\140\000' | seed fuzz_dataset indptr-cut-recounted
printf '\012\377\001\201\000\000\000\000\001\000\000\000' | seed fuzz_dataset num-nodes-big
printf '\012\103\002\000\377' | seed fuzz_dataset label-minus-1-crc-fixed

# ---- fuzz_ckpt: the checkpoints of short runs, written by the target; regress-* are inputs that
# found bugs, kept as they were found (binary files of the tree, not rewritten here):
# regress-resume-nan-weight-decay: a NaN weight decay behind fixed CRCs, which --resume
# accepted and eval refused (fixed in session 18, tests/test_nn_ckpt.c bad_optimiser_values)
mkdir -p "$dir/fuzz_ckpt"
find "$dir/fuzz_ckpt" -type f ! -name 'regress-*' -exec rm -f {} +
TG_FUZZ_SEEDS="$dir/fuzz_ckpt" "$build/fuzz_ckpt" >/dev/null 2>&1

# ---- fuzz_edgelist: byte 0 = options, gzip, ranges; then the edge list
printf '\000# SNAP style\n# FromNodeId\tToNodeId\n0\t1\n1\t2\n2\t0\n2\t3\n' | seed fuzz_edgelist snap
printf '\047100 200 0.5\n200 300 1\n300 100\n100 100\n' | seed fuzz_edgelist sparse-ids-ranges
printf '\0200 1\r\n1 2\r\n\r\n2 3\r\n' | seed fuzz_edgelist gzip-crlf
printf '\140%% comment\n5,6\n6 7\n' | seed fuzz_edgelist odd-separators

# ---- fuzz_ogb: byte 0 = options, split, gzip, threaded comparison; parts at NUL bytes
printf '\000' | seed fuzz_ogb default-tree
printf '\207' | seed fuzz_ogb threads-undirected-dedup-loops
printf '\120' | seed fuzz_ogb gzip-split-s1
printf '\200\000%b\000%b' '0.5,1,2\n3,4,5\n6,7,8\n9,10,11\n' '0,1\n1,0\n0,0\n1,1\n' |
    seed fuzz_ogb multi-label-threads
printf '\000\000\000\000\000\000\001' | seed fuzz_ogb no-train-file
# the input of c0e4543's timeout (a 1.7 G num-node-list count over a 4-row tree), kept as a regression
printf '\000\0000.1=\254\221,2\0123,4,5\0126@,\007\000\0001666666667\000\000\000\000,\000\376\000\000\000' | seed fuzz_ogb regress-c0e4543-huge-node-count

# ---- fuzz_rank: byte 0 = fix-ups, then an edit program over the rank file
printf '\000' | seed fuzz_rank valid
printf '\001\000\000\040\000' | seed fuzz_rank id-bit-payload-crc-fixed
printf '\003\001\204\000\001' | seed fuzz_rank header-params-crc-fixed
printf '\000\005\000\040' | seed fuzz_rank truncated

# ---- fuzz_ncache: byte 0 = fix-ups, then an edit program over the neighbour cache file
printf '\000' | seed fuzz_ncache valid
printf '\000\000\000\040\000' | seed fuzz_ncache payload-bit
printf '\001\000\100\040\003' | seed fuzz_ncache address-bit-crc-forged
printf '\003\005\000\040' | seed fuzz_ncache truncated-crc-fixed

# ---- fuzz_part: byte 0 = fix-ups, file (part, partfeat, partadj, partstat), verify, train; then
# an edit program over that file
printf '\000' | seed fuzz_part map-valid
printf '\040' | seed fuzz_part map-valid-train
printf '\001\004\032\004\377' | seed fuzz_part map-old-id-minus-1-crc-forged
printf '\064' | seed fuzz_part partfeat-verify-train
printf '\010\003\001\002\005\000\000\000\000\000\000\000' | seed fuzz_part partadj-indptr1-is-5
printf '\011\005\000\020' | seed fuzz_part partadj-truncated-crc-fixed
printf '\014' | seed fuzz_part partstat-valid
printf '\015\000\010\020\003' | seed fuzz_part partstat-pair-bit-crc-forged
# the crash of session 17: a control byte in a part file's header params, the header CRC forged
printf '3..\000\003\003\001U\001\012' | seed fuzz_part regress-header-params-newline

# ---- fuzz_outdeg: byte 0 = fix-ups, verify, k of the top; then an edit program over the counts
printf '\000' | seed fuzz_outdeg valid-top1
printf '\030' | seed fuzz_outdeg valid-top20
printf '\001\004\000\004\377' | seed fuzz_outdeg count-minus-1-crc-forged
printf '\044\000\000\020\007' | seed fuzz_outdeg count-bit-verify-top40
printf '\003\005\010\020' | seed fuzz_outdeg truncated-crc-fixed

# ---- fuzz_npz: .npz archives as Python's zipfile writes them (np.savez: stored;
# np.savez_compressed: deflated; force_zip64: zip64 extra fields), a 4-node graph
npz() { # NAME METHOD ZIP64: a 4-node archive on stdout (Python's zipfile, no NumPy needed)
    python3 - "$2" "$3" <<'PY'
import io, struct, sys, zipfile
def npy(descr, shape, raw):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += ' ' * (63 - (10 + len(h)) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + raw
q = lambda *v: struct.pack('<%dq' % len(v), *v)
arrays = {'edge_index': npy('<i8', '(2, 5)', q(0, 1, 2, 3, 0, 1, 2, 3, 0, 2)),
          'x': npy('<f4', '(4, 2)', struct.pack('<8f', 1, 2, 3, 4, 5, 6, 7, 8)),
          'y': npy('<i8', '(4,)', q(0, 1, -1, 2)),
          'train_mask': npy('|b1', '(4,)', bytes([1, 1, 0, 0])),
          'test_idx': npy('<i8', '(1,)', q(3))}
b = io.BytesIO()
with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED if sys.argv[1] == 'deflate' else zipfile.ZIP_STORED) as z:
    for k, v in arrays.items():
        with z.open(k + '.npy', 'w', force_zip64=sys.argv[2] == '1') as f:
            f.write(v)
sys.stdout.buffer.write(b.getvalue())
PY
}
npz stored stored 0 | seed fuzz_npz stored
npz deflated deflate 0 | seed fuzz_npz deflated
npz zip64 deflate 1 | seed fuzz_npz deflated-zip64
npz zip64s stored 1 | seed fuzz_npz stored-zip64
