/* libFuzzer target for pagraph's derived/ file and its reader: the out-degree counts
 * (tiergnn/outdeg.h, kind "outdeg": N x u32 in id order) of a generated 40-node dataset, through
 * tg_outdeg_open (the derived header checks; a missing or stale file rebuilt), the counts read
 * back (tg_outdeg_counts) and the top of the ranking (tg_outdeg_top) that pagraph caches.
 *
 * Input: byte 0: bit 0 rewrites the payload's CRC-32 in the header (forged), bit 1 the header's
 * own CRC-32 (both when bit 0 is set), bit 2 opens the dataset with checksums (train --verify:
 * the payload's CRC checked), bits 3-5 pick k of the top (1, 3, 7, 20, 39, 40, 41, 0); the rest
 * is an edit program (fuzz_common.h) over the valid file's bytes (4096-byte header, payload).
 *
 * Oracles: no crash/UB/leak; a failure returns < 0 with a one-line message; when the file on
 * disk after the open is the original (left as it was, or rebuilt), or checksums are on and the
 * CRC was not forged, the counts are the dataset's exactly; an open handle reads every count
 * (a payload of another size than N x 4 is stale: rebuilt); forged or not, the top holds min(k,
 * N) distinct node ids (< N) by decreasing count, ties by increasing id, with *hot the sum of
 * their counts, every count read back from the handle, and no node left out that beats one in.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tiergnn/derived.h"
#include "tiergnn/outdeg.h"

#define N 40

static tg_dataset_t *ds, *dsv; /* plain; with checksums */
static uint8_t *base;
static size_t base_len;
static char path[1024];
static uint32_t ref[N];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    const char *dir = fz_path(0, "ds");
    fz_generate(dir, N, 3, 3, TG_F32);
    if (tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES) < 0 ||
        tg_dataset_open(&dsv, dir, TG_OPEN_CHECK_SIZES | TG_OPEN_CHECK_CHECKSUMS) < 0)
        fz_fail("cannot open the dataset");
    if (tg_outdeg_prepare(ds, NULL, 0) != 1) fz_fail("cannot build the out-degrees");
    /* the expectation: every entry of indices.bin counted */
    uint64_t *ix;
    if (tg_dataset_load_indices(ds, &ix) < 0) fz_fail("cannot read indices.bin");
    for (uint64_t e = 0; e < ds->meta.num_edges; e++)
        ref[ix[e]]++;
    free(ix);
    if (tg_derived_path(ds, NULL, TG_OUTDEG_KIND, TG_OUTDEG_PARAMS, path, sizeof path) < 0)
        fz_fail("no path");
    base = fz_read(path, &base_len);
    if (base_len != TG_DERIVED_PAYLOAD_OFFSET + sizeof ref ||
        memcmp(base + TG_DERIVED_PAYLOAD_OFFSET, ref, sizeof ref))
        fz_fail("the built counts are not the dataset's");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0];
    static const uint64_t ks[8] = {1, 3, 7, 20, 39, 40, 41, 0};
    uint64_t k = ks[(flags >> 3) & 7];
    int verify = (flags & 4) != 0;
    fz_in_t in = {data + 1, size - 1};
    fz_buf_t f;
    fz_buf_set(&f, base, base_len);
    while (in.n)
        fz_edit(&f, (unsigned)fz_take(&in, 1), &in);
    int forged = fz_derived_fixups(&f, flags);
    fz_buf_put(&f, path);
    fz_buf_free(&f);

    tg_outdeg_t *od;
    if (tg_outdeg_open(&od, verify ? dsv : ds, NULL, NULL) < 0) {
        fz_check_msg();
        fz_fail("out-degrees do not open (the file is rebuilt when stale)");
    }
    /* the file the handle read: the original when it was left so or rebuilt */
    size_t now_len;
    uint8_t *now = fz_read(path, &now_len);
    int exact = (now_len == base_len && !memcmp(now, base, base_len)) || (verify && !forged);
    free(now);
    uint32_t counts[N];
    if (tg_outdeg_counts(od, 0, N, counts) < 0) {
        fz_check_msg();
        fz_fail("the counts of an open handle do not read (its size is checked at open)");
    }
    if (exact && memcmp(counts, ref, sizeof ref)) fz_fail("the counts differ from the dataset's");
    uint64_t ids[N + 1], hot = 0;
    if (tg_outdeg_top(od, k, ids, &hot) < 0) {
        fz_check_msg();
        fz_fail("the top of readable counts does not read");
    }
    uint64_t want = TG_MIN(k, (uint64_t)N), sum = 0;
    uint8_t in_top[N] = {0};
    for (uint64_t i = 0; i < want; i++) {
        if (ids[i] >= N) fz_fail("the top holds an id that is not a node");
        if (in_top[ids[i]]++) fz_fail("the top holds a node twice");
        sum += counts[ids[i]];
        if (i && (counts[ids[i]] > counts[ids[i - 1]] ||
                  (counts[ids[i]] == counts[ids[i - 1]] && ids[i] < ids[i - 1])))
            fz_fail("the top is out of order");
    }
    if (sum != hot) fz_fail("hot is not the sum of the top's counts");
    for (uint64_t v = 0; want && v < N; v++) {
        uint64_t last = ids[want - 1];
        if (!in_top[v] && (counts[v] > counts[last] || (counts[v] == counts[last] && v < last)))
            fz_fail("a node left out of the top beats one in it");
    }
    tg_outdeg_close(od);
    tg_err_clear();
    return 0;
}
