/* graph/megabatch.c - mega-batches of a partitioned dataset (tiergnn/megabatch.h): the static
 * cache's rows and lists, partstat, the rank bitmaps, and the subgraph of a set of parts.
 *
 * Loading a mega-batch touches, of the graph, only what it keeps: T's parts are contiguous runs
 * of partfeat, the map and partadj, read in part id order; a neighbour is kept when a bit test
 * puts it in T (in_t) or in the static cache (is_static); the joined static nodes' lists come
 * from the pairs of T's parts (read with them) and from the static-to-static half in RAM. */
#include "tiergnn/megabatch.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define LIST_READ ((uint64_t)4 << 20) /* bytes of neighbour lists read at once */

/* ---------------------------------------------------------------- small helpers */

/* Bits set in x. Without -mpopcnt, __builtin_popcountll is a call into libgcc, and the loader
 * ranks a few hundred million ids an epoch at 100 M nodes: 12% of its time went to the call. */
static inline uint32_t pop64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* The static index of new id v (its rank among the static nodes, which are sorted by new id),
 * or NONE: a bit test and a popcount, no probing. */
static uint32_t static_find(const tg_mb_t *L, uint64_t v)
{
    uint64_t w = L->is_static[v >> 6];
    if (!((w >> (v & 63)) & 1)) return NONE;
    return L->s_rank[v >> 6] + (uint32_t)pop64(w & ((1ull << (v & 63)) - 1));
}

/* Reads payload bytes of a derived file and drops them from the page cache (a cgroup counts
 * it): the mega-batches are read once per epoch, sequentially. */
static int rd(tg_mb_t *L, const tg_derived_file_t *f, void *buf, uint64_t len, uint64_t off)
{
    if (!len) return 0;
    int rc = tg_derived_read(f, buf, len, off);
    (void)posix_fadvise(f->fd, (off_t)(f->payload_off + off), (off_t)len, POSIX_FADV_DONTNEED);
    L->read_bytes += len;
    L->reads++;
    return rc;
}

static uint64_t rd_id(const tg_mb_t *L, const void *a, uint64_t i)
{
    return L->part->index_bytes == 4 ? ((const uint32_t *)a)[i] : ((const uint64_t *)a)[i];
}

/* tg_budget_reserve with the item named after who. */
static int reserve(tg_mb_t *L, uint64_t bytes, const char *what)
{
    char item[160];
    snprintf(item, sizeof item, "%s: %s", L->who, what);
    return tg_budget_reserve(L->budget, bytes, item);
}

/* tg_err(code, "WHO: out of memory ...") */
static int oom(const tg_mb_t *L, const char *what)
{
    return tg_err(-ENOMEM, "%s: out of memory%s%s", L->who, what ? " " : "", what ? what : "");
}

static int row_check(const tg_mb_t *L, uint64_t old, const void *row, const char *path,
                     uint64_t off)
{
    return L->check_row ? L->check_row(L->check_ctx, old, row, path, off) : 0;
}

static int cmp_desc(const void *a, const void *b)
{
    return -tg_cmp_u64(a, b);
}

/* New ids of the training nodes and of the static nodes (given as old ids): one sequential pass
 * over new_of_old. */
static int to_new_ids(tg_mb_t *L, uint64_t *ids, uint64_t n)
{
    /* ids sorted by old id with their positions, so one sweep of the map serves them */
    uint64_t *pos = malloc(n * 2 * sizeof *pos + 1);
    if (!pos) return oom(L, NULL);
    for (uint64_t i = 0; i < n; i++)
        pos[2 * i] = ids[i], pos[2 * i + 1] = i;
    qsort(pos, n, 2 * sizeof *pos, tg_cmp_u64);
    const tg_part_t *p = L->part;
    uint64_t chunk = (4u << 20) / 8;
    uint64_t *buf = malloc(chunk * 8);
    int rc = buf ? 0 : oom(L, NULL);
    uint64_t k = 0;
    for (uint64_t lo = 0; rc == 0 && lo < L->N && k < n; lo += chunk) {
        uint64_t hi = TG_MIN(L->N, lo + chunk);
        if (pos[2 * k] >= hi) continue;
        /* new ids checked to be nodes: they index the bitmaps and the parts */
        rc = tg_part_new_ids(p, lo, hi - lo, buf);
        (void)posix_fadvise(p->map->fd,
                            (off_t)(p->map->payload_off + p->new_of_old_off + lo * p->id_bytes),
                            (off_t)((hi - lo) * p->id_bytes), POSIX_FADV_DONTNEED);
        L->read_bytes += (hi - lo) * p->id_bytes, L->reads++;
        for (; rc == 0 && k < n && pos[2 * k] < hi; k++)
            ids[pos[2 * k + 1]] = buf[pos[2 * k] - lo];
    }
    free(buf);
    free(pos);
    return rc;
}

/* ---------------------------------------------------------------- the static nodes' lists */

/* fn(L, ctx, si, raw, n): n entries of static node si's in-neighbour list (the partadj file's
 * width: rd_id), each checked to name a node. */
typedef int (*list_fn)(tg_mb_t *L, void *ctx, uint32_t si, const void *raw, uint64_t n);

/* Calls fn on every static node's list (static index ascending), LIST_READ at a time and at
 * least once per node (n = 0 for an empty list); with a progress bar when what is given. */
