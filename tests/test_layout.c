/* store/layout: DiskGNN's feature layout planner against brute force. On random traces (sizes,
 * skew, empty batches, hot sets from none to every node, segment sizes, hash counts, partition
 * bounds, row, page and alignment sizes): every access's tier (hot = the most used nodes, ties
 * by id; cache = used by >= 2 batches of its segment; chunk = by one), each segment's cache
 * region contiguous and whole, partition-major and sorted by the MinHash key recomputed here,
 * chunks aligned, contiguous and in node order, the targets of all partitions = every (node,
 * output, offset) exactly once and sorted, partitions within pack_bytes and cut greedily, the
 * summary's disk and read estimates recomputed. Algorithm 2's pick and the exact check against
 * many budgets (never over), -ENOSPC and its message, the budget refusals (nothing held after),
 * MinHash ordering touching fewer pages on a crafted case, determinism, hot ties, bad traces,
 * configurations and locate calls. */
#include "tg_test.h"
#include "test_trace_common.h"

#include "tiergnn/layout.h"

#include <errno.h>

static uint64_t rup(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* ---------------------------------------------------------------- brute force */

typedef struct {
    uint32_t s, K;
    unsigned char *hot;   /* (N) */
    uint32_t *segcnt;     /* (K, N) batches of segment k using v (0 for hot nodes) */
    uint64_t cache_rows;  /* sum over segments of nodes with segcnt >= 2 */
    uint64_t *chunk_rows; /* (B) */
    uint64_t disk;        /* exact bytes of cache + chunk files */
} ref_t;

static void ref_free(ref_t *r)
{
    free(r->hot);
    free(r->segcnt);
    free(r->chunk_rows);
}

/* Hot set: sort nodes by (count desc, id asc), the first min(H, used). */
static unsigned char *ref_hot(const trace_t *tr, uint64_t H)
{
    uint32_t N = tr->N;
    unsigned char *hot = calloc(N + 1, 1);
    uint32_t *cnt = calloc(N + 1, sizeof *cnt);
    for (uint32_t b = 0; b < tr->iters; b++)
        for (uint32_t v = 0; v < N; v++)
            cnt[v] += tr->in[(size_t)b * N + v];
    for (uint64_t h = 0; h < H; h++) {
        int64_t best = -1;
        for (uint32_t v = 0; v < N; v++)
            if (!hot[v] && cnt[v] && (best < 0 || cnt[v] > cnt[best])) best = v;
        if (best < 0) break;
        hot[best] = 1;
    }
    free(cnt);
    return hot;
}

static ref_t ref_build(const trace_t *tr, const tg_layout_cfg_t *c, uint32_t s)
{
    uint32_t N = tr->N, B = tr->iters;
    uint64_t row = c->row_bytes, align = c->chunk_align ? c->chunk_align : 4096;
    ref_t r = {.s = s, .K = (B + s - 1) / s};
    r.hot = ref_hot(tr, c->hot_rows);
    r.segcnt = calloc((size_t)r.K * N + 1, sizeof *r.segcnt);
    r.chunk_rows = calloc(B + 1, sizeof *r.chunk_rows);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t v = 0; v < N; v++)
            if (tr->in[(size_t)b * N + v] && !r.hot[v]) r.segcnt[(size_t)(b / s) * N + v]++;
    for (uint32_t k = 0; k < r.K; k++)
        for (uint32_t v = 0; v < N; v++)
            r.cache_rows += r.segcnt[(size_t)k * N + v] >= 2;
    uint64_t chunks = 0;
    for (uint32_t b = 0; b < B; b++) {
        for (uint32_t v = 0; v < N; v++)
            r.chunk_rows[b] += tr->in[(size_t)b * N + v] && r.segcnt[(size_t)(b / s) * N + v] == 1;
        chunks += rup(r.chunk_rows[b] * row, align);
    }
    r.disk = rup(r.cache_rows * row, align) + chunks;
    return r;
}

/* The MinHash key of v in segment k (b0 .. b0 + n): h[0 .. nh), then fp. */
static void ref_key(const trace_t *tr, uint64_t seed, uint32_t nh, uint32_t k, uint32_t b0,
                    uint32_t n, uint32_t v, uint32_t *h, uint64_t *fp)
{
    tg_rng_t rng;
    tg_rng_seed2(&rng, seed, k);
    uint32_t *perm = malloc((size_t)nh * n * sizeof *perm);
    for (uint32_t j = 0; j < nh; j++) {
        for (uint32_t i = 0; i < n; i++)
            perm[j * n + i] = i;
        tg_rng_shuffle_u32(&rng, perm + (size_t)j * n, n);
    }
    *fp = 0;
    for (uint32_t j = 0; j < nh; j++)
        h[j] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t w = tg_rng_u64(&rng);
        if (!tr->in[(size_t)(b0 + i) * tr->N + v]) continue;
        *fp ^= w;
        for (uint32_t j = 0; j < nh; j++)
            h[j] = TG_MIN(h[j], perm[j * n + i]);
    }
    free(perm);
}

/* Pages of `page` bytes touched by rows at the byte offsets o[0 .. n) (any order). */
static uint64_t ref_pages(const uint64_t *o, uint64_t n, uint64_t row, uint64_t page, uint64_t file)
{
    uint64_t np = file / page + 2, pages = 0;
    unsigned char *t = calloc(np, 1);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t q = o[i] / page; q <= (o[i] + row - 1) / page; q++)
            pages += !t[q], t[q] = 1;
    free(t);
    return pages;
}

static int cmp_target(const void *a, const void *b)
{
    const tg_pack_target_t *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->out != y->out) return x->out < y->out ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* ---------------------------------------------------------------- the whole check */

