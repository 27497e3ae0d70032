/* libFuzzer target for a dataset directory: meta.txt and the seven arrays through `verify`
 * (tg_dataset_verify) and the open-for-training path (tg_train: open with size checks, labels,
 * splits, the strategy's adjacency and store, one short epoch, evaluation, checkpoints).
 *
 * Input: byte 0 picks the base dataset (a generated 24-node graph with f32 or f16 features), the
 * fix-ups and the strategy; the rest is an edit program (fuzz_common.h) over the base's files:
 * each edit names a file (0..6 the arrays, 7 meta.txt as bytes) and changes bytes, cuts, grows or
 * removes it; file 15 sets a meta.txt key to a small or a 64-bit value. The fix-ups then make
 * meta.txt record what the edits did, so that the checks behind the checksums are reached too:
 * bit 1 rewrites the recorded CRC-32s, bit 2 the counts and sizes from the files' lengths.
 *
 * Oracles: no crash/UB/leak; every failure (verify, open, training) returns < 0 with a one-line
 * message; a dataset verify accepts opens with checksums and loads (indptr, indices, labels,
 * splits, features) without an error: verify refuses whatever a reader would.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tiergnn/engine.h"

#define META 7

static struct {
    uint8_t *data[8];
    size_t len[8];
} base[2];

static const char *file_name(int i)
{
    return i == META ? TG_META_NAME : tg_file_name((tg_file_id_t)i);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    for (int b = 0; b < 2; b++) {
        const char *dir = fz_path(0, b ? "base-f16" : "base-f32");
        fz_generate(dir, 24, 3, 3, b ? TG_F16 : TG_F32);
        for (int i = 0; i < 8; i++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dir, file_name(i));
            base[b].data[i] = fz_read(path, &base[b].len[i]);
        }
        tg_rmtree(dir);
    }
    return 0;
}

/* ---------------------------------------------------------------- meta.txt as text */

/* Whether line (up to its end) is "key = ..." and, for name, "key = name ...". */
static int line_is(const char *line, const char *key, const char *name)
{
    while (*line == ' ' || *line == '\t')
        line++;
    size_t k = strlen(key);
    if (strncmp(line, key, k)) return 0;
    line += k;
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line++ != '=') return 0;
    if (!name) return 1;
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strlen(name);
    return !strncmp(line, name, n) && (line[n] == ' ' || line[n] == '\t');
}

/* meta with its line(s) "key = ..." (of file `name` when given) replaced by `repl`, which is
 * appended when there is none. The result stays within the buffer's FZ_MAX_FILE. */
static void meta_replace(fz_buf_t *meta, const char *key, const char *name, const char *repl)
{
    char *out = malloc(meta->len + strlen(repl) + 4);
    if (!out) abort();
    size_t o = 0, i = 0;
    int found = 0;
    while (i < meta->len) {
        const char *line = (const char *)meta->p + i;
        const char *nl = memchr(line, '\n', meta->len - i);
        size_t n = nl ? (size_t)(nl - line) + 1 : meta->len - i;
        char *copy = strndup(line, n);
        if (!copy) abort();
        if (!found && line_is(copy, key, name)) {
            found = 1;
            o += (size_t)sprintf(out + o, "%s\n", repl);
        } else {
            memcpy(out + o, line, n);
            o += n;
        }
        free(copy);
        i += n;
    }
    if (!found) o += (size_t)sprintf(out + o, "%s%s\n", o && out[o - 1] != '\n' ? "\n" : "", repl);
    if (o <= meta->cap) {
        memcpy(meta->p, out, o);
        meta->len = o;
    }
    free(out);
}

static void meta_set_u64(fz_buf_t *meta, const char *key, uint64_t v)
{
    char line[96];
    snprintf(line, sizeof line, "%s = %llu", key, (unsigned long long)v);
    meta_replace(meta, key, NULL, line);
}

static const char *const keys[] = {"format_version", "num_nodes",   "num_edges",   "feat_dim",
                                   "feat_dtype",     "index_dtype", "num_classes", "multi_label",
                                   "num_train",      "num_valid",   "num_test"};

/* File 15 of the edit program: a key set to a value. */
static void meta_edit(fz_buf_t *meta, fz_in_t *in)
{
    const char *key = keys[fz_take(in, 1) % (sizeof keys / sizeof *keys)];
    unsigned mode = (unsigned)fz_take(in, 1);
    char line[96];
    if (!strcmp(key, "feat_dtype"))
        snprintf(line, sizeof line, "%s = %s", key, mode & 1 ? "f16" : "f32");
    else if (!strcmp(key, "index_dtype"))
        snprintf(line, sizeof line, "%s = %s", key, mode & 1 ? "u64" : "u32");
    else if (mode < 0x80)
        snprintf(line, sizeof line, "%s = %d", key, (int)mode - 1);
    else
        snprintf(line, sizeof line, "%s = %llu", key, (unsigned long long)fz_take(in, 8));
    meta_replace(meta, key, NULL, line);
}

/* meta.txt made to record the files as they are: their counts and sizes (recount) and/or their
 * CRC-32s (crc). */