static int each_static_list(tg_mb_t *L, const char *what, list_fn fn, void *ctx)
{
    tg_part_t *p = L->part;
    tg_progress_t pg;
    char label[160];
    if (what) {
        snprintf(label, sizeof label, "%s: %s", L->who, what);
        tg_progress_begin(&pg, label, L->S, "nodes");
    }
    uint64_t seen = 0;
    int rc = 0;
    for (uint64_t i = 0; i < L->S && rc == 0; i++) {
        uint64_t be[2];
        if ((rc = rd(L, p->adj, be, 16, L->s_new[i] * 8)) < 0 ||
            (rc = tg_part_check_indptr(p, L->s_new[i], 2, be)) < 0)
            break;
        uint64_t len = be[1] - be[0];
        if (be[1] < be[0] || len > L->static_edges - seen) {
            rc = tg_err(-EINVAL, "%s: the static nodes' lists hold more than indptr.bin says",
                        p->adj->path);
            break;
        }
        seen += len;
        uint64_t done = 0;
        do {
            uint64_t n = TG_MIN(len - done, LIST_READ / p->index_bytes);
            if (n)
                rc = rd(L, p->adj, L->lbuf, n * p->index_bytes,
                        p->indices_off + (be[0] + done) * p->index_bytes);
            if (rc == 0) rc = tg_part_check_indices(p, be[0] + done, n, L->lbuf);
            if (rc == 0) rc = fn(L, ctx, (uint32_t)i, L->lbuf, n);
            done += n;
        } while (rc == 0 && done < len);
        if (what && (i & 1023) == 0) tg_progress_update(&pg, i, NULL);
    }
    if (what) {
        if (rc == 0) tg_progress_update(&pg, L->S, NULL);
        tg_progress_end(&pg);
    }
    return rc;
}

/* The RAM half: a static node's in-neighbours that are static too, as static indices. */
static int keep_static(tg_mb_t *L, void *ctx, uint32_t si, const void *raw, uint64_t n)
{
    (void)ctx;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t sj = static_find(L, rd_id(L, raw, j));
        if (sj == NONE) continue;
        if (L->ss_edges == L->ss_cap) {
            uint64_t add = TG_MAX(L->ss_cap / 2, (uint64_t)1 << 16);
            int rc = reserve(L, add * 4, "the static cache's lists");
            if (rc < 0) return rc;
            L->held += add * 4;
            uint32_t *l = realloc(L->s_lists, (L->ss_cap + add) * 4);
            if (!l) return oom(L, "for the static cache's lists");
            L->s_lists = l;
            L->ss_cap += add;
        }
        L->s_lists[L->ss_edges++] = sj;
    }
    L->s_ip[si + 1] = L->ss_edges;
    return 0;
}

/* partstat's payload: (P + 1) u64, the pairs before part k, then the pairs, 2 u32 each (static
 * index, the in-neighbour's offset in its part); within a part, by static index and list order.
 * Built in windows: a window's pairs, counting-sorted by part, go out as one positional write per
 * part (the layout of part_build's rewrites). */
typedef struct {
    tg_derived_writer_t *w;
    uint64_t cap, n, hdr, unflushed;
    uint32_t *key, *pr, *out; /* cap parts; 2 cap pairs; 2 cap sorted pairs */
    uint64_t *wc, *cur;       /* P + 1 window counts; P + 1 write cursors (in pairs) */
} pwin_t;

static int count_pairs(tg_mb_t *L, void *ctx, uint32_t si, const void *raw, uint64_t n)
{
    (void)si;
    uint64_t *cnt = ctx;
    for (uint64_t j = 0; j < n; j++)
        cnt[tg_part_of(L->part, rd_id(L, raw, j)) + 1]++;
    return 0;
}

static int pwin_flush(tg_mb_t *L, pwin_t *w)
{
    uint32_t P = L->P;
    memset(w->wc, 0, (P + 1) * sizeof *w->wc);
    for (uint64_t x = 0; x < w->n; x++)
        w->wc[w->key[x] + 1]++;
    for (uint32_t k = 0; k < P; k++)
        w->wc[k + 1] += w->wc[k];
    for (uint64_t x = 0; x < w->n; x++) { /* stable; afterwards wc[k] is part k's end */
        uint64_t y = w->wc[w->key[x]]++;
        w->out[2 * y] = w->pr[2 * x], w->out[2 * y + 1] = w->pr[2 * x + 1];
    }
    int rc = 0;
    for (uint32_t k = 0; k < P && rc == 0; k++) {
        uint64_t b = k ? w->wc[k - 1] : 0, en = w->wc[k];
        if (en > b) {
            rc = tg_derived_pwrite(w->w, w->out + 2 * b, (en - b) * 8, w->hdr + w->cur[k] * 8);
            w->cur[k] += en - b;
        }
    }
    w->unflushed += w->n * 8;
    w->n = 0;
    if (rc == 0 && w->unflushed >= ((uint64_t)256 << 20)) {
        rc = tg_derived_flush(w->w);
        w->unflushed = 0;
    }
    return rc;
}