/* Checks layout L of tr planned with c against brute force (see the top). */
static void check_layout(const trace_t *tr, const tg_layout_cfg_t *c, tg_layout_t *L)
{
    tg_layout_summary_t sm;
    tg_layout_summary(L, &sm);
    uint32_t N = tr->N, B = tr->iters, s = sm.segment;
    uint64_t row = c->row_bytes, align = c->chunk_align ? c->chunk_align : 4096;
    uint64_t page = c->page_bytes ? c->page_bytes : 4096;
    uint32_t nh = c->num_hashes ? c->num_hashes : 2;
    TG_CHECK(s >= 1);
    if (c->segment) TG_CHECK_EQ_U64(s, B ? TG_MIN(c->segment, B) : c->segment);
    ref_t r = ref_build(tr, c, s);
    TG_CHECK_EQ_U64(sm.num_segments, r.K);
    /* hot list */
    uint64_t nhot;
    const uint32_t *hot = tg_layout_hot(L, &nhot);
    uint64_t want_hot = 0;
    for (uint32_t v = 0; v < N; v++)
        want_hot += r.hot[v];
    TG_CHECK_EQ_U64(nhot, want_hot);
    for (uint64_t i = 0, j = 0; i < N && j < nhot; i++)
        if (r.hot[i]) {
            if (hot[j] != i)
                TG_FAIL("hot slot %llu: %u, expected %llu", (unsigned long long)j, hot[j],
                        (unsigned long long)i);
            j++;
        }
    TG_CHECK_EQ_U64(sm.cache_rows, r.cache_rows);
    TG_CHECK_EQ_U64(sm.cache_file_bytes, rup(r.cache_rows * row, align));
    TG_CHECK_EQ_U64(sm.disk_bytes, r.disk);
    /* every batch located: tiers, offsets; cache slots owned by one (segment, node) */
    uint64_t C = r.cache_rows;
    int64_t *own_k = malloc((C + 1) * sizeof *own_k), *own_v = malloc((C + 1) * sizeof *own_v);
    for (uint64_t i = 0; i <= C; i++)
        own_k[i] = own_v[i] = -1;
    size_t ntar = 0, captar = 64;
    tg_pack_target_t *want = malloc(captar * sizeof *want);
#define WANT(v, o, of)                                                                             \
    do {                                                                                           \
        if (ntar == captar) want = realloc(want, (captar *= 2) * sizeof *want);                    \
        want[ntar++] = (tg_pack_target_t){.node = (v), .out = (o), .off = (of)};                   \
    } while (0)
    for (uint64_t i = 0; i < nhot; i++)
        WANT(hot[i], TG_LAYOUT_HOT, i * row);
    uint64_t longest = 1, chunk_end = 0, read = 0, read_nomh = 0, hot_acc = 0;
    for (uint32_t b = 0; b < B; b++)
        longest = TG_MAX(longest, tr->off[b + 1] - tr->off[b]);
    tg_layout_loc_t loc;
    TG_CHECK_OK(tg_layout_loc_init(&loc, longest, NULL));
    uint64_t *offs = malloc((longest + 1) * sizeof *offs), *offs2 = malloc((longest + 1) * 8);
    unsigned char *seen = malloc(longest + 1);
    uint64_t *rank = malloc((N + 1) * sizeof *rank), rank_base = 0; /* of segment rank_k */
    uint32_t rank_k = UINT32_MAX;
    for (uint32_t b = 0; b < B; b++) {
        const uint32_t *ids = tr->ids + tr->off[b];
        uint64_t n = tr->off[b + 1] - tr->off[b];
        uint32_t k = b / s;
        int rc = tg_layout_locate(L, b, ids, n, &loc);
        if (rc < 0) {
            TG_FAIL("locate batch %u: %s", b, tg_errmsg());
            continue;
        }
        TG_CHECK_EQ_U64(loc.n_hot + loc.n_cache + loc.n_chunk, n);
        memset(seen, 0, n + 1);
        for (uint64_t i = 0; i < loc.n_hot; i++) {
            uint32_t p = loc.hot_pos[i], v = ids[p];
            seen[p]++;
            if (!r.hot[v] || hot[loc.hot_slot[i]] != v) TG_FAIL("batch %u node %u: hot", b, v);
            hot_acc++;
        }
        TG_CHECK_EQ_U64(loc.n_chunk, r.chunk_rows[b]);
        TG_CHECK_EQ_U64(loc.chunk_off, chunk_end);
        TG_CHECK(loc.chunk_off % align == 0);
        TG_CHECK_EQ_U64(loc.chunk_bytes, loc.n_chunk * row);
        TG_CHECK_EQ_U64(loc.chunk_read, rup(loc.n_chunk * row, align));
        chunk_end += loc.chunk_read;
        for (uint64_t i = 0; i < loc.n_chunk; i++) {
            uint32_t p = loc.chunk_pos[i], v = ids[p];
            seen[p]++;
            if (r.hot[v] || r.segcnt[(size_t)k * N + v] != 1)
                TG_FAIL("batch %u node %u: in the chunk", b, v);
            if (i && ids[loc.chunk_pos[i - 1]] >= v) TG_FAIL("batch %u: chunk not ascending", b);
            WANT(v, TG_LAYOUT_CHUNK, loc.chunk_off + i * row);
        }
        for (uint64_t i = 0; i < loc.n_cache; i++) {
            uint32_t p = loc.cache_pos[i], v = ids[p];
            uint64_t o = loc.cache_off[i], slot = o / row;
            seen[p]++;
            if (r.hot[v] || r.segcnt[(size_t)k * N + v] < 2)
                TG_FAIL("batch %u node %u: in the cache", b, v);
            if (o % row || slot >= C) {
                TG_FAIL("batch %u node %u: cache offset %llu", b, v, (unsigned long long)o);
                continue;
            }
            if (i && loc.cache_off[i - 1] >= o) TG_FAIL("batch %u: cache offsets not ascending", b);
            if (own_k[slot] < 0) {
                own_k[slot] = k, own_v[slot] = v;
                WANT(v, TG_LAYOUT_CACHE, o);
            } else if (own_k[slot] != k || own_v[slot] != v) {
                TG_FAIL("slot %llu: (segment %lld, node %lld) and (%u, %u)",
                        (unsigned long long)slot, (long long)own_k[slot], (long long)own_v[slot], k,
                        v);
            }
            offs[i] = o;
        }
        for (uint64_t p = 0; p < n; p++)
            if (seen[p] != 1)
                TG_FAIL("batch %u position %llu located %d times", b, (unsigned long long)p,
                        seen[p]);
        read += loc.chunk_read + ref_pages(offs, loc.n_cache, row, page, C * row) * page;
        /* without MinHash: slot = region start + rank by node among the segment's cache nodes */
        if (k != rank_k) {
            for (uint32_t v = 0; v < N; v++)
                rank[v] = rank_base, rank_base += r.segcnt[(size_t)k * N + v] >= 2;
            rank_k = k;
        }
        for (uint64_t i = 0; i < loc.n_cache; i++)
            offs2[i] = rank[ids[loc.cache_pos[i]]] * row;
        read_nomh += loc.chunk_read + ref_pages(offs2, loc.n_cache, row, page, C * row) * page;
    }
    TG_CHECK_EQ_U64(sm.chunk_file_bytes, chunk_end);
    TG_CHECK_EQ_U64(sm.read_bytes, read);
    TG_CHECK_EQ_U64(sm.read_bytes_nominhash, read_nomh);
    TG_CHECK_EQ_U64(sm.hot_accesses, hot_acc);
    TG_CHECK_EQ_U64(sm.needed_bytes, (tr->off[B] - hot_acc) * row);
    /* every slot owned; regions contiguous per segment, partition-major, MinHash sorted */
    uint32_t P = (uint32_t)sm.num_partitions;
    uint32_t *plo = malloc((P + 1) * sizeof *plo), *part_of = malloc((N + 1) * sizeof *part_of);
    uint64_t *pn = malloc((P + 1) * sizeof *pn);
    for (uint32_t p = 0; p < P; p++) {
        uint32_t hi;
        TG_CHECK_OK(tg_layout_partition(L, p, &plo[p], &hi, &pn[p]));
        plo[p + 1] = hi;
        for (uint32_t v = plo[p]; v < hi && v < N; v++)
            part_of[v] = p;
    }
    TG_CHECK(P >= (N > 0));
    if (P) TG_CHECK(plo[0] == 0 && plo[P] == N);
    for (uint64_t slot = 0; slot < C; slot++) {
        if (own_k[slot] < 0) {
            TG_FAIL("slot %llu unused", (unsigned long long)slot);
            continue;
        }
        if (slot == 0) continue;
        uint32_t k0 = (uint32_t)own_k[slot - 1], k1 = (uint32_t)own_k[slot];
        uint32_t v0 = (uint32_t)own_v[slot - 1], v1 = (uint32_t)own_v[slot];
        if (k1 < k0) TG_FAIL("slot %llu: segment %u after %u", (unsigned long long)slot, k1, k0);
        if (k1 != k0) continue;
        if (part_of[v1] < part_of[v0])
            TG_FAIL("slot %llu: partition order", (unsigned long long)slot);
        if (part_of[v1] != part_of[v0]) continue;
        uint32_t h0[TG_LAYOUT_MAX_HASHES], h1[TG_LAYOUT_MAX_HASHES], b0 = k0 * s;
        uint32_t n = TG_MIN(s, B - b0);
        uint64_t f0, f1;
        ref_key(tr, c->seed, nh, k0, b0, n, v0, h0, &f0);
        ref_key(tr, c->seed, nh, k0, b0, n, v1, h1, &f1);
        int cmp = 0;
        for (uint32_t j = 0; j < nh && !cmp; j++)
            cmp = h0[j] < h1[j] ? -1 : h0[j] > h1[j];
        if (!cmp) cmp = f0 < f1 ? -1 : f0 > f1;
        if (!cmp) cmp = v0 < v1 ? -1 : 1;
        if (cmp > 0) TG_FAIL("slot %llu: MinHash key order", (unsigned long long)slot);
    }
    /* partitions: within pack_bytes (or one node), greedy, targets exactly the wanted ones */
    tg_pack_target_t *got = malloc((ntar + 1) * sizeof *got);
    uint64_t ngot = 0;
    for (uint32_t p = 0; p < P; p++) {
        uint64_t bytes = ((uint64_t)plo[p + 1] - plo[p] + pn[p]) * row;
        if (c->pack_bytes && bytes > c->pack_bytes && plo[p + 1] - plo[p] > 1)
            TG_FAIL("partition %u: %llu bytes over %llu", p, (unsigned long long)bytes,
                    (unsigned long long)c->pack_bytes);
        if (!c->pack_bytes) TG_CHECK(P == 1);
        uint64_t room = ntar - ngot, n = 0;
        if (pn[p] > room) {
            TG_FAIL("partition %u: %llu targets, more than all", p, (unsigned long long)pn[p]);
            break;
        }
        if (pn[p]) TG_CHECK_ERR(tg_layout_targets(L, p, got + ngot, pn[p] - 1, &n), "room for");
        TG_CHECK_OK(tg_layout_targets(L, p, got + ngot, room, &n));
        TG_CHECK_EQ_U64(n, pn[p]);
        for (uint64_t i = 0; i < n; i++) {
            tg_pack_target_t *x = &got[ngot + i];
            if (x->node < plo[p] || x->node >= plo[p + 1])
                TG_FAIL("partition %u: node %u", p, x->node);
            if (i && cmp_target(x - 1, x) >= 0) TG_FAIL("partition %u: targets not sorted", p);
        }
        if (p + 1 < P && c->pack_bytes) { /* greedy: the next node would not have fit */
            uint32_t v = plo[p + 1];
            uint64_t outs = 0;
            for (uint64_t i = 0; i < ntar; i++)
                outs += want[i].node == v;
            TG_CHECK(bytes + (1 + outs) * row > c->pack_bytes);
        }
        ngot += n;
    }
    TG_CHECK_EQ_U64(ngot, ntar);
    qsort(want, ntar, sizeof *want, cmp_target);
    if (ngot == ntar && memcmp(got, want, ntar * sizeof *want))
        TG_FAIL("the targets differ from the layout's rows");
    TG_CHECK_ERR(tg_layout_partition(L, P, &plo[0], &plo[0], &pn[0]), "partition");
#undef WANT
    free(got);
    free(plo);
    free(part_of);
    free(pn);
    free(offs);
    free(offs2);
    free(seen);
    free(rank);
    free(want);
    free(own_k);
    free(own_v);
    tg_layout_loc_free(&loc);
    ref_free(&r);
}

