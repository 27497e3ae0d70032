/* libFuzzer target for hier's derived/ files and their readers: the partition (tiergnn/
 * partition.h: kind "part", the record, the part boundaries and the two permutations; "partfeat",
 * the feature rows in partition order; "partadj", the CSC in partition order) and hier's static
 * pairs ("partstat", src/engine/strategies/hier.c) of a generated 48-node dataset in 4 parts
 * (streaming method), read as hier reads them (tg_part_open, the old and new ids, each part's
 * indptr range and its lists in small pieces, the rows), and on some inputs through a short hier
 * training run (tg_train: tg_part_build finds or rebuilds the files, hier opens them, builds or
 * reads partstat, loads every mega-batch).
 *
 * Input: byte 0: bit 0 rewrites the payload's CRC-32 in the header (forged), bit 1 the header's
 * own CRC-32 (both when bit 0 is set, as fuzz_rank does), bits 2-3 pick the file (part, partfeat,
 * partadj, partstat), bit 4 opens the dataset with checksums (train --verify: every derived
 * payload's CRC checked), bit 5 trains (always for partstat, which only hier reads); the rest is
 * an edit program (fuzz_common.h) over the picked file's bytes (4096-byte header, then payload).
 * The other three files are the valid ones.
 *
 * Oracles: no crash/UB/leak/hang; a failure returns < 0 with a one-line message; a file left as
 * it was is read back (and trains) without an error. Unless the payload's CRC was forged, what is
 * served equals the original for the map (its CRC is checked at open) and, with checksums, for
 * every file: the permutation is the original one, the rows and the lists are the dataset's
 * re-labelled, and a training run ends with the reference run's loss. Forged or not, only node
 * ids < N, part ids < parts and indptr entries within [0, E] (non-decreasing, 0 at node 0 and E
 * at node N) are handed out, or an error.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tiergnn/derived.h"
#include "tiergnn/engine.h"
#include "tiergnn/partition.h"

#define N 48
#define PARTS 4
#define DIM 3
#define NFILES 4

static const char *const kinds[NFILES] = {"part", "partfeat", "partadj", "partstat"};
static tg_dataset_t *ds, *dsv; /* plain; with checksums (--verify) */
static char dir[600], params[256], path[NFILES][1024];
static uint8_t *base[NFILES];
static size_t base_len[NFILES];
static uint64_t E, ref_pp[PARTS + 1], ref_o2n[N], ref_n2o[N], *ref_ip, *ref_ix;
static float ref_feat[N * DIM];
static double ref_loss;