static int add_pairs(tg_mb_t *L, void *ctx, uint32_t si, const void *raw, uint64_t n)
{
    pwin_t *w = ctx;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t u = rd_id(L, raw, j);
        uint32_t k = tg_part_of(L->part, u);
        w->key[w->n] = k;
        w->pr[2 * w->n] = si, w->pr[2 * w->n + 1] = (uint32_t)(u - L->part->pp[k]);
        if (++w->n == w->cap) {
            int rc = pwin_flush(L, w);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

/* Builds partstat for these params: two passes over the static nodes' lists (count, write), in
 * windows of what the budget leaves (at most 320 MiB, 20 bytes a pair). */
static int build_pstat(tg_mb_t *L, const char *params)
{
    uint32_t P = L->P;
    tg_budget_t *bg = L->budget;
    uint64_t left = bg->limit ? (bg->limit > bg->used ? bg->limit - bg->used : 0) : UINT64_MAX;
    uint64_t cap = TG_MIN(TG_MAX(left / 2 / 20, (uint64_t)1 << 16), (uint64_t)1 << 24);
    uint64_t tmp = cap * 20 + (P + 1) * 8 * 2 + ((uint64_t)16 << 20);
    int rc = reserve(L, tmp, "building the static pairs (partstat)");
    if (rc < 0) return rc;
    double t0 = tg_now();
    pwin_t w = {.cap = cap, .hdr = (P + 1) * 8};
    w.key = malloc(cap * 4);
    w.pr = malloc(cap * 8);
    w.out = malloc(cap * 8);
    w.wc = calloc(P + 1, 8);
    w.cur = calloc(P + 1, 8);
    if (!w.key || !w.pr || !w.out || !w.wc || !w.cur) rc = oom(L, "building the static pairs");
    /* the header: the pairs before each part (counted in cur, then made a prefix sum) */
    if (rc == 0) rc = each_static_list(L, "static pairs, counting", count_pairs, w.cur);
    for (uint32_t k = 0; rc == 0 && k < P; k++)
        w.cur[k + 1] += w.cur[k];
    if (rc == 0) rc = tg_derived_create(&w.w, L->ds, NULL, "partstat", params, 0);
    if (rc == 0) rc = tg_derived_pwrite(w.w, w.cur, (P + 1) * 8, 0);
    if (rc == 0) rc = tg_derived_set_size(w.w, w.hdr + w.cur[P] * 8);
    if (rc == 0) rc = each_static_list(L, "static pairs, writing", add_pairs, &w);
    if (rc == 0 && w.n) rc = pwin_flush(L, &w);
    if (w.w) rc = rc < 0 ? (tg_derived_abort(w.w), rc) : tg_derived_commit(w.w);
    if (rc == 0)
        tg_log_info("%s: static pairs (partstat, %llu pairs) built in %.1f s", L->who,
                    (unsigned long long)L->static_edges, tg_now() - t0);
    free(w.key), free(w.pr), free(w.out), free(w.wc), free(w.cur);
    tg_budget_release(bg, tmp);
    return rc;
}

/* partstat opened (built when missing or stale) and its part offsets read and checked. */
static int open_pstat(tg_mb_t *L)
{
    uint32_t P = L->P;
    char params[TG_DERIVED_PARAMS_MAX + 1];
    int n = snprintf(params, sizeof params, "%s,static=%llu", L->params, (unsigned long long)L->S);
    if (n < 0 || (size_t)n >= sizeof params)
        return tg_err(-ENAMETOOLONG, "%s: partstat's parameters are too long", L->who);
    int rc = tg_derived_open(&L->pstat, L->ds, NULL, "partstat", params, 0);
    if (rc == -ENOENT || rc == -ESTALE) {
        if (rc == -ESTALE) tg_log_info("%s: rebuilding partstat: %s", L->who, tg_errmsg());
        if ((rc = build_pstat(L, params)) == 0)
            rc = tg_derived_open(&L->pstat, L->ds, NULL, "partstat", params, 0);
    }
    if (rc < 0) return tg_err_prefix(rc, "%s: the static pairs", L->who);
    if ((rc = rd(L, L->pstat, L->ps_off, (P + 1) * 8, 0)) < 0) return rc;
    for (uint32_t k = 0; k < P; k++) {
        if (L->ps_off[k + 1] < L->ps_off[k])
            return tg_err(-EINVAL, "%s: part %u's pairs end before they start", L->pstat->path, k);
        L->pspairs[k] = L->ps_off[k + 1] - L->ps_off[k];
    }
    if (L->ps_off[0] != 0 || L->ps_off[P] != L->static_edges ||
        L->pstat->payload_len != (P + 1) * 8 + L->ps_off[P] * 8)
        return tg_err(-EINVAL,
                      "%s: %llu pairs in %llu payload bytes, expected the static nodes' %llu "
                      "edges",
                      L->pstat->path, (unsigned long long)L->ps_off[P],
                      (unsigned long long)L->pstat->payload_len,
                      (unsigned long long)L->static_edges);
    qsort(L->pspairs, P, sizeof *L->pspairs, cmp_desc);
    return 0;
}

/* The static cache's nodes (L->s_new holds their old ids on entry): old ids kept, new ids
 * sorted, their rows read (and checked), their bitmap and ranks, their lists (the
 * static-to-static half in RAM, the rest by part in partstat). */
static int static_cache_fill(tg_mb_t *L)
{
    tg_part_t *p = L->part;
    uint64_t S = L->S;
    int rc = 0;
    memcpy(L->s_old, L->s_new, S * sizeof *L->s_new);
    if ((rc = to_new_ids(L, L->s_new, S)) < 0) return rc;
    /* sort (new, old) pairs by new id */
    uint64_t *pairs = malloc(2 * S * sizeof *pairs);
    if (!pairs) return oom(L, NULL);
    for (uint64_t i = 0; i < S; i++)
        pairs[2 * i] = L->s_new[i], pairs[2 * i + 1] = L->s_old[i];
    qsort(pairs, S, 2 * sizeof *pairs, tg_cmp_u64);
    for (uint64_t i = 0; i < S; i++)
        L->s_new[i] = pairs[2 * i], L->s_old[i] = pairs[2 * i + 1];
    free(pairs);
    for (uint64_t i = 1; i < S; i++)
        if (L->s_new[i] == L->s_new[i - 1])
            return tg_err(-EINVAL, "%s: static node %llu is given twice", L->who,
                          (unsigned long long)L->s_old[i]);
    for (uint64_t i = 0; i < S && rc == 0; i++) {
        uint64_t v = L->s_new[i];
        rc = rd(L, p->feat, L->s_feat + i * L->row, L->row, v * L->row);
        /* partfeat's rows are copies of features.bin's: checked by original id */
        if (rc == 0)
            rc = row_check(L, L->s_old[i], L->s_feat + i * L->row, p->feat->path,
                           p->feat->payload_off + v * L->row);
        L->is_static[v >> 6] |= 1ull << (v & 63);
    }
    if (rc < 0) return rc;
    /* ranks: the static index of a node is the static nodes before it (s_new ascending) */
    uint32_t acc = 0;
    for (uint64_t w = 0; w < (L->N + 63) / 64; w++) {
        L->s_rank[w] = acc;
        acc += (uint32_t)pop64(L->is_static[w]);
    }
    /* the lists: the static-to-static half in RAM, the rest by part on disk */
    if ((rc = each_static_list(L, NULL, keep_static, NULL)) < 0) return rc;
    return open_pstat(L);
}

/* The parts' sizes and edge counts, each largest first (a mega-batch's caps come from the
 * largest parts), and the largest part's size. */
static int part_sizes(tg_mb_t *L, uint64_t *max_part)
{
    tg_part_t *p = L->part;
    uint32_t P = L->P;
    int rc = 0;
    *max_part = 0;
    L->psize = malloc(P * sizeof *L->psize + 1);
    L->pedge = malloc(P * sizeof *L->pedge + 1);
    uint64_t *ipb = malloc((P + 1) * sizeof *ipb);
    if (!L->psize || !L->pedge || !ipb) {
        free(ipb);
        return oom(L, NULL);
    }
    for (uint32_t k = 0; k <= P && rc == 0; k++) {
        rc = rd(L, p->adj, ipb + k, 8, p->pp[k] * 8);
        if (rc == 0) rc = tg_part_check_indptr(p, p->pp[k], 1, ipb + k);
        if (rc == 0 && k && ipb[k] < ipb[k - 1])
            rc = tg_err(-EINVAL, "%s: indptr[%llu] = %llu, below indptr[%llu] = %llu", p->adj->path,
                        (unsigned long long)p->pp[k], (unsigned long long)ipb[k],
                        (unsigned long long)p->pp[k - 1], (unsigned long long)ipb[k - 1]);
    }
    for (uint32_t k = 0; k < P && rc == 0; k++) {
        L->psize[k] = p->pp[k + 1] - p->pp[k];
        L->pedge[k] = ipb[k + 1] - ipb[k];
        *max_part = TG_MAX(*max_part, L->psize[k]);
    }
    free(ipb);
    if (rc < 0) return rc;
    qsort(L->psize, P, sizeof *L->psize, cmp_desc);
    qsort(L->pedge, P, sizeof *L->pedge, cmp_desc);
    return 0;
}

/* ---------------------------------------------------------------- loading a mega-batch */

/* The local id of neighbour u (a new id) in the mega-batch being loaded, or NONE; static nodes
 * join it when add (T's lists), not when they are reached from a static node's list. */
static inline int bit(const uint64_t *b, uint64_t i)
{
    return (int)((b[i >> 6] >> (i & 63)) & 1);
}

/* Sets (on) or clears bits [lo, hi). */
static void bits_range(uint64_t *b, uint64_t lo, uint64_t hi, int on)
{
    for (uint64_t i = lo; i < hi;) {
        if ((i & 63) == 0 && hi - i >= 64) {
            b[i >> 6] = on ? ~0ull : 0;
            i += 64;
        } else {
            if (on)
                b[i >> 6] |= 1ull << (i & 63);
            else
                b[i >> 6] &= ~(1ull << (i & 63));
            i++;
        }
    }
}

/* Most neighbours are in neither T nor the static cache: two bit tests drop them, and only the
 * kept ones pay for a part lookup (binary search) or the static map. */
static uint32_t local_of(tg_mb_t *L, tg_megabatch_t *m, uint64_t u, int add, uint64_t *base,
                         int *is_static)
{
    *is_static = 0;
    if (bit(L->in_t, u)) {
        uint32_t k = tg_part_of(L->part, u);
        return (uint32_t)(base[L->slot[k]] + (u - L->part->pp[k]));
    }
    if (!bit(L->is_static, u)) return NONE;
    uint32_t si = static_find(L, u);
    if (si == NONE) return NONE;
    *is_static = 1;
    if (L->s_local[si] == NONE && add) {
        uint64_t j = m->nm - m->nt;
        m->sidx[j] = si;
        m->old_ids[m->nm] = L->s_old[si];
        L->s_local[si] = (uint32_t)m->nm++;
    }
    return L->s_local[si];
}

/* Room for need more edges in m. tg_mb_alloc's e_cap bounds every mega-batch (T's edges, its parts'
 * pairs, the static-to-static edges), so this only guards it; a growth is reserved first. */
static int edge_room(tg_mb_t *L, tg_megabatch_t *m, uint64_t need)
{
    if (need <= m->e_cap - m->ne) return 0;
    uint64_t add = TG_MAX(need - (m->e_cap - m->ne), TG_MAX(m->e_cap / 2, (uint64_t)1 << 16));
    int rc = reserve(L, add * 4, "a mega-batch's edges");
    if (rc < 0) return rc;
    uint32_t *n = realloc(m->indices, (m->e_cap + add) * 4);
    if (!n) {
        tg_budget_release(L->budget, add * 4);
        return oom(L, "for a mega-batch's edges");
    }
    m->indices = n;
    m->e_cap += add;
    L->buf_held += add * 4;
    return 0;
}

/* The joined static node si's local: nt + its rank among the joined (s_join, s_jrank: 128 KiB
 * and 64 KiB a million static nodes, which stay in cache where s_local would not). */
static inline uint32_t joined_local(const tg_mb_t *L, uint64_t nt, uint32_t si)
{
    uint64_t w = L->s_join[si >> 6];
    return (uint32_t)(nt + L->s_jrank[si >> 6] + (uint32_t)pop64(w & ((1ull << (si & 63)) - 1)));
}

/* The lists of the static nodes that joined m (locals [nt, nm), in join order so far): their
 * in-neighbours in T, from the pairs of T's parts (read with them), then their static
 * in-neighbours that joined too, from RAM. First the joined nodes are renumbered in static-index
 * order (T's lists follow), so that "joined?" and "which local?" are a bit test and a rank in
 * small tables; then each list gets the room of its pairs and its whole static list, is filled
 * in one pass and the lists are closed up. Every edge touched is one of the joined nodes'. */
static int load_static(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts, const uint64_t *base,
                       uint64_t n)
{
    tg_part_t *p = L->part;
    uint64_t nt = m->nt, nj = m->nm - m->nt, np = 0, hdr = (L->P + 1) * 8, words = (L->S + 63) / 64;
    uint64_t *cnt = L->s_cur;
    int rc = 0;
    /* the joined set, its ranks, and the renumbering (T's edges into it follow) */
    memset(L->s_join, 0, words * sizeof *L->s_join);
    for (uint64_t j = 0; j < nj; j++)
        L->s_join[m->sidx[j] >> 6] |= 1ull << (m->sidx[j] & 63);
    for (uint64_t w = 0, acc = 0; w < words; w++) {
        L->s_jrank[w] = (uint32_t)acc;
        acc += (uint64_t)pop64(L->s_join[w]);
    }
    for (uint64_t j = 0; j < nj; j++)
        cnt[j] = joined_local(L, nt, m->sidx[j]);
    for (uint64_t x = 0; x < m->ne; x++)
        if (m->indices[x] >= nt) m->indices[x] = (uint32_t)cnt[m->indices[x] - nt];
    for (uint64_t w = 0, j = 0; w < words; w++)
        for (uint64_t b = L->s_join[w]; b; b &= b - 1) {
            uint32_t si = (uint32_t)(w * 64 + (uint64_t)__builtin_ctzll(b));
            m->sidx[j] = si;
            m->old_ids[nt + j++] = L->s_old[si];
        }
    memset(cnt, 0, nj * sizeof *cnt);
    /* the parts' pairs, read, checked and counted */
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        uint64_t c = L->ps_off[k + 1] - L->ps_off[k], size = p->pp[k + 1] - p->pp[k];
        if (np + c > L->pairs_cap) {
            rc = tg_err(-EOVERFLOW, "%s: more pairs than the largest parts hold", L->pstat->path);
            break;
        }
        uint32_t *pr = L->pairs + 2 * np;
        if ((rc = rd(L, L->pstat, pr, c * 8, hdr + L->ps_off[k] * 8)) < 0) break;
        for (uint64_t x = 0; x < c; x++) {
            uint32_t si = pr[2 * x];
            if (si >= L->S || pr[2 * x + 1] >= size) {
                rc = tg_err(-EINVAL,
                            "%s: pair %llu (part %u) names static node %u of %llu at offset %u "
                            "of %llu",
                            L->pstat->path, (unsigned long long)(L->ps_off[k] + x), k, si,
                            (unsigned long long)L->S, pr[2 * x + 1], (unsigned long long)size);
                break;
            }
            if (bit(L->s_join, si)) cnt[joined_local(L, nt, si) - nt]++;
            pr[2 * x + 1] = (uint32_t)(base[i] + pr[2 * x + 1]); /* the neighbour's local */
        }
        np += c;
    }
    if (rc < 0) return rc;
    /* room: each list's pairs and its whole static list; the counts become cursors */
    uint64_t room = 0;
    for (uint64_t j = 0; j < nj; j++) {
        uint32_t si = m->sidx[j];
        uint64_t c = cnt[j];
        m->indptr[nt + j] = cnt[j] = m->ne + room;
        room += c + (L->s_ip[si + 1] - L->s_ip[si]);
    }
    if ((rc = edge_room(L, m, room)) < 0) return rc;
    for (uint64_t x = 0; x < np; x++) {
        uint32_t si = L->pairs[2 * x];
        if (bit(L->s_join, si))
            m->indices[cnt[joined_local(L, nt, si) - nt]++] = L->pairs[2 * x + 1];
    }
    for (uint64_t j = 0; j < nj; j++) {
        uint32_t si = m->sidx[j];
        for (uint64_t x = L->s_ip[si]; x < L->s_ip[si + 1]; x++) {
            uint32_t sj = L->s_lists[x];
            if (bit(L->s_join, sj)) m->indices[cnt[j]++] = joined_local(L, nt, sj);
        }
    }
    /* closed up: a list only moves down */
    uint64_t w = m->ne;
    for (uint64_t j = 0; j < nj; j++) {
        uint64_t st = m->indptr[nt + j], len = cnt[j] - st;
        if (w != st) memmove(m->indices + w, m->indices + st, len * sizeof *m->indices);
        m->indptr[nt + j] = w;
        w += len;
    }
    m->ne = w;
    return 0;
}

/* T's lists, part by part (parts[0..n) in id order, part i's locals from base[i]), filtered to
 * the mega-batch: neighbours in T, and static ones, which join it. */
static int load_lists(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts, uint64_t *base,
                      uint64_t n)
{
    tg_part_t *p = L->part;
    size_t ib = p->index_bytes;
    int rc = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        uint64_t lo = p->pp[k], cnt = p->pp[k + 1] - lo;
        if ((rc = rd(L, p->adj, L->ipbuf, (cnt + 1) * 8, lo * 8)) < 0 ||
            (rc = tg_part_check_indptr(p, lo, cnt + 1, L->ipbuf)) < 0)
            break;
        uint64_t bs = 0, bn = 0; /* the list buffer holds entries [bs, bs + bn) */
        for (uint64_t v = 0; v < cnt && rc == 0; v++) {
            m->indptr[base[i] + v] = m->ne;
            for (uint64_t e = L->ipbuf[v]; e < L->ipbuf[v + 1] && rc == 0; e++) {
                if (e >= bs + bn) {
                    bs = e;
                    bn = TG_MIN(L->ipbuf[cnt] - e, LIST_READ / ib);
                    if ((rc = rd(L, p->adj, L->lbuf, bn * ib, p->indices_off + e * ib)) < 0 ||
                        (rc = tg_part_check_indices(p, bs, bn, L->lbuf)) < 0)
                        break;
                }
                uint64_t u = rd_id(L, L->lbuf, e - bs);
                int st;
                uint32_t l = local_of(L, m, u, 1, base, &st);
                m->deg_full++;
                if (l == NONE) continue;
                if ((rc = edge_room(L, m, 1)) < 0) break;
                m->indices[m->ne++] = l;
                if (st)
                    m->deg_static++;
                else
                    m->deg_induced++;
            }
        }
    }
    return rc;
}