/* A random configuration for trace tr (no disk budget). */
static tg_layout_cfg_t cfg_random(tg_rng_t *r, const trace_t *tr)
{
    static const uint64_t rows[] = {1, 3, 8, 100, 512};
    static const uint32_t aligns[] = {1, 16, 64, 4096};
    static const uint32_t pages[] = {16, 64, 100, 4096};
    tg_layout_cfg_t c = {.num_nodes = tr->N, .row_bytes = rows[tg_rng_below(r, 5)]};
    c.hot_rows = tg_rng_below(r, 3) ? tg_rng_below(r, tr->N / 4 + 2) : tg_rng_below(r, tr->N + 3);
    c.segment = (uint32_t)tg_rng_below(r, tr->iters + 3);
    c.num_hashes = (uint32_t)tg_rng_below(r, TG_LAYOUT_MAX_HASHES + 1);
    c.seed = tg_rng_u64(r);
    c.chunk_align = aligns[tg_rng_below(r, 4)];
    c.page_bytes = pages[tg_rng_below(r, 4)];
    if (tg_rng_below(r, 3)) c.pack_bytes = c.row_bytes * (1 + tg_rng_below(r, 4 * tr->N + 8));
    return c;
}

TG_TEST(random_layouts_match_brute_force)
{
    tg_rng_t r;
    tg_rng_seed(&r, 11);
    uint64_t cache = 0, packed = 0, hot = 0, multi = 0;
    for (int it = 0; it < 1000; it++) {
        uint32_t N = 1 + (uint32_t)tg_rng_below(&r, 120), B = (uint32_t)tg_rng_below(&r, 25);
        trace_t tr =
            trace_random(&r, N, B, 1 + (uint32_t)tg_rng_below(&r, 60), it % 3 == 0 ? 5 : 0, it % 2);
        tg_layout_cfg_t c = cfg_random(&r, &tr);
        tg_cs_trace_t t = view(&tr);
        tg_layout_t *L = NULL;
        int rc = tg_layout_plan(&L, &t, &c, NULL);
        if (rc < 0) {
            TG_FAIL("iteration %d: %s", it, tg_errmsg());
        } else {
            int before = tg_test_failures;
            tg_layout_summary_t sm;
            tg_layout_summary(L, &sm);
            cache += sm.cache_rows, packed += sm.packed_rows, hot += sm.hot_rows;
            multi += sm.num_partitions > 1 && sm.cache_rows;
            check_layout(&tr, &c, L);
            if (tg_test_failures != before) {
                fprintf(stderr,
                        "  iteration %d: N %u B %u segment %u hot %llu row %llu pack "
                        "%llu\n",
                        it, N, B, c.segment, (unsigned long long)c.hot_rows,
                        (unsigned long long)c.row_bytes, (unsigned long long)c.pack_bytes);
                tg_layout_destroy(L);
                trace_free(&tr);
                return;
            }
        }
        tg_layout_destroy(L);
        trace_free(&tr);
    }
    /* a few larger ones: long radix-sorted runs, many partitions */
    for (int it = 0; it < 4; it++) {
        trace_t tr = trace_random(&r, 6000, 30, 1500, 0, 1);
        tg_layout_cfg_t c = cfg_random(&r, &tr);
        c.row_bytes = 100, c.hot_rows = 200 * it, c.segment = 1 + 7 * it;
        c.pack_bytes = it % 2 ? 0 : 100 * (2000 + tg_rng_below(&r, 4000));
        tg_cs_trace_t t = view(&tr);
        tg_layout_t *L = NULL;
        TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
        if (L) check_layout(&tr, &c, L);
        tg_layout_destroy(L);
        trace_free(&tr);
    }
    fprintf(stderr,
            "  rows: %llu cache, %llu packed, %llu hot; %llu layouts with a cache and "
            "several partitions\n",
            (unsigned long long)cache, (unsigned long long)packed, (unsigned long long)hot,
            (unsigned long long)multi);
    TG_CHECK(cache > 1000 && packed > 1000 && hot > 100 && multi > 30);
}