/* A short hier run (every mega-batch loaded, a few batches trained): its result code. */
static int train(int verify, double *loss)
{
    const char *out = fz_path(1, "run");
    tg_rmtree(out);
    static const tg_strategy_arg_t args[] = {{"io-depth", "4"},        {"io-gap", "0"},
                                             {"parts", "4"},           {"method", "stream"},
                                             {"static-ratio", "0.25"}, {"dynamic-parts", "1"}};
    tg_train_opts_t o;
    tg_train_opts_default(&o);
    o.dataset = dir;
    o.out_dir = out;
    o.strategy = "hier";
    o.strategy_args = args;
    o.num_strategy_args = sizeof args / sizeof args[0];
    o.model.hidden = 4;
    o.model.num_layers = 2;
    o.fanouts[0] = o.fanouts[1] = 3;
    o.batch_size = 8;
    o.epochs = 1;
    o.eval_every = 0;
    o.threads = 1;
    o.sampler_threads = 0;
    o.seed = 1;
    o.verify = verify;
    o.mem_bytes = 64u << 20;
    tg_train_result_t res;
    int rc = tg_train(&o, &res);
    if (rc < 0)
        fz_check_msg();
    else
        *loss = res.last_train_loss;
    tg_rmtree(out);
    return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    snprintf(dir, sizeof dir, "%s", fz_path(0, "ds"));
    fz_generate(dir, N, DIM, 3, TG_F32);
    if (tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES) < 0 ||
        tg_dataset_open(&dsv, dir, TG_OPEN_CHECK_SIZES | TG_OPEN_CHECK_CHECKSUMS) < 0)
        fz_fail("cannot open the dataset");
    E = ds->meta.num_edges;
    tg_part_build_opts_t bo = {0};
    tg_part_assign_opts_default(&bo.assign);
    bo.assign.parts = PARTS;
    bo.assign.method = TG_PART_STREAM;
    bo.window_bytes = 256;
    if (tg_part_params(&bo.assign, TG_PART_STREAM, params, sizeof params) < 0 ||
        tg_part_build(ds, &bo, NULL) < 0)
        fz_fail("cannot partition the dataset");
    double loss2 = 0;
    if (train(0, &ref_loss) < 0 || train(0, &loss2) < 0) fz_fail("hier does not train");
    if (ref_loss != loss2) fz_fail("two hier runs end with different losses");

    /* the expectations, from the dataset and the built map */
    tg_part_t *p;
    uint64_t *ip, *ix;
    float *feat = malloc(N * DIM * sizeof *feat);
    if (tg_part_open(&p, ds, params) < 0 || tg_dataset_load_indptr(ds, &ip) < 0 ||
        tg_dataset_load_indices(ds, &ix) < 0 || !feat || tg_part_old_ids(p, 0, N, ref_o2n) < 0 ||
        tg_part_new_ids(p, 0, N, ref_n2o) < 0)
        fz_fail("cannot read the partition");
    memcpy(ref_pp, p->pp, sizeof ref_pp);
    char fpath[700];
    tg_dataset_path(ds, TG_FILE_FEATURES, fpath, sizeof fpath);
    size_t flen;
    uint8_t *fb = fz_read(fpath, &flen);
    if (flen != sizeof ref_feat) fz_fail("unexpected features.bin");
    memcpy(feat, fb, flen);
    free(fb);
    ref_ip = calloc(N + 1, 8);
    ref_ix = malloc(E * 8 + 8);
    for (uint64_t n = 0; n < N; n++) {
        uint64_t o = ref_o2n[n], d = ip[o + 1] - ip[o];
        if (ref_n2o[o] != n) fz_fail("the permutations are not inverse");
        memcpy(ref_feat + n * DIM, feat + o * DIM, DIM * sizeof *feat);
        for (uint64_t i = 0; i < d; i++)
            ref_ix[ref_ip[n] + i] = ref_n2o[ix[ip[o] + i]];
        ref_ip[n + 1] = ref_ip[n] + d;
    }
    free(feat);
    free(ip);
    free(ix);
    tg_part_close(p);

    char derived[700];
    tg_derived_dir(ds, NULL, derived, sizeof derived);
    for (int f = 0; f < NFILES; f++) {
        DIR *d = opendir(derived);
        struct dirent *de;
        size_t k = strlen(kinds[f]);
        int found = 0;
        while (d && (de = readdir(d)))
            if (!strncmp(de->d_name, kinds[f], k) && de->d_name[k] == '-') {
                snprintf(path[f], sizeof path[f], "%s/%s", derived, de->d_name);
                found++;
            }
        if (d) closedir(d);
        if (found != 1) fz_fail("not one derived file of a kind (hier used other params?)");
        base[f] = fz_read(path[f], &base_len[f]);
    }
    return 0;
}

/* Every read of the partition hier makes, checked; exact: what is served must be the original;
 * must: the files are the valid ones, every read must succeed. */