/* T's rows and original ids: one read per run of consecutive parts (parts in id order). */
static int load_rows(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts, const uint64_t *base,
                     uint64_t n)
{
    tg_part_t *p = L->part;
    int rc = 0;
    for (uint64_t i = 0; i < n && rc == 0;) {
        uint64_t j = i + 1;
        while (j < n && parts[j] == parts[j - 1] + 1)
            j++;
        uint64_t lo = p->pp[parts[i]], hi = p->pp[parts[j - 1] + 1];
        rc = rd(L, p->feat, m->feat + base[i] * L->row, (hi - lo) * L->row, lo * L->row);
        if (rc == 0) rc = tg_part_old_ids(p, lo, hi - lo, m->old_ids + base[i]);
        /* partfeat's rows are copies of features.bin's: checked by original id */
        for (uint64_t t = 0; t < hi - lo && rc == 0 && L->check_row; t++)
            rc = row_check(L, m->old_ids[base[i] + t], m->feat + (base[i] + t) * L->row,
                           p->feat->path, p->feat->payload_off + (lo + t) * L->row);
        L->read_bytes += (hi - lo) * p->id_bytes, L->reads++;
        i = j;
    }
    return rc;
}

/* T's nodes: part i's locals from base[i], marked in in_t and slot; -EINVAL for a part out of
 * range or given twice, -EOVERFLOW past the buffers' room. Marks what it checked (undone by
 * unmark). */