/* Algorithm 2's pick is the first s whose estimate fits; the exact layout never exceeds the
 * budget; -ENOSPC exactly when s = B does not fit. */
TG_TEST(search_respects_the_budget)
{
    tg_rng_t r;
    tg_rng_seed(&r, 12);
    int fitted = 0, refused = 0, moved = 0;
    for (int it = 0; it < 800; it++) {
        uint32_t N = 4 + (uint32_t)tg_rng_below(&r, 150), B = 1 + (uint32_t)tg_rng_below(&r, 30);
        trace_t tr =
            trace_random(&r, N, B, 2 + (uint32_t)tg_rng_below(&r, 50), it % 4 == 0 ? 5 : 0, 1);
        tg_layout_cfg_t c = cfg_random(&r, &tr);
        c.segment = 0;
        ref_t one = ref_build(&tr, &c, 1), all = ref_build(&tr, &c, B);
        uint64_t lo = all.disk / 2, hi = one.disk + one.disk / 4 + 1;
        c.disk_budget = 1 + lo + tg_rng_below(&r, hi - lo + 1);
        tg_cs_trace_t t = view(&tr);
        tg_layout_t *L = NULL;
        tg_err_clear();
        int rc = tg_layout_plan(&L, &t, &c, NULL);
        uint64_t least = UINT64_MAX; /* padding can make a smaller s need less than s = B */
        for (uint32_t s = 1; s <= B; s++) {
            ref_t x = ref_build(&tr, &c, s);
            least = TG_MIN(least, x.disk);
            ref_free(&x);
        }
        if (least > c.disk_budget) TG_CHECK(rc == -ENOSPC);
        if (rc == -ENOSPC) {
            TG_CHECK(all.disk > c.disk_budget);
            refused++;
            char want[160];
            snprintf(want, sizeof want, "give --disk-budget %llu or more",
                     (unsigned long long)all.disk);
            if (!strstr(tg_errmsg(), want)) TG_FAIL("message '%s' lacks '%s'", tg_errmsg(), want);
            snprintf(want, sizeof want, "--disk-budget %llu (", (unsigned long long)c.disk_budget);
            if (!strstr(tg_errmsg(), want)) TG_FAIL("message '%s' lacks '%s'", tg_errmsg(), want);
        } else if (rc < 0) {
            TG_FAIL("iteration %d: %s", it, tg_errmsg());
        } else {
            fitted++;
            tg_layout_summary_t sm;
            tg_layout_summary(L, &sm);
            /* the estimate's first fit */
            unsigned char *hot = ref_hot(&tr, c.hot_rows), *seen = calloc(N, 1);
            uint64_t distinct = 0;
            uint32_t first = B;
            for (uint32_t s = 1; s <= B; s++) {
                for (uint64_t j = tr.off[s - 1]; j < tr.off[s]; j++)
                    if (!hot[tr.ids[j]] && !seen[tr.ids[j]]) seen[tr.ids[j]] = 1, distinct++;
                if ((uint64_t)distinct * c.row_bytes * B <= c.disk_budget * s) {
                    first = s;
                    break;
                }
            }
            free(hot);
            free(seen);
            TG_CHECK_EQ_U64(sm.search_segment, first);
            TG_CHECK(sm.segment >= first);
            TG_CHECK(sm.disk_bytes <= c.disk_budget);
            ref_t at = ref_build(&tr, &c, sm.segment), est = ref_build(&tr, &c, first);
            TG_CHECK_EQ_U64(sm.disk_bytes, at.disk);
            if (est.disk <= c.disk_budget) TG_CHECK_EQ_U64(sm.segment, first);
            moved += sm.segment != first;
            /* the steps: estimates for 1 .. first, then exact ones ending on the choice */
            TG_CHECK(sm.num_steps >= first + 1);
            for (uint32_t i = 0; i < first && i < sm.num_steps; i++) {
                const tg_layout_step_t *st = &sm.steps[i];
                TG_CHECK(!st->exact && st->segment == i + 1);
                TG_CHECK(st->fits == (st->disk_bytes <= c.disk_budget));
                if (i + 1 < first) TG_CHECK(!st->fits);
            }
            int found = 0;
            for (uint32_t i = first; i < sm.num_steps; i++) {
                const tg_layout_step_t *st = &sm.steps[i];
                ref_t x = ref_build(&tr, &c, st->segment);
                TG_CHECK(st->exact && st->disk_bytes == x.disk);
                TG_CHECK(st->fits == (x.disk <= c.disk_budget));
                found |= st->segment == sm.segment && st->fits;
                if (st->fits) TG_CHECK(st->segment >= sm.segment);
                ref_free(&x);
            }
            TG_CHECK(found);
            check_layout(&tr, &c, L);
            ref_free(&at);
            ref_free(&est);
        }
        tg_layout_destroy(L);
        ref_free(&one);
        ref_free(&all);
        trace_free(&tr);
    }
    fprintf(stderr, "  %d fitted (%d past the estimate's pick), %d refused\n", fitted, moved,
            refused);
    TG_CHECK(fitted > 50 && refused > 10 && moved > 5);
}