static void check_part(const tg_dataset_t *d, int exact, int must)
{
    tg_part_t *p;
    if (tg_part_open(&p, d, params) < 0) {
        fz_check_msg();
        if (must) fz_fail("a valid partition does not open");
        return;
    }
    uint32_t P = p->sum.parts;
    if (exact && (P != PARTS || memcmp(p->pp, ref_pp, sizeof ref_pp)))
        fz_fail("the part boundaries differ from the original's");
    for (uint64_t v = 0; v < N; v++)
        if (tg_part_of(p, v) >= P) fz_fail("a part id past the parts");
    uint64_t ids[N];
    for (int which = 0; which < 2; which++) {
        int rc = which ? tg_part_new_ids(p, 0, N, ids) : tg_part_old_ids(p, 0, N, ids);
        if (rc < 0) {
            fz_check_msg();
            if (must) fz_fail("valid ids do not read");
            continue;
        }
        for (uint64_t v = 0; v < N; v++)
            if (ids[v] >= N) fz_fail("an id that is not a node");
        if (exact && memcmp(ids, which ? ref_n2o : ref_o2n, sizeof ids))
            fz_fail("the permutation differs from the original");
    }
    /* each part's indptr range and its lists, 5 entries at a time, as hier's loader reads them */
    for (uint32_t k = 0; k < P; k++) {
        uint64_t lo = p->pp[k], cnt = p->pp[k + 1] - lo, ip[N + 1];
        if (tg_part_indptr(p, lo, cnt + 1, ip) < 0) {
            fz_check_msg();
            if (must) fz_fail("a valid indptr does not read");
            continue;
        }
        for (uint64_t i = 0; i <= cnt; i++)
            if (ip[i] > E || (i && ip[i] < ip[i - 1]) || (lo + i == 0 && ip[i]) ||
                (lo + i == N && ip[i] != E))
                fz_fail("an indptr entry out of order or past the edges");
        if (exact && memcmp(ip, ref_ip + lo, (cnt + 1) * 8))
            fz_fail("the indptr differs from the dataset's re-labelled");
        for (uint64_t e = ip[0]; e < ip[cnt]; e += 5) {
            uint64_t n = TG_MIN((uint64_t)5, ip[cnt] - e);
            uint32_t raw[5];
            if (p->index_bytes != 4) fz_fail("unexpected index width");
            if (tg_part_indices(p, e, n, raw) < 0) {
                fz_check_msg();
                if (must) fz_fail("valid lists do not read");
                break;
            }
            for (uint64_t i = 0; i < n; i++)
                if (raw[i] >= N || (exact && raw[i] != ref_ix[e + i]))
                    fz_fail(raw[i] >= N ? "a list entry that is not a node"
                                        : "a list differs from the dataset's re-labelled");
        }
    }
    float rows[N * DIM];
    if (tg_derived_read(p->feat, rows, sizeof rows, 0) < 0) {
        fz_check_msg();
        if (must) fz_fail("valid rows do not read");
    } else if (exact && memcmp(rows, ref_feat, sizeof rows)) {
        fz_fail("the rows differ from the dataset's re-ordered");
    }
    tg_part_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0], sel = (flags >> 2) & 3;
    int verify = (flags & 16) != 0, do_train = (flags & 32) || sel == 3;
    fz_in_t in = {data + 1, size - 1};
    fz_buf_t f;
    fz_buf_set(&f, base[sel], base_len[sel]);
    while (in.n)
        fz_edit(&f, (unsigned)fz_take(&in, 1), &in);
    int forged = fz_derived_fixups(&f, flags);
    /* the picked file as edited, the others as built (a run before may have rebuilt them) */
    for (int i = 0; i < NFILES; i++)
        if (i != (int)sel) fz_write(path[i], base[i], base_len[i]);
    fz_buf_put(&f, path[sel]);
    int same = !f.gone && f.len == base_len[sel] && !memcmp(f.p, base[sel], base_len[sel]);
    fz_buf_free(&f);

    /* partstat is not read here; the map's CRC is checked at open; the rest under --verify */
    int exact = same || sel == 3 || (!forged && (verify || sel == 0));
    check_part(verify ? dsv : ds, exact, same || sel == 3);
    if (do_train) {
        double loss = 0;
        int rc = train(verify, &loss);
        /* a missing or stale file is rebuilt (a damaged map too): the run must then succeed and
         * train on the original files */
        int valid = same || (!forged && (verify || sel == 0));
        if (rc < 0 && valid) fz_fail("hier does not train on valid files");
        if (rc == 0 && valid && loss != ref_loss)
            fz_fail("hier's loss differs from the reference run's");
    }
    tg_err_clear();
    return 0;
}