static int mark_parts(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts, uint64_t *base,
                      uint64_t n, uint64_t *marked)
{
    tg_part_t *p = L->part;
    for (*marked = 0; *marked < n; ++*marked) {
        uint32_t k = parts[*marked];
        if (k >= L->P || L->slot[k] >= 0)
            return tg_err(-EINVAL, "%s: a mega-batch of part %u: %s", L->who, k,
                          k >= L->P ? "no such part" : "given twice");
        base[*marked] = m->nt;
        L->slot[k] = (int32_t)*marked;
        bits_range(L->in_t, p->pp[k], p->pp[k + 1], 1);
        m->nt += p->pp[k + 1] - p->pp[k];
    }
    if (m->nt > L->t_cap)
        return tg_err(-EOVERFLOW, "%s: a mega-batch of %llu nodes, more than planned (%llu)",
                      L->who, (unsigned long long)m->nt, (unsigned long long)L->t_cap);
    return 0;
}

/* The load's maps back to empty: the first `marked` parts, the joined static nodes. */
static void unmark(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts, uint64_t marked)
{
    tg_part_t *p = L->part;
    for (uint64_t i = 0; i < marked; i++) {
        L->slot[parts[i]] = -1;
        bits_range(L->in_t, p->pp[parts[i]], p->pp[parts[i] + 1], 0);
    }
    for (uint64_t j = m->nt; j < m->nm; j++)
        L->s_local[m->sidx[j - m->nt]] = NONE;
}