/* A given segment is used as is and still checked against the budget. */
TG_TEST(fixed_segment_checked)
{
    tg_rng_t r;
    tg_rng_seed(&r, 13);
    trace_t tr = trace_random(&r, 300, 20, 80, 0, 1);
    tg_layout_cfg_t c = {
        .num_nodes = 300, .row_bytes = 64, .hot_rows = 10, .segment = 4, .chunk_align = 64};
    ref_t four = ref_build(&tr, &c, 4), all = ref_build(&tr, &c, 20);
    TG_CHECK(all.disk < four.disk);
    tg_cs_trace_t t = view(&tr);
    tg_layout_t *L = NULL;
    c.disk_budget = four.disk;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    tg_layout_summary_t sm;
    tg_layout_summary(L, &sm);
    TG_CHECK_EQ_U64(sm.segment, 4);
    TG_CHECK_EQ_U64(sm.disk_bytes, four.disk);
    tg_layout_destroy(L);
    c.disk_budget = four.disk - 1;
    char want[96];
    snprintf(want, sizeof want, "--segment 4 needs %llu bytes", (unsigned long long)four.disk);
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &c, NULL), want);
    TG_CHECK(L == NULL);
    c.disk_budget = all.disk - 1;
    snprintf(want, sizeof want, "give --disk-budget %llu or more", (unsigned long long)all.disk);
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &c, NULL), want);
    /* unbounded, no segment: pure packing */
    c.disk_budget = 0, c.segment = 0;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    tg_layout_summary(L, &sm);
    TG_CHECK_EQ_U64(sm.segment, 1);
    TG_CHECK_EQ_U64(sm.cache_rows, 0);
    TG_CHECK_EQ_U64(sm.read_bytes, sm.chunk_file_bytes);
    check_layout(&tr, &c, L);
    tg_layout_destroy(L);
    ref_free(&four);
    ref_free(&all);
    trace_free(&tr);
}

