/* tiergnn import OUT --from ogb|npy|npz|edgelist SRC [options]: flags -> tg_import_opts_t. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/data.h"
#include "tiergnn/util.h"

static const char *const usage_text =
    "usage: tiergnn import OUT --from ogb|npy|npz|edgelist SRC [options]\n"
    "\n"
    "sources (docs/IMPORT.md has the layouts):\n"
    "  --from ogb SRC       OGB node-property raw layout: SRC/raw/*.csv[.gz] or SRC/raw/data.npz\n"
    "                       + node-label.npz, and SRC/split/NAME/\n"
    "  --from npy SRC       SRC/feat.npy, labels.npy, indptr.npy+indices.npy or edge_index.npy,\n"
    "                       {train,valid,test}_idx.npy\n"
    "  --from npz FILE      an .npz (np.savez / np.savez_compressed) with edge_index, node_feat\n"
    "                       or x, node_label or y, train_idx/valid_idx/test_idx or *_mask\n"
    "  --from edgelist FILE text 'SRC DST' per line ('#'/'%' comments; plain or .gz); features\n"
    "                       and labels are synthesised\n"
    "options:\n"
    "  --split NAME         ogb: split/NAME (default: the only one)\n"
    "  --undirected         add the reverse of every edge\n"
    "  --dedup              drop repeated edges\n"
    "  --self-loops         add v->v for every node that lacks one\n"
    "  --feat-dtype f32|f16 stored feature type (default f32)\n"
    "  --mem BYTES          memory for the external sort (default min(1G, RAM/4))\n"
    "  --overwrite          replace OUT if it exists (only once the new dataset is complete)\n"
    "edgelist only:\n"
    "  --feat-dim D (64) --classes C (8) --seed S (1) --feat-noise X (1.0)\n"
    "  --train-frac F (0.6) --valid-frac F (0.2) --test-frac F (0.2)\n";

int tg_cmd_import(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv,
                      "from=,split=,undirected,dedup,self-loops,feat-dtype=,mem=,overwrite,"
                      "feat-dim=,classes=,seed=,feat-noise=,train-frac=,valid-frac=,test-frac=,"
                      "help") < 0) {
        tg_cli_fail();
        fputs(usage_text, stderr);
        return 2;
    }
    if (tg_args_has(&a, "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    const char *from = tg_args_str(&a, "from", NULL);
    if (a.npos != 2 || !from) {
        fprintf(stderr, "tiergnn import: expected OUT, --from KIND and SRC\n%s", usage_text);
        return 2;
    }
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    if (!strcmp(from, "ogb"))
        o.kind = TG_IMPORT_OGB;
    else if (!strcmp(from, "npy"))
        o.kind = TG_IMPORT_NPY;
    else if (!strcmp(from, "npz"))
        o.kind = TG_IMPORT_NPZ;
    else if (!strcmp(from, "edgelist"))
        o.kind = TG_IMPORT_EDGELIST;
    else {
        tg_err(-EINVAL, "--from must be ogb, npy, npz or edgelist, got '%s'", from);
        return tg_cli_fail();
    }
    const char *out = a.pos[0];
    o.src = a.pos[1];
    o.split = tg_args_str(&a, "split", NULL);
    if (o.split && o.kind != TG_IMPORT_OGB) {
        tg_err(-EINVAL, "--split applies to --from ogb only");
        return tg_cli_fail();
    }
    o.undirected = tg_args_has(&a, "undirected");
    o.dedup = tg_args_has(&a, "dedup");
    o.self_loops = tg_args_has(&a, "self-loops");
    o.overwrite = tg_args_has(&a, "overwrite");
    const char *fd = tg_args_str(&a, "feat-dtype", "f32");
    if (!strcmp(fd, "f32"))
        o.feat_dtype = TG_F32;
    else if (!strcmp(fd, "f16"))
        o.feat_dtype = TG_F16;
    else {
        tg_err(-EINVAL, "--feat-dtype must be f32 or f16, got '%s'", fd);
        return tg_cli_fail();
    }
    uint64_t dim, classes, seed;
    if (tg_args_size(&a, "mem", 0, &o.mem_bytes) < 0 ||
        tg_args_u64(&a, "feat-dim", o.feat_dim, &dim) < 0 ||
        tg_args_u64(&a, "classes", o.classes, &classes) < 0 ||
        tg_args_u64(&a, "seed", o.seed, &seed) < 0 ||
        tg_args_double(&a, "feat-noise", o.feat_noise, &o.feat_noise) < 0 ||
        tg_args_double(&a, "train-frac", o.train_frac, &o.train_frac) < 0 ||
        tg_args_double(&a, "valid-frac", o.valid_frac, &o.valid_frac) < 0 ||
        tg_args_double(&a, "test-frac", o.test_frac, &o.test_frac) < 0)
        return tg_cli_fail();
    static const char *const gen_only[] = {"feat-dim",   "classes",    "seed",     "feat-noise",
                                           "train-frac", "valid-frac", "test-frac"};
    for (size_t i = 0; i < sizeof gen_only / sizeof gen_only[0]; i++)
        if (o.kind != TG_IMPORT_EDGELIST && tg_args_has(&a, gen_only[i])) {
            tg_err(-EINVAL, "--%s applies to --from edgelist only (the %s source has its own data)",
                   gen_only[i], from);
            return tg_cli_fail();
        }
    if (dim > (1u << 24) || classes > 65536) {
        tg_err(-EINVAL, "--feat-dim must be <= 16777216 and --classes <= 65536");
        return tg_cli_fail();
    }
    o.feat_dim = (uint32_t)dim;
    o.classes = (uint32_t)classes;
    o.seed = seed;
    if (o.mem_bytes && o.mem_bytes < (16u << 20)) {
        tg_err(-EINVAL, "--mem must be at least 16M");
        return tg_cli_fail();
    }

    double t0 = tg_now();
    if (tg_import(out, &o) < 0) return tg_cli_fail();
    tg_meta_t m;
    if (tg_meta_read(&m, out) < 0) return tg_cli_fail();
    char b[32];
    uint64_t total = 0;
    for (int i = 0; i < TG_FILE_COUNT; i++)
        total += m.files[i].size;
    printf("%s: %llu nodes, %llu edges, %u features (%s), %u classes%s, "
           "train/valid/test %llu/%llu/%llu, %s in %.1f s\n",
           out, (unsigned long long)m.num_nodes, (unsigned long long)m.num_edges, m.feat_dim,
           tg_feat_dtype_name(m.feat_dtype), m.num_classes, m.multi_label ? " (multi-label)" : "",
           (unsigned long long)m.num_train, (unsigned long long)m.num_valid,
           (unsigned long long)m.num_test, tg_fmt_bytes(total, b, sizeof b), tg_now() - t0);
    return 0;
}
