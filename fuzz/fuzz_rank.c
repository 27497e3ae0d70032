/* libFuzzer target for a derived/ file and its reader: the node ranking (tiergnn/rank.h, kind
 * "rank") of a generated 24-node dataset, through the derived header checks (tg_derived_open)
 * and the rank record, with the ranking read back (tg_rank_read) as gids reads it.
 *
 * Input: byte 0 picks the fix-ups that let edits reach behind the checksums (bit 0: the payload's
 * CRC-32 in the header rewritten, bit 1: the header's own CRC-32), the rest is an edit program
 * (fuzz_common.h) over the valid file's bytes (4096-byte header, then the payload).
 *
 * Oracles: no crash/UB/leak; a failure returns < 0 with a one-line message; a corrupted file is
 * refused or rebuilt, never trusted: a rebuilt ranking equals the original bit for bit, and
 * whatever the reader hands out is node ids (< N), or an error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tiergnn/derived.h"
#include "tiergnn/rank.h"

#define N 24

static tg_dataset_t *ds;
static tg_rank_opts_t opts;
static const int64_t fanouts[2] = {3, 3};
static uint8_t *base;
static size_t base_len;
static char path[1024];
static uint64_t ref_ids[N];
static float ref_scores[N];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    const char *dir = fz_path(0, "ds");
    fz_generate(dir, N, 3, 3, TG_F32);
    if (tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES) < 0) fz_fail("cannot open the dataset");
    tg_rank_opts_default(&opts);
    opts.num_layers = 2;
    opts.fanouts = fanouts;
    opts.read_bytes = 4096;
    tg_rank_t *r;
    if (tg_rank_open(&r, ds, &opts) < 0 || tg_rank_read(r, 0, N, ref_ids, ref_scores) < 0)
        fz_fail("cannot build the ranking");
    snprintf(path, sizeof path, "%s", tg_rank_path(r));
    tg_rank_close(r);
    base = fz_read(path, &base_len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0];
    fz_in_t in = {data + 1, size - 1};
    fz_buf_t f;
    fz_buf_set(&f, base, base_len);
    while (in.n)
        fz_edit(&f, (unsigned)fz_take(&in, 1), &in);
    fz_derived_fixups(&f, flags);
    fz_buf_put(&f, path);
    int same = !f.gone && f.len == base_len && !memcmp(f.p, base, base_len);
    fz_buf_free(&f);

    tg_rank_t *r;
    if (tg_rank_open(&r, ds, &opts) < 0) {
        fz_check_msg();
        return 0;
    }
    uint64_t ids[N];
    float scores[N];
    int rebuilt = tg_rank_info(r)->built;
    if (tg_rank_read(r, 0, N, ids, scores) < 0) {
        fz_check_msg();
        if (rebuilt || same) fz_fail("a valid ranking does not read");
    } else {
        for (int i = 0; i < N; i++)
            if (ids[i] >= N) fz_fail("the ranking handed out an id that is not a node");
        if ((rebuilt || same) &&
            (memcmp(ids, ref_ids, sizeof ids) || memcmp(scores, ref_scores, sizeof scores)))
            fz_fail("a rebuilt ranking differs from the original");
    }
    tg_rank_close(r);
    tg_err_clear();
    return 0;
}