/* Groups of nodes used by the same pair of batches, interleaved by id: in node order every page
 * holds rows of many pairs; MinHash places each group together. */
TG_TEST(minhash_touches_fewer_pages)
{
    enum { S = 8, G = 16 };
    uint32_t pairs = S * (S - 1) / 2, N = pairs * G;
    trace_t tr = {.iters = S, .N = N};
    tr.off = calloc(S + 1, sizeof *tr.off);
    tr.ids = malloc((size_t)2 * N * sizeof *tr.ids);
    tr.in = calloc((size_t)S * N, 1);
    for (uint32_t b = 0; b < S; b++) {
        uint64_t o = tr.off[b];
        for (uint32_t g = 0; g < G; g++)
            for (uint32_t i = 0, pr = 0; i < S; i++)
                for (uint32_t j = i + 1; j < S; j++, pr++)
                    if (i == b || j == b) {
                        uint32_t v = g * pairs + pr; /* interleaved: neighbours are other pairs */
                        tr.ids[o++] = v;
                        tr.in[(size_t)b * N + v] = 1;
                    }
        tr.off[b + 1] = o;
    }
    tg_layout_cfg_t c = {
        .num_nodes = N, .row_bytes = 512, .segment = S, .page_bytes = 4096, .seed = 5};
    tg_cs_trace_t t = view(&tr);
    tg_layout_t *L = NULL;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    tg_layout_summary_t sm;
    tg_layout_summary(L, &sm);
    TG_CHECK_EQ_U64(sm.cache_rows, N);
    TG_CHECK_EQ_U64(sm.packed_rows, 0);
    fprintf(stderr, "  read with MinHash %llu, in node order %llu (needed %llu)\n",
            (unsigned long long)sm.read_bytes, (unsigned long long)sm.read_bytes_nominhash,
            (unsigned long long)sm.needed_bytes);
    /* node order: every page (8 rows of 8 different pairs) is wanted by most batches */
    TG_CHECK(sm.read_bytes * 3 < sm.read_bytes_nominhash * 2);
    TG_CHECK(sm.read_amp < 1.3);
    check_layout(&tr, &c, L);
    tg_layout_destroy(L);
    /* many small partitions: the order only acts within each, and still does not read more */
    c.pack_bytes = 64 * c.row_bytes * 3;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    tg_layout_summary(L, &sm);
    TG_CHECK(sm.num_partitions > 1);
    TG_CHECK(sm.read_bytes <= sm.read_bytes_nominhash);
    check_layout(&tr, &c, L);
    tg_layout_destroy(L);
    trace_free(&tr);
}

/* Same seed, same layout; targets and locations compared whole. */
TG_TEST(deterministic)
{
    tg_rng_t r;
    tg_rng_seed(&r, 14);
    trace_t tr = trace_random(&r, 500, 16, 120, 0, 1);
    tg_layout_cfg_t c = {.num_nodes = 500,
                         .row_bytes = 100,
                         .hot_rows = 20,
                         .segment = 5,
                         .seed = 99,
                         .pack_bytes = 20000,
                         .page_bytes = 512};
    tg_cs_trace_t t = view(&tr);
    tg_layout_t *L[3] = {NULL, NULL, NULL};
    TG_CHECK_OK(tg_layout_plan(&L[0], &t, &c, NULL));
    TG_CHECK_OK(tg_layout_plan(&L[1], &t, &c, NULL));
    c.seed = 100;
    TG_CHECK_OK(tg_layout_plan(&L[2], &t, &c, NULL));
    if (!L[0] || !L[1] || !L[2]) return;
    tg_layout_summary_t s0, s1;
    tg_layout_summary(L[0], &s0);
    tg_layout_summary(L[1], &s1);
    TG_CHECK_EQ_U64(s0.num_partitions, s1.num_partitions);
    TG_CHECK_EQ_U64(s0.read_bytes, s1.read_bytes);
    int differ = 0;
    for (uint64_t p = 0; p < s0.num_partitions; p++) {
        uint32_t lo, hi;
        uint64_t n;
        TG_CHECK_OK(tg_layout_partition(L[0], p, &lo, &hi, &n));
        tg_pack_target_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
        uint64_t na = 0, nb = 0, nc = 0;
        TG_CHECK_OK(tg_layout_targets(L[0], p, a, n, &na));
        TG_CHECK_OK(tg_layout_targets(L[1], p, b, n, &nb));
        TG_CHECK(na == nb && !memcmp(a, b, na * sizeof *a));
        if (tg_layout_targets(L[2], p, b, n, &nc) == 0 && nc == na)
            differ |= memcmp(a, b, na * sizeof *a) != 0;
        free(a);
        free(b);
    }
    TG_CHECK(differ); /* another seed orders the caches otherwise */
    for (int i = 0; i < 3; i++)
        tg_layout_destroy(L[i]);
    trace_free(&tr);
}