static void fix_meta(fz_buf_t *f, int recount, int crc)
{
    fz_buf_t *meta = &f[META];
    char *text = strndup((const char *)meta->p, meta->len);
    if (!text) abort();
    uint64_t isz = strstr(text, "index_dtype = u64") ? 8 : 4;
    uint64_t fsz = strstr(text, "feat_dtype = f16") ? 2 : 4;
    int multi = strstr(text, "multi_label = 1") != NULL;
    free(text);
    if (recount) {
        uint64_t n = f[TG_FILE_INDPTR].len >= 8 ? f[TG_FILE_INDPTR].len / 8 - 1 : 0;
        meta_set_u64(meta, "num_nodes", n);
        meta_set_u64(meta, "num_edges", f[TG_FILE_INDICES].len / isz);
        meta_set_u64(meta, "num_train", f[TG_FILE_TRAIN].len / isz);
        meta_set_u64(meta, "num_valid", f[TG_FILE_VALID].len / isz);
        meta_set_u64(meta, "num_test", f[TG_FILE_TEST].len / isz);
        uint64_t feat = f[TG_FILE_FEATURES].len, lab = f[TG_FILE_LABELS].len;
        if (n && feat % (n * fsz) == 0 && feat) meta_set_u64(meta, "feat_dim", feat / (n * fsz));
        if (n && multi && lab % (n * 4) == 0 && lab)
            meta_set_u64(meta, "num_classes", lab / (n * 4));
    }
    for (int i = 0; i < TG_FILE_COUNT; i++) {
        char line[160];
        const char *name = tg_file_name((tg_file_id_t)i);
        uint32_t c = tg_crc32(0, f[i].p, f[i].len);
        if (recount && crc)
            snprintf(line, sizeof line, "file = %s %zu %08x", name, f[i].len, c);
        else if (recount || crc) {
            /* keep the other field as recorded */
            unsigned long long size = 0;
            unsigned old = 0;
            char *t = strndup((const char *)meta->p, meta->len), *at = t;
            if (!t) abort();
            while ((at = strstr(at, "file"))) {
                if (line_is(at, "file", name)) {
                    char nm[64];
                    sscanf(strchr(at, '=') + 1, "%63s %llu %x", nm, &size, &old);
                    break;
                }
                at += 4;
            }
            free(t);
            if (recount)
                snprintf(line, sizeof line, "file = %s %zu %08x", name, f[i].len, old);
            else
                snprintf(line, sizeof line, "file = %s %llu %08x", name, size, c);
        } else {
            continue;
        }
        meta_replace(meta, "file", name, line);
    }
}

/* ---------------------------------------------------------------- the checks */

/* Everything verify promises: the readers accept the dataset. */
static void check_readable(const char *dir)
{
    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES | TG_OPEN_CHECK_CHECKSUMS) < 0)
        fz_fail("verify accepted a dataset that open refuses");
    uint64_t *ip = NULL, *ix = NULL, *split = NULL, n;
    int32_t *labels = NULL;
    if (tg_dataset_load_indptr(ds, &ip) < 0) fz_fail("verify accepted an indptr load refuses");
    if (tg_dataset_load_indices(ds, &ix) < 0) fz_fail("verify accepted indices load refuses");
    if (tg_dataset_load_labels(ds, &labels) < 0) fz_fail("verify accepted labels load refuses");
    for (int s = TG_FILE_TRAIN; s <= TG_FILE_TEST; s++) {
        if (tg_dataset_load_split(ds, (tg_file_id_t)s, &split, &n) < 0)
            fz_fail("verify accepted a split load refuses");
        free(split);
    }
    uint64_t N = ds->meta.num_nodes, D = ds->meta.feat_dim;
    float *x = malloc((N * D ? N * D : 1) * sizeof *x);
    if (!x) abort();
    if (tg_dataset_read_features(ds, 0, N, x) < 0) fz_fail("verify accepted unreadable features");
    free(x);
    free(labels);
    free(ix);
    free(ip);
    tg_dataset_close(ds);
}

/* One short epoch of a small model, evaluated and checkpointed, through strategy `strategy`. */
static void train(const char *dir, const char *strategy)
{
    const char *out = fz_path(1, "run");
    tg_rmtree(out);
    static const tg_strategy_arg_t args[] = {{"io-depth", "4"}, {"io-gap", "0"}};
    tg_train_opts_t o;
    tg_train_opts_default(&o);
    o.dataset = dir;
    o.out_dir = out;
    o.strategy = strategy;
    o.strategy_args = args;
    o.num_strategy_args = 2;
    o.model.hidden = 4;
    o.model.num_layers = 2;
    o.fanouts[0] = o.fanouts[1] = 3;
    o.batch_size = 8;
    o.epochs = 1;
    o.batches_per_epoch = 2;
    o.eval_every = 0;
    o.threads = 1;
    o.sampler_threads = 0;
    o.seed = 1;
    o.mem_bytes = 64u << 20; /* caches sized to a budget, not to the machine */
    tg_train_result_t res;
    if (tg_train(&o, &res) < 0) fz_check_msg();
    tg_rmtree(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    fz_in_t in = {data + 1, size - 1};
    unsigned flags = data[0];
    int b = flags & 1;
    fz_buf_t f[8];
    for (int i = 0; i < 8; i++)
        fz_buf_set(&f[i], base[b].data[i], base[b].len[i]);
    while (in.n) {
        unsigned op = (unsigned)fz_take(&in, 1);
        if ((op & 15) == 15)
            meta_edit(&f[META], &in);
        else
            fz_edit(&f[(op & 15) % 8], op >> 4, &in);
    }
    if (flags & 6) fix_meta(f, (flags & 4) != 0, (flags & 2) != 0);

    const char *dir = fz_path(2, "ds");
    tg_mkdir_p(dir);
    for (int i = 0; i < 8; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, file_name(i));
        if (f[i].gone)
            unlink(path);
        else
            fz_write(path, f[i].p, f[i].len);
    }
    if (tg_dataset_verify(dir) < 0)
        fz_check_msg();
    else
        check_readable(dir);
    static const char *const strategies[] = {"memory", "mmap", "gnndrive", "auto"};
    if (flags & 8) train(dir, strategies[(flags >> 4) & 3]);
    for (int i = 0; i < 8; i++)
        fz_buf_free(&f[i]);
    tg_err_clear();
    return 0;
}