int tg_mb_load(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts_in, uint64_t n)
{
    tg_part_t *p = L->part;
    double t0 = tg_now();
    tg_adj_destroy(m->adj);
    m->adj = NULL;
    m->nt = m->nm = m->ne = m->nseeds = 0;
    m->deg_full = m->deg_induced = m->deg_static = 0;
    if (!L->bufs) return tg_err(-EINVAL, "%s: a mega-batch loaded before tg_mb_alloc", L->who);
    /* its parts in id order: reads go up the files */
    uint32_t *parts = malloc(n * sizeof *parts + 1);
    uint64_t *base = malloc(n * sizeof *base + 1);
    int rc = parts && base ? 0 : oom(L, NULL);
    uint64_t marked = 0;
    if (rc == 0) memcpy(parts, parts_in, n * sizeof *parts);
    for (uint64_t i = 1; i < n && rc == 0; i++) /* insertion sort: a mega-batch has few parts */
        for (uint64_t j = i; j > 0 && parts[j - 1] > parts[j]; j--) {
            uint32_t t = parts[j];
            parts[j] = parts[j - 1];
            parts[j - 1] = t;
        }
    if (rc == 0) rc = mark_parts(L, m, parts, base, n, &marked);
    m->nm = m->nt;
    if (rc == 0) rc = load_rows(L, m, parts, base, n);
    /* T's lists, part by part, filtered to the mega-batch (static neighbours join it) */
    if (rc == 0) rc = load_lists(L, m, parts, base, n);
    /* the static nodes that joined: their lists, filtered to the mega-batch */
    if (rc == 0 && m->nm > m->nt) rc = load_static(L, m, parts, base, n);
    if (rc == 0) m->indptr[m->nm] = m->ne;
    /* T's training nodes, part by part */
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        for (uint64_t x = L->tp[k]; x < L->tp[k + 1]; x++)
            m->seeds[m->nseeds++] = base[i] + (L->train_new[x] - p->pp[k]);
    }
    if (rc == 0) rc = tg_adj_raw_create(&m->adj, m->nm, m->ne, m->indptr, m->indices, 4);
    if (parts) unmark(L, m, parts, marked);
    free(parts);
    free(base);
    L->load_s += tg_now() - t0;
    return rc;
}