/* Hot ties go to the lower id; unused nodes are never hot. */
TG_TEST(hot_ties)
{
    /* counts: node 5: 3, nodes 2, 7, 9: 2, node 4: 1, others 0 */
    uint32_t ids[] = {5, 9, 2, 5, 7, 4, 7, 9, 5, 2};
    uint64_t off[] = {0, 3, 6, 10};
    tg_cs_trace_t t = {.iters = 3, .off = off, .ids = ids};
    struct {
        uint64_t hot;
        uint32_t want[8];
        uint32_t n;
    } cases[] = {{0, {0}, 0},
                 {1, {5}, 1},
                 {2, {2, 5}, 2},
                 {3, {2, 5, 7}, 3},
                 {4, {2, 5, 7, 9}, 4},
                 {5, {2, 4, 5, 7, 9}, 5},
                 {9, {2, 4, 5, 7, 9}, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_layout_cfg_t c = {.num_nodes = 12, .row_bytes = 8, .hot_rows = cases[i].hot};
        tg_layout_t *L = NULL;
        TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
        if (!L) continue;
        uint64_t n;
        const uint32_t *h = tg_layout_hot(L, &n);
        TG_CHECK_EQ_U64(n, cases[i].n);
        for (uint32_t j = 0; j < n && j < cases[i].n; j++)
            TG_CHECK_EQ_U64(h[j], cases[i].want[j]);
        tg_layout_summary_t sm;
        tg_layout_summary(L, &sm);
        if (cases[i].hot >= 5) TG_CHECK(sm.disk_bytes == 0 && sm.read_bytes == 0);
        tg_layout_destroy(L);
    }
}

/* A given hot set: exactly those nodes are hot (one the batches do not use too), packing gets
 * no hot targets, locate serves them from their slots; a list out of order is refused. */
TG_TEST(hot_given)
{
    uint32_t ids[] = {5, 9, 2, 5, 7, 4, 7, 9, 5, 2};
    uint64_t off[] = {0, 3, 6, 10};
    tg_cs_trace_t t = {.iters = 3, .off = off, .ids = ids};
    uint32_t given[] = {2, 7, 11};
    tg_layout_cfg_t c = {.num_nodes = 12, .row_bytes = 8, .hot_rows = 1, .segment = 1};
    c.hot_given = given;
    c.num_hot_given = 3;
    tg_layout_t *L = NULL;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    if (L) {
        uint64_t n;
        const uint32_t *h = tg_layout_hot(L, &n);
        TG_CHECK(n == 3 && h[0] == 2 && h[1] == 7 && h[2] == 11);
        tg_layout_summary_t sm;
        tg_layout_summary(L, &sm);
        TG_CHECK_EQ_U64(sm.hot_accesses, 4); /* 2 twice, 7 twice */
        uint64_t total = 0;
        for (uint64_t p = 0; p < sm.num_partitions; p++) {
            uint32_t lo, hi;
            uint64_t nt, got = 0;
            TG_CHECK_OK(tg_layout_partition(L, p, &lo, &hi, &nt));
            tg_pack_target_t *tg = malloc((nt + 1) * sizeof *tg);
            TG_CHECK_OK(tg_layout_targets(L, p, tg, nt, &got));
            for (uint64_t i = 0; i < got; i++)
                TG_CHECK(tg[i].out != TG_LAYOUT_HOT);
            total += got;
            free(tg);
        }
        TG_CHECK_EQ_U64(total, sm.cache_rows + sm.packed_rows);
        tg_layout_loc_t loc;
        TG_CHECK_OK(tg_layout_loc_init(&loc, 4, NULL));
        TG_CHECK_OK(tg_layout_locate(L, 2, ids + 6, 4, &loc)); /* 7 9 5 2 */
        TG_CHECK_EQ_U64(loc.n_hot, 2);
        for (uint64_t i = 0; i < loc.n_hot; i++)
            TG_CHECK(given[loc.hot_slot[i]] == ids[6 + loc.hot_pos[i]]);
        tg_layout_loc_free(&loc);
    }
    tg_layout_destroy(L);
    uint32_t bad[] = {7, 2};
    c.hot_given = bad;
    c.num_hot_given = 2;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &c, NULL), "not ascending");
}

/* Every reservation refused in turn: -ENOMEM naming the layout, nothing held afterwards. */
TG_TEST(budget)
{
    tg_rng_t r;
    tg_rng_seed(&r, 15);
    trace_t tr = trace_random(&r, 400, 12, 100, 0, 1);
    tg_layout_cfg_t c = {
        .num_nodes = 400, .row_bytes = 64, .hot_rows = 30, .segment = 3, .pack_bytes = 6400};
    tg_cs_trace_t t = view(&tr);
    uint64_t peak_bound = 0,
             kept_bound = tg_layout_bytes(&c, tr.iters, tr.off[tr.iters], &peak_bound);
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_layout_t *L = NULL;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, &b));
    tg_layout_summary_t sm;
    tg_layout_summary(L, &sm);
    TG_CHECK_EQ_U64(b.used, sm.reserved);
    TG_CHECK(sm.reserved <= kept_bound);
    TG_CHECK(b.peak <= peak_bound);
    TG_CHECK_EQ_U64(b.peak, sm.plan_peak_bytes);
    fprintf(stderr, "  kept %llu (bound %llu), peak %llu (bound %llu)\n",
            (unsigned long long)sm.reserved, (unsigned long long)kept_bound,
            (unsigned long long)b.peak, (unsigned long long)peak_bound);
    uint64_t peak = b.peak;
    tg_layout_destroy(L);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    int refusals = 0;
    for (uint64_t lim = 1; lim < peak; lim += 1 + lim / 16) {
        tg_budget_init(&b, lim);
        L = NULL;
        tg_err_clear();
        int rc = tg_layout_plan(&L, &t, &c, &b);
        if (rc != -ENOMEM || L || !strstr(tg_errmsg(), "layout"))
            TG_FAIL("limit %llu: rc %d, %s", (unsigned long long)lim, rc, tg_errmsg());
        refusals++;
        TG_CHECK_EQ_U64(b.used, 0);
        tg_budget_destroy(&b);
    }
    TG_CHECK(refusals > 20);
    /* the targets' and locations' temporaries */
    tg_budget_init(&b, peak);
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, &b));
    uint64_t kept = b.used;
    b.limit = kept; /* nothing more */
    tg_pack_target_t *buf = malloc(tr.off[tr.iters] * 2 * sizeof *buf + 64 * 16);
    uint64_t n = 0;
    TG_CHECK_ERR(tg_layout_targets(L, 0, buf, tr.off[tr.iters] * 2 + 64, &n), "target positions");
    tg_layout_loc_t loc;
    TG_CHECK_ERR(tg_layout_loc_init(&loc, 100, &b), "locations");
    TG_CHECK_EQ_U64(b.used, kept);
    b.limit = 0;
    TG_CHECK_OK(tg_layout_targets(L, 0, buf, tr.off[tr.iters] * 2 + 64, &n));
    TG_CHECK_OK(tg_layout_loc_init(&loc, 100, &b));
    TG_CHECK_EQ_U64(b.used, kept + tg_layout_loc_bytes(100));
    tg_layout_loc_free(&loc);
    tg_layout_destroy(L);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    free(buf);
    trace_free(&tr);
}

