/* tiergnn import OUT --from ogb|npy|npz|edgelist SRC [options]: flags -> tg_import_opts_t
 * (tg_cli_import_parse, Python's too), then tg_import. */
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

static int import_kind(const char *from, tg_import_kind_t *kind)
{
    static const char *const names[] = {"ogb", "npy", "npz", "edgelist"};
    static const tg_import_kind_t kinds[] = {TG_IMPORT_OGB, TG_IMPORT_NPY, TG_IMPORT_NPZ,
                                             TG_IMPORT_EDGELIST};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(from, names[i])) {
            *kind = kinds[i];
            return 0;
        }
    return tg_err(-EINVAL, "--from must be ogb, npy, npz or edgelist, got '%s'", from);
}

/* The options of the synthesised data, refused for a source that has its own. */
static int gen_only(const tg_args_t *a, const char *from, tg_import_kind_t kind)
{
    static const char *const names[] = {"feat-dim",   "classes",    "seed",     "feat-noise",
                                        "train-frac", "valid-frac", "test-frac"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (kind != TG_IMPORT_EDGELIST && tg_args_has(a, names[i]))
            return tg_err(-EINVAL,
                          "--%s applies to --from edgelist only (the %s source has its own data)",
                          names[i], from);
    return 0;
}

/* The number flags, in the order their errors are reported. */
static int parse_numbers(const tg_args_t *a, const char *from, tg_import_opts_t *o)
{
    uint64_t dim, classes;
    int rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc) rc = tg_args_u64(a, "feat-dim", o->feat_dim, &dim);
    if (!rc) rc = tg_args_u64(a, "classes", o->classes, &classes);
    if (!rc) rc = tg_args_u64(a, "seed", o->seed, &o->seed);
    if (!rc) rc = tg_args_double(a, "feat-noise", o->feat_noise, &o->feat_noise);
    if (!rc) rc = tg_args_double(a, "train-frac", o->train_frac, &o->train_frac);
    if (!rc) rc = tg_args_double(a, "valid-frac", o->valid_frac, &o->valid_frac);
    if (!rc) rc = tg_args_double(a, "test-frac", o->test_frac, &o->test_frac);
    if (!rc) rc = gen_only(a, from, o->kind);
    if (rc) return rc;
    if (dim > (1u << 24) || classes > 65536)
        return tg_err(-EINVAL, "--feat-dim must be <= 16777216 and --classes <= 65536");
    o->feat_dim = (uint32_t)dim;
    o->classes = (uint32_t)classes;
    if (o->mem_bytes && o->mem_bytes < (16u << 20))
        return tg_err(-EINVAL, "--mem must be at least 16M");
    return 0;
}

static int parse_import(const tg_args_t *a, tg_cli_import_t *p)
{
    tg_import_opts_t *o = &p->o;
    const char *from = tg_args_str(a, "from", NULL);
    if (a->npos != 2 || !from) {
        p->usage = TG_CLI_USAGE_OPERANDS;
        return tg_err(-EINVAL, "import: expected OUT, --from KIND and SRC");
    }
    tg_import_opts_default(o);
    int rc = import_kind(from, &o->kind);
    if (rc) return rc;
    p->out = a->pos[0];
    o->src = a->pos[1];
    o->split = tg_args_str(a, "split", NULL);
    if (o->split && o->kind != TG_IMPORT_OGB)
        return tg_err(-EINVAL, "--split applies to --from ogb only");
    o->undirected = tg_args_has(a, "undirected");
    o->dedup = tg_args_has(a, "dedup");
    o->self_loops = tg_args_has(a, "self-loops");
    o->overwrite = tg_args_has(a, "overwrite");
    if ((rc = tg_cli_feat_dtype(a, &o->feat_dtype)) < 0) return rc;
    return parse_numbers(a, from, o);
}

int tg_cli_import_parse(int argc, char **argv, tg_cli_import_t *p)
{
    memset(p, 0, sizeof *p);
    int rc = tg_args_parse(&p->a, argc, argv,
                           "from=,split=,undirected,dedup,self-loops,feat-dtype=,mem=,overwrite,"
                           "feat-dim=,classes=,seed=,feat-noise=,train-frac=,valid-frac=,"
                           "test-frac=,help");
    if (rc) {
        p->usage = TG_CLI_USAGE_OPTION;
        return rc;
    }
    p->help = tg_args_has(&p->a, "help");
    return p->help ? 0 : parse_import(&p->a, p);
}

/* One line of what was imported, from OUT/meta.txt. */
static int summary(const char *out, double seconds)
{
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
           (unsigned long long)m.num_test, tg_fmt_bytes(total, b, sizeof b), seconds);
    return 0;
}

int tg_cmd_import(int argc, char **argv)
{
    tg_cli_import_t p;
    if (tg_cli_import_parse(argc, argv, &p) < 0) {
        if (p.usage == TG_CLI_USAGE_OPERANDS)
            fprintf(stderr, "tiergnn %s\n", tg_errmsg());
        else
            tg_cli_fail();
        if (!p.usage) return 1;
        fputs(usage_text, stderr);
        return 2;
    }
    if (p.help) {
        fputs(usage_text, stdout);
        return 0;
    }
    double t0 = tg_now();
    if (tg_import(p.out, &p.o) < 0) return tg_cli_fail();
    return summary(p.out, tg_now() - t0);
}
