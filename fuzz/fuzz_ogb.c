/* libFuzzer target for `import --from ogb` end to end: an OGB raw/ + split/ tree of CSV files
 * (plain or gzip) through the counts, edges, features, labels and splits into a dataset
 * directory on tmpfs.
 *
 * Input: byte 0 sets --undirected (bit 0), --dedup (bit 1), --self-loops (bit 2), f16 features
 * (bit 3), the --split asked for (bits 4-5: none, s1, s2, ""), gzip-compressed files (bit 6), and
 * a second import parsing node-feat.csv on 3 threads in 7-byte chunks to compare with (bit 7).
 * The rest is split at NUL bytes into up to 8 parts, one per file of a 4-node tree (edge.csv,
 * node-feat.csv, node-label.csv, num-node-list.csv, num-edge-list.csv, split/s1/train.csv,
 * valid.csv, test.csv, in that order): an empty or absent part keeps the file's valid text, a
 * part "\x01" removes the file, any other part is its text.
 *
 * Oracles: no crash/UB/leak; a failure returns < 0 with a one-line message and leaves neither the
 * output nor its temporary directory; an import that succeeds verifies (tg_dataset_verify), and
 * the threaded parse gives the same dataset byte for byte, or the same error.
 */
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/import-impl.h"
#include "fuzz_common.h"

#define NFILES 8

static const char *const rel[NFILES] = {
    "raw/edge.csv",          "raw/node-feat.csv",  "raw/node-label.csv", "raw/num-node-list.csv",
    "raw/num-edge-list.csv", "split/s1/train.csv", "split/s1/valid.csv", "split/s1/test.csv"};
static const char *const text[NFILES] = {"0,1\n1,2\n2,3\n3,0\n0,2\n",
                                         "1,2,3\n4,5,6\n-7.5,8e-1,9\n0,0,1.25\n",
                                         "0\n1\n\n2\n",
                                         "4\n",
                                         "5\n",
                                         "0\n1\n",
                                         "3\n",
                                         "2\n"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    fz_root();
    return 0;
}

static void put(const char *root, const char *name, const uint8_t *data, size_t len, int gz)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s%s", root, name, gz ? ".gz" : "");
    char *d = strdup(path);
    if (!d) abort();
    tg_mkdir_p(dirname(d));
    free(d);
    if (!gz) {
        fz_write(path, data, len);
        return;
    }
    gzFile g = gzopen(path, "wb");
    if (!g || (len && gzwrite(g, data, (unsigned)len) != (int)len) || gzclose(g) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
}

static int import(const char *out, const char *src, unsigned flags, int nthreads)
{
    static const char *const splits[4] = {NULL, "s1", "s2", ""};
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_OGB;
    o.src = src;
    o.split = splits[(flags >> 4) & 3];
    o.undirected = flags & 1;
    o.dedup = (flags >> 1) & 1;
    o.self_loops = (flags >> 2) & 1;
    o.feat_dtype = flags & 8 ? TG_F16 : TG_F32;
    o.mem_bytes = 16u << 20;
    tg_rmtree(out);
    int rc = tg_import_ogb_threads(out, &o, nthreads, nthreads ? 7 : 0);
    if (rc < 0) {
        fz_check_msg();
        fz_check_no_output(out);
    } else if (tg_dataset_verify(out) < 0) {
        fz_fail("an imported OGB tree does not verify");
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0];
    const char *src = fz_path(0, "ogb");
    tg_rmtree(src);
    const uint8_t *p = data + 1, *end = data + size;
    char count[32] = "";
    for (int i = 0; i < NFILES; i++) {
        const uint8_t *nul = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        const uint8_t *stop = nul ? nul : end;
        size_t n = p < end ? (size_t)(stop - p) : 0;
        if (i == 3) /* num-node-list.csv */
            snprintf(count, sizeof count, "%.*s", (int)(n < 31 ? n : 31),
                     n ? (const char *)p : text[3]);
        if (n == 1 && p[0] == 1) {
            /* removed: not written */
        } else if (n) {
            put(src, rel[i], p, n, flags & 64);
        } else {
            put(src, rel[i], (const uint8_t *)text[i], strlen(text[i]), flags & 64);
        }
        p = nul ? nul + 1 : end;
    }
    /* A gzip'd node-feat.csv's rows are known only once read, after the edge sort wrote indptr
     * for num-node-list's count: a count of millions writes that much (the plain files' sizes
     * bound it). Not fuzzed: it only takes time and tmpfs space. */
    if ((flags & 64) && strtoull(count, NULL, 10) > (1u << 20)) return 0;
    const char *a = fz_path(1, "a"), *b = fz_path(2, "b");
    int ra = import(a, src, flags, 0);
    if (flags & 128) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tg_errmsg());
        int rb = import(b, src, flags, 3);
        if (ra != rb || (ra < 0 && strcmp(msg, tg_errmsg()))) {
            fprintf(stderr, "one thread: %d '%s'; three: %d '%s'\n", ra, msg, rb, tg_errmsg());
            fz_fail("parsing on threads changed the outcome");
        }
        if (ra >= 0 && !fz_same_dataset(a, b)) fz_fail("parsing on threads changed the dataset");
    }
    tg_rmtree(a);
    tg_rmtree(b);
    tg_err_clear();
    return 0;
}