TG_TEST(bad_input)
{
    uint32_t ids[] = {1, 2, 3, 3, 4};
    uint64_t off[] = {0, 2, 5}, bad_off[] = {0, 3, 2};
    tg_cs_trace_t t = {.iters = 2, .off = off, .ids = ids};
    tg_layout_cfg_t c = {.num_nodes = 10, .row_bytes = 8};
    tg_layout_t *L = NULL;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &c, NULL), "batch 1 position 1: node 3 again");
    ids[3] = 10;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &c, NULL), "batch 1 position 1: node 10, expected < 10");
    ids[3] = 5;
    t.off = bad_off;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &c, NULL), "non-decreasing");
    t.off = off;
    tg_layout_cfg_t b = c;
    b.row_bytes = 0;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &b, NULL), "row_bytes 0");
    b = c, b.num_nodes = 1ull << 32;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &b, NULL), "u32 ids");
    b = c, b.num_hashes = 5;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &b, NULL), "MinHash");
    b = c, b.chunk_align = 48;
    TG_CHECK_ERR(tg_layout_plan(&L, &t, &b, NULL), "power of two");
    TG_CHECK(L == NULL);
    /* locate: ids not of the batch, repeated, missing, too many */
    c.segment = 2;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL)); /* batch 0 {1, 2}, 1 {3, 5, 4}: all chunk */
    tg_layout_loc_t loc;
    TG_CHECK_OK(tg_layout_loc_init(&loc, 3, NULL));
    uint32_t q1[] = {2, 7}, q2[] = {3, 3, 5}, q3[] = {4, 3}, q4[] = {5, 4, 3};
    TG_CHECK_ERR(tg_layout_locate(L, 0, q1, 2, &loc), "position 1: node 7 is not one of");
    TG_CHECK_ERR(tg_layout_locate(L, 1, q2, 3, &loc), "position 1: node 3 again");
    TG_CHECK_ERR(tg_layout_locate(L, 1, q3, 2, &loc), "name 2 of its chunk's 3 rows");
    TG_CHECK_ERR(tg_layout_locate(L, 2, q3, 2, &loc), "batch 2, expected < 2");
    TG_CHECK_ERR(tg_layout_locate(L, 1, q4, 4, &loc), "room for 3");
    TG_CHECK_OK(tg_layout_locate(L, 1, q4, 3, &loc));
    TG_CHECK(loc.n_chunk == 3 && loc.chunk_pos[0] == 2 && loc.chunk_pos[1] == 1 &&
             loc.chunk_pos[2] == 0);
    tg_layout_loc_free(&loc);
    tg_layout_destroy(L);
    /* the same node twice in a segment's cache lookups of one batch */
    uint32_t ids2[] = {1, 2, 1, 2};
    uint64_t off2[] = {0, 2, 4};
    tg_cs_trace_t t2 = {.iters = 2, .off = off2, .ids = ids2};
    TG_CHECK_OK(tg_layout_plan(&L, &t2, &c, NULL));
    TG_CHECK_OK(tg_layout_loc_init(&loc, 3, NULL));
    uint32_t q5[] = {2, 1, 2};
    TG_CHECK_ERR(tg_layout_locate(L, 0, q5, 3, &loc), "node 2 again");
    TG_CHECK_OK(tg_layout_locate(L, 0, q5, 2, &loc));
    TG_CHECK(loc.n_cache == 2 && loc.cache_off[0] < loc.cache_off[1]);
    tg_layout_loc_free(&loc);
    tg_layout_destroy(L);
}

TG_TEST(empty_trace)
{
    uint64_t off[] = {0};
    tg_cs_trace_t t = {.iters = 0, .off = off, .ids = NULL};
    tg_layout_cfg_t c = {.num_nodes = 5, .row_bytes = 8, .disk_budget = 1, .pack_bytes = 16};
    tg_layout_t *L = NULL;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    tg_layout_summary_t sm;
    tg_layout_summary(L, &sm);
    TG_CHECK(sm.batches == 0 && sm.num_segments == 0 && sm.disk_bytes == 0);
    TG_CHECK_EQ_U64(sm.num_partitions, 3); /* two unused nodes fill 16 bytes */
    tg_layout_destroy(L);
    c.num_nodes = 0;
    TG_CHECK_OK(tg_layout_plan(&L, &t, &c, NULL));
    tg_layout_summary(L, &sm);
    TG_CHECK_EQ_U64(sm.num_partitions, 0);
    tg_layout_destroy(L);
}

int main(void)
{
    TG_RUN(random_layouts_match_brute_force);
    TG_RUN(search_respects_the_budget);
    TG_RUN(fixed_segment_checked);
    TG_RUN(minhash_touches_fewer_pages);
    TG_RUN(deterministic);
    TG_RUN(hot_ties);
    TG_RUN(hot_given);
    TG_RUN(budget);
    TG_RUN(bad_input);
    TG_RUN(empty_trace);
    return tg_test_done();
}
