/* libFuzzer target for `import --from edgelist` end to end: the text file (plain or gzip) through
 * both passes, the renumbering, the external sort and the synthesised node data into a dataset
 * directory on tmpfs.
 *
 * Input: byte 0 sets --undirected (bit 0), --dedup (bit 1), --self-loops (bit 2), f16 features
 * (bit 3), gzip-compresses the file (bit 4), and bits 5-6 the byte ranges the file is parsed in
 * (1 to 4 ranges on as many threads); the rest is the edge list.
 *
 * Oracles: no crash/UB/leak; a failure returns < 0 with a one-line message and leaves neither the
 * output nor its temporary directory; an import that succeeds verifies (tg_dataset_verify), and
 * importing in one range gives the same dataset byte for byte, or the same error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/import-impl.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    fz_root();
    return 0;
}

static void write_gz(const char *path, const uint8_t *data, size_t len)
{
    gzFile g = gzopen(path, "wb");
    if (!g || (len && gzwrite(g, data, (unsigned)len) != (int)len) || gzclose(g) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
}

static int import(const char *out, const char *src, unsigned flags, int nranges)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_EDGELIST;
    o.src = src;
    o.undirected = flags & 1;
    o.dedup = (flags >> 1) & 1;
    o.self_loops = (flags >> 2) & 1;
    o.feat_dtype = flags & 8 ? TG_F16 : TG_F32;
    o.feat_dim = 3;
    o.classes = 3;
    o.seed = 1;
    o.mem_bytes = 16u << 20;
    tg_rmtree(out);
    int rc = tg_import_edgelist_ranges(out, &o, nranges);
    if (rc < 0) {
        fz_check_msg();
        fz_check_no_output(out);
    } else if (tg_dataset_verify(out) < 0) {
        fz_fail("an imported edge list does not verify");
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0];
    int nranges = 1 + ((flags >> 5) & 3);
    const char *src = fz_path(0, "edges.txt");
    if (flags & 16)
        write_gz(src, data + 1, size - 1);
    else
        fz_write(src, data + 1, size - 1);
    const char *a = fz_path(1, "a"), *b = fz_path(2, "b");
    int ra = import(a, src, flags, nranges);
    if (nranges > 1) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tg_errmsg());
        int rb = import(b, src, flags, 1);
        if (ra != rb || (ra < 0 && strcmp(msg, tg_errmsg()))) {
            fprintf(stderr, "%d ranges: %d '%s'; one range: %d '%s'\n", nranges, ra, msg, rb,
                    tg_errmsg());
            fz_fail("the ranges changed the outcome");
        }
        if (ra >= 0 && !fz_same_dataset(a, b)) fz_fail("the ranges changed the dataset");
    }
    tg_rmtree(a);
    tg_rmtree(b);
    tg_err_clear();
    return 0;
}