/* ---------------------------------------------------------------- the loader */

/* The maps and the static cache's arrays, reserved first: the parts' sizes, training nodes (new
 * ids, per part), the parts' slots and pairs (offsets, sizes), the static cache (rows, ids, list
 * bounds, locals, cursors; its static-to-static lists as they grow), the bitmaps and ranks, the
 * list-reading buffers. */
uint64_t tg_mb_fixed_bytes(const tg_mb_t *L, uint64_t max_part)
{
    uint64_t P = L->P, S = L->S, N = L->N;
    return P * 16 + L->ntrain * 8 + (P + 1) * 8 + P * 4 + (P + 1) * 8 + P * 8 +
           S * (L->row + 8 + 8 + 8 + 4 + 8) + (S + 63) / 64 * (8 + 4) +
           (N + 63) / 64 * (8 + 8 + 4) + (max_part + 1) * 8 + LIST_READ;
}

static int open_alloc(tg_mb_t *L, uint64_t max_part)
{
    uint64_t P = L->P, S = L->S, N = L->N;
    L->ipbuf_cap = max_part + 1;
    uint64_t fixed = tg_mb_fixed_bytes(L, max_part);
    int rc = reserve(L, fixed, "static cache and maps");
    if (rc < 0) return rc;
    L->held += fixed;
    L->train_new = malloc(L->ntrain * sizeof *L->train_new + 1);
    L->tp = calloc(P + 1, sizeof *L->tp);
    L->slot = malloc(P * sizeof *L->slot + 1);
    L->in_t = calloc((N + 63) / 64, 8);
    L->is_static = calloc((N + 63) / 64, 8);
    L->ipbuf = malloc(L->ipbuf_cap * sizeof *L->ipbuf);
    L->lbuf = malloc(LIST_READ);
    L->s_new = malloc(S * sizeof *L->s_new + 1);
    L->s_old = malloc(S * sizeof *L->s_old + 1);
    L->s_ip = calloc(S + 1, sizeof *L->s_ip);
    L->s_feat = malloc(S * L->row + 1);
    L->s_local = malloc(S * sizeof *L->s_local + 1);
    L->s_cur = malloc(S * sizeof *L->s_cur + 1);
    L->s_join = malloc((S + 63) / 64 * sizeof *L->s_join + 1);
    L->s_jrank = malloc((S + 63) / 64 * sizeof *L->s_jrank + 1);
    L->s_rank = malloc((N + 63) / 64 * sizeof *L->s_rank + 1);
    L->ps_off = calloc(P + 1, sizeof *L->ps_off);
    L->pspairs = calloc(P + 1, sizeof *L->pspairs);
    if (!L->train_new || !L->tp || !L->slot || !L->in_t || !L->is_static || !L->ipbuf || !L->lbuf ||
        !L->s_new || !L->s_old || !L->s_ip || !L->s_feat || !L->s_local || !L->s_cur ||
        !L->s_join || !L->s_jrank || !L->s_rank || !L->ps_off || !L->pspairs)
        return oom(L, "for the static cache and the maps");
    for (uint32_t k = 0; k < P; k++)
        L->slot[k] = -1;
    for (uint64_t i = 0; i < S; i++)
        L->s_local[i] = NONE;
    return 0;
}

/* The training nodes in new ids, ascending, and where each part's start (tp). */
static int train_by_part(tg_mb_t *L, const uint64_t *train_old)
{
    memcpy(L->train_new, train_old, L->ntrain * sizeof *L->train_new);
    int rc = to_new_ids(L, L->train_new, L->ntrain);
    if (rc < 0) return rc;
    qsort(L->train_new, L->ntrain, sizeof *L->train_new, tg_cmp_u64);
    for (uint64_t i = 0; i < L->ntrain; i++)
        L->tp[tg_part_of(L->part, L->train_new[i]) + 1]++;
    for (uint32_t k = 0; k < L->P; k++)
        L->tp[k + 1] += L->tp[k];
    return 0;
}

