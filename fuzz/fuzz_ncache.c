/* libFuzzer target for a derived/ file and its reader: the neighbour cache (tiergnn/ncache.h,
 * kind "ncache", Ginex) of a generated 24-node dataset, every node's list cached, through
 * tg_ncache_open (derived header, payload CRC, address bounds) and a disk adjacency it is
 * attached to (counts checked against indptr), read back whole as the samplers read it.
 *
 * Input: byte 0 picks the fix-ups that let edits reach behind the checksums (bit 0: the payload's
 * CRC-32 in the header rewritten, bit 1: the header's own CRC-32), the rest is an edit program
 * (fuzz_common.h) over the valid file's bytes (4096-byte header, then the payload).
 *
 * Oracles: no crash/UB/leak; a failure returns < 0 with a one-line message; a corrupted file is
 * refused or rebuilt, never trusted: unless the edit forged the payload's CRC, what the cache and
 * the adjacency serve is the dataset's in-neighbours exactly; forged or not, a sampler over that
 * adjacency (which, like the in-memory one, does not scan ids: the sampler checks each it reads)
 * gives batches of node ids or refuses.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tiergnn/derived.h"
#include "tiergnn/graph.h"
#include "tiergnn/io.h"
#include "tiergnn/ncache.h"

#define N 24

static tg_dataset_t *ds;
static uint64_t *indptr, *indices, bytes, E;
static uint8_t *base;
static size_t base_len;
static char path[1024];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    const char *dir = fz_path(0, "ds");
    fz_generate(dir, N, 3, 3, TG_F32);
    if (tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES) < 0 ||
        tg_dataset_load_indptr(ds, &indptr) < 0 || tg_dataset_load_indices(ds, &indices) < 0)
        fz_fail("cannot open the dataset");
    E = ds->meta.num_edges;
    bytes = tg_ncache_full_bytes(N, indptr);
    tg_ncache_t *nc;
    if (tg_ncache_open(&nc, ds, NULL, bytes, NULL, NULL) < 0) fz_fail("cannot build the cache");
    tg_ncache_close(nc);
    char derived[700];
    tg_derived_dir(ds, NULL, derived, sizeof derived);
    DIR *d = opendir(derived);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, "ncache-", 7))
            snprintf(path, sizeof path, "%s/%s", derived, de->d_name);
    if (d) closedir(d);
    if (!path[0]) fz_fail("no ncache file");
    base = fz_read(path, &base_len);
    return 0;
}

/* Unless the payload's CRC was forged: the cache's lists are the dataset's. */
static void check_cache(const tg_ncache_t *nc)
{
    for (uint64_t v = 0; v < N; v++) {
        uint64_t deg;
        const uint32_t *l = tg_ncache_find(nc, v, &deg);
        if (!l) continue;
        if (deg != indptr[v + 1] - indptr[v])
            fz_fail("the cache's list differs from the dataset's");
        for (uint64_t i = 0; i < deg; i++)
            if (l[i] != indices[indptr[v] + i])
                fz_fail("the cache's list differs from the dataset's");
    }
}

/* A two-layer batch of every node with all their neighbours: node ids, or an error. */
static void check_sampler(tg_adj_t *adj)
{
    static const int64_t all[2] = {-1, -1};
    uint64_t seeds[N];
    for (uint64_t v = 0; v < N; v++)
        seeds[v] = v;
    tg_sampler_t *s;
    if (tg_sampler_open(&s, NULL, adj, 2, all) < 0) fz_fail("cannot open a sampler");
    tg_rng_t rng;
    tg_rng_seed(&rng, 1);
    tg_batch_t b;
    memset(&b, 0, sizeof b);
    if (tg_sampler_sample(s, seeds, N, &rng, &b) < 0) {
        fz_check_msg();
    } else {
        for (uint32_t i = 0; i < b.num_nodes; i++)
            if (b.nodes[i] >= N) fz_fail("a batch holds an id that is not a node");
    }
    tg_batch_free(&b);
    tg_sampler_destroy(s);
}

/* Every edge position through a disk adjacency with the cache attached. */
static void check_adjacency(tg_ncache_t *nc, int exact)
{
    tg_adj_disk_opts_t ao;
    tg_adj_disk_opts_default(&ao);
    ao.io.flags = TG_IO_FORCE_PREAD;
    tg_adj_t *adj;
    if (tg_adj_disk_open(&adj, ds, &ao, NULL) < 0) fz_fail("cannot open the disk adjacency");
    if (tg_adj_disk_attach_ncache(adj, nc) < 0) { /* nc is closed */
        fz_check_msg();
        tg_adj_destroy(adj);
        return;
    }
    uint64_t pos[256], out[256];
    for (uint64_t p = 0; p < E; p++)
        pos[p] = p;
    if (tg_adj_read(adj, pos, (size_t)E, out) < 0) {
        fz_check_msg();
    } else {
        for (uint64_t p = 0; exact && p < E; p++)
            if (out[p] != indices[p]) fz_fail("the adjacency differs from the dataset");
    }
    check_sampler(adj);
    tg_adj_destroy(adj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || E > 256) return 0;
    unsigned flags = data[0];
    fz_in_t in = {data + 1, size - 1};
    fz_buf_t f;
    fz_buf_set(&f, base, base_len);
    while (in.n)
        fz_edit(&f, (unsigned)fz_take(&in, 1), &in);
    int forged = fz_derived_fixups(&f, flags);
    fz_buf_put(&f, path);
    fz_buf_free(&f);

    tg_ncache_t *nc;
    if (tg_ncache_open(&nc, ds, NULL, bytes, NULL, NULL) < 0) {
        fz_check_msg();
        return 0;
    }
    tg_ncache_info_t info;
    tg_ncache_info(nc, &info);
    int exact = !forged || info.built;
    if (exact) check_cache(nc);
    check_adjacency(nc, exact);
    tg_err_clear();
    return 0;
}