int tg_mb_open(tg_mb_t **out, const tg_mb_opts_t *o)
{
    tg_mb_t *L = calloc(1, sizeof *L);
    if (!(*out = L)) return tg_err(-ENOMEM, "%s: out of memory", o->who ? o->who : "megabatch");
    L->part = o->part;
    L->ds = o->ds;
    L->budget = o->budget;
    L->who = o->who ? o->who : "megabatch";
    snprintf(L->params, sizeof L->params, "%s", o->params);
    L->P = o->part->sum.parts;
    L->N = o->part->sum.num_nodes;
    L->row = o->row_bytes;
    L->check_row = o->check_row;
    L->check_ctx = o->check_ctx;
    L->ntrain = o->num_train;
    L->S = TG_MIN(o->num_static, L->N);
    L->static_edges = o->static_edges;
    uint64_t max_part;
    int rc = L->N > UINT32_MAX ? tg_err(-EOVERFLOW,
                                        "%s: %llu nodes: mega-batches use 32-bit local ids (at "
                                        "most %u nodes)",
                                        L->who, (unsigned long long)L->N, UINT32_MAX)
                               : 0;
    /* ids index the maps: each checked to be a node */
    for (uint64_t i = 0; rc == 0 && i < L->S + L->ntrain; i++) {
        uint64_t v = i < L->S ? o->static_old[i] : o->train_old[i - L->S];
        if (v >= L->N)
            rc = tg_err(-EINVAL, "%s: %s node %llu of a graph of %llu nodes", L->who,
                        i < L->S ? "static" : "training", (unsigned long long)v,
                        (unsigned long long)L->N);
    }
    if (rc == 0) rc = part_sizes(L, &max_part);
    if (rc == 0) rc = open_alloc(L, max_part);
    if (rc == 0) rc = train_by_part(L, o->train_old);
    if (rc == 0 && L->S) {
        memcpy(L->s_new, o->static_old, L->S * sizeof *L->s_new); /* old ids until filled */
        rc = static_cache_fill(L);
    }
    if (rc < 0) tg_mb_close(L), *out = NULL;
    return rc;
}

void tg_mb_close(tg_mb_t *L)
{
    if (!L) return;
    tg_mb_release(L);
    tg_derived_close(L->pstat);
    free(L->train_new), free(L->tp), free(L->psize), free(L->pedge), free(L->pspairs);
    free(L->s_new), free(L->s_old), free(L->s_feat), free(L->s_ip), free(L->s_lists);
    free(L->s_rank), free(L->s_local), free(L->s_jrank), free(L->s_cur), free(L->s_join);
    free(L->ps_off), free(L->slot), free(L->in_t), free(L->is_static), free(L->ipbuf);
    free(L->lbuf);
    if (L->held) tg_budget_release(L->budget, L->held);
    free(L);
}

/* ---------------------------------------------------------------- the buffers */

/* Bytes of one mega-batch buffer for these caps. */
static uint64_t buf_bytes(const tg_mb_t *L, uint64_t t, uint64_t e, uint64_t seeds)
{
    uint64_t m = t + L->S;
    return t * L->row + m * 8 + (m + 1) * 8 + e * 4 + L->S * 4 + seeds * 8;
}

uint64_t tg_mb_bytes(const tg_mb_t *L, int nbuf, uint64_t nodes, uint64_t edges, uint64_t pairs)
{
    return (uint64_t)nbuf *
               buf_bytes(L, nodes, edges + pairs + L->ss_edges, TG_MIN(nodes, L->ntrain)) +
           pairs * 8;
}

int tg_mb_alloc(tg_mb_t *L, tg_megabatch_t *bufs, int nbuf, uint64_t nodes, uint64_t edges,
                uint64_t pairs)
{
    if (L->bufs) return 0;
    L->t_cap = nodes;
    /* exact bounds: T's edges, its parts' pairs, the static-to-static edges */
    L->e_cap = edges + pairs + L->ss_edges;
    L->pairs_cap = pairs;
    L->seeds_cap = TG_MIN(nodes, L->ntrain);
    uint64_t bytes = tg_mb_bytes(L, nbuf, nodes, edges, pairs);
    char what[64];
    snprintf(what, sizeof what, "%s mega-batches", nbuf == 2 ? "two" : "the");
    int rc = reserve(L, bytes, what);
    if (rc < 0) return rc;
    L->buf_held = bytes;
    L->nbuf = nbuf;
    L->bufs = bufs;
    memset(bufs, 0, (size_t)nbuf * sizeof *bufs);
    if (!(L->pairs = malloc(L->pairs_cap * 8 + 8)))
        return oom(L, "for a mega-batch's static pairs");
    uint64_t mm = L->t_cap + L->S;
    for (int i = 0; i < nbuf; i++) {
        tg_megabatch_t *m = &L->bufs[i];
        m->feat = malloc(L->t_cap * L->row + 1);
        m->old_ids = malloc(mm * 8 + 8);
        m->indptr = malloc((mm + 1) * 8);
        m->indices = malloc(L->e_cap * 4 + 4);
        m->e_cap = L->e_cap;
        m->sidx = malloc(L->S * 4 + 4);
        m->seeds = malloc(L->seeds_cap * 8 + 8);
        if (!m->feat || !m->old_ids || !m->indptr || !m->indices || !m->sidx || !m->seeds)
            return oom(L, "for a mega-batch");
    }
    return 0;
}

void tg_mb_release(tg_mb_t *L)
{
    for (int i = 0; L->bufs && i < L->nbuf; i++) {
        tg_megabatch_t *m = &L->bufs[i];
        tg_adj_destroy(m->adj);
        free(m->feat), free(m->old_ids), free(m->indptr), free(m->indices), free(m->sidx);
        free(m->seeds);
        memset(m, 0, sizeof *m);
    }
    L->bufs = NULL;
    L->nbuf = 0;
    free(L->pairs);
    L->pairs = NULL;
    if (L->buf_held) tg_budget_release(L->budget, L->buf_held);
    L->buf_held = 0;
}
