/* The LADIES layer-wise sampler: the batch layout's promises and determinism on a random graph,
 * weights equal to a brute-force computation on a crafted graph, inclusion probabilities equal
 * to p(v), weights through spill files, the gradient check of GCN's weighted aggregation (layer
 * and whole model), refusal of weighted blocks by other models, training through every exact
 * strategy (checkpoints identical to memory's) with eval, resume and every error path of the
 * flags. */
#include "test_engine_common.h"
#include "test_nn_common.h"

#include "tiergnn/engine.h"

/* A random graph: in-degree 0..maxdeg, sorted lists, no repeats; every 5th node also lists
 * itself (an explicit self edge, which P drops). */
static tg_adj_t *random_graph(uint64_t n, uint64_t maxdeg, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint64_t *indptr = malloc((n + 1) * sizeof *indptr);
    uint64_t *indices = malloc(n * (maxdeg + 1) * sizeof *indices + 8);
    uint8_t *mark = calloc(n, 1);
    indptr[0] = 0;
    uint64_t e = 0;
    for (uint64_t v = 0; v < n; v++) {
        uint64_t deg = tg_rng_below(&r, maxdeg + 1), got = 0;
        if (v % 5 == 0) {
            mark[v] = 1;
            got++;
            deg++;
        }
        while (got < deg) {
            uint64_t u = tg_rng_below(&r, n);
            if (!mark[u]) {
                mark[u] = 1;
                got++;
            }
        }
        for (uint64_t u = 0; u < n; u++)
            if (mark[u]) {
                indices[e++] = u;
                mark[u] = 0;
            }
        indptr[v + 1] = e;
    }
    free(mark);
    tg_adj_t *adj;
    if (tg_adj_memory_create(&adj, n, e, indptr, indices, 1) < 0) {
        fprintf(stderr, "%s\n", tg_errmsg());
        exit(1);
    }
    return adj;
}

static int has_edge(tg_adj_t *adj, uint64_t v, uint64_t u)
{
    for (uint64_t p = adj->indptr[v]; p < adj->indptr[v + 1]; p++) {
        uint64_t w;
        tg_adj_read(adj, &p, 1, &w);
        if (w == u) return 1;
    }
    return 0;
}

static uint64_t degree_no_self(tg_adj_t *adj, uint64_t v)
{
    uint64_t d = 0;
    for (uint64_t p = adj->indptr[v]; p < adj->indptr[v + 1]; p++) {
        uint64_t w;
        tg_adj_read(adj, &p, 1, &w);
        d += w != v;
    }
    return d;
}

/* Every promise of the layout (graph.h) and of LADIES' blocks. */
static void check_batch(tg_adj_t *adj, const tg_batch_t *b, const uint64_t *seeds, size_t n,
                        const int64_t *sizes, int L)
{
    TG_CHECK(b->num_layers == L);
    TG_CHECK_EQ_U64(b->num_seeds, n);
    TG_CHECK_EQ_U64(b->num_nodes, b->blocks[0].num_src);
    TG_CHECK_EQ_U64(b->blocks[L - 1].num_dst, n);
    for (size_t i = 0; i < n; i++)
        TG_CHECK_EQ_U64(b->nodes[i], seeds[i]);
    uint64_t bound = n;
    for (int l = 0; l < L; l++)
        bound += sizes[l] < 0 ? adj->num_nodes : (uint64_t)sizes[l];
    TG_CHECK(b->num_nodes <= TG_MIN(bound, adj->num_nodes));
    TG_CHECK_EQ_U64(tg_sampler_max_nodes(&tg_sampler_ladies, n, L, sizes, adj->num_nodes),
                    TG_MIN(bound, adj->num_nodes));
    for (uint32_t i = 0; i < b->num_nodes; i++)
        for (uint32_t j = i + 1; j < b->num_nodes; j++)
            if (b->nodes[i] == b->nodes[j]) {
                TG_FAIL("node %llu twice", (unsigned long long)b->nodes[i]);
                return;
            }
    for (int l = 0; l < L; l++) {
        const tg_block_t *bl = &b->blocks[l];
        TG_CHECK(bl->weights != NULL);
        TG_CHECK(bl->num_dst <= bl->num_src);
        if (l + 1 < L) TG_CHECK_EQ_U64(b->blocks[l + 1].num_src, bl->num_dst);
        if (sizes[l] > 0) TG_CHECK(bl->num_src - bl->num_dst <= (uint64_t)sizes[l]);
        TG_CHECK_EQ_U64(bl->indptr[bl->num_dst], bl->num_edges);
        for (uint32_t i = 0; i < bl->num_dst; i++) {
            uint64_t beg = bl->indptr[i], end = bl->indptr[i + 1];
            if (end <= beg) {
                TG_FAIL("block %d row %u has no self loop", l, i);
                return;
            }
            TG_CHECK_EQ_U64(bl->indices[end - 1], i); /* the self loop, last */
            double sum = 0;
            for (uint64_t e = beg; e < end; e++) {
                uint32_t j = bl->indices[e];
                TG_CHECK(j < bl->num_src);
                TG_CHECK(bl->weights[e] > 0);
                sum += bl->weights[e];
                if (e + 1 < end) {
                    TG_CHECK(j != i);
                    if (!has_edge(adj, b->nodes[i], b->nodes[j]))
                        TG_FAIL("block %d: %llu <- %llu is not an edge", l,
                                (unsigned long long)b->nodes[i], (unsigned long long)b->nodes[j]);
                }
            }
            TG_CHECK_NEAR(sum, 1.0, 1e-5);
        }
        /* every new source is reached by an edge of this block */
        for (uint32_t j = bl->num_dst; j < bl->num_src; j++) {
            int seen = 0;
            for (uint64_t e = 0; e < bl->num_edges && !seen; e++)
                seen = bl->indices[e] == j;
            TG_CHECK(seen);
        }
    }
}

static int same_batch(const tg_batch_t *a, const tg_batch_t *b)
{
    if (a->num_nodes != b->num_nodes || a->num_layers != b->num_layers ||
        memcmp(a->nodes, b->nodes, a->num_nodes * sizeof *a->nodes))
        return 0;
    for (int l = 0; l < a->num_layers; l++) {
        const tg_block_t *x = &a->blocks[l], *y = &b->blocks[l];
        if (x->num_src != y->num_src || x->num_dst != y->num_dst || x->num_edges != y->num_edges ||
            memcmp(x->indptr, y->indptr, (x->num_dst + 1) * sizeof *x->indptr) ||
            memcmp(x->indices, y->indices, x->num_edges * sizeof *x->indices) ||
            memcmp(x->weights, y->weights, x->num_edges * sizeof *x->weights))
            return 0;
    }
    return 1;
}

TG_TEST(invariants_and_determinism)
{
    tg_adj_t *adj = random_graph(400, 12, 7);
    int64_t sizes[3] = {30, 20, 10};
    tg_sampler_t *s = NULL, *s2 = NULL;
    TG_CHECK_OK(tg_sampler_open(&s, &tg_sampler_ladies, adj, 3, sizes));
    TG_CHECK_OK(tg_sampler_open(&s2, &tg_sampler_ladies, adj, 3, sizes));
    uint64_t seeds[16];
    for (int i = 0; i < 16; i++)
        seeds[i] = (uint64_t)(i * 23 + 5) % 400;
    int differ = 0;
    for (uint64_t batch = 0; batch < 6; batch++) {
        tg_rng_t r1, r2;
        tg_sampler_batch_rng(&r1, 9, 2, batch);
        tg_sampler_batch_rng(&r2, 9, 2, batch);
        tg_batch_t a, b, c;
        TG_CHECK_OK(tg_sampler_sample(s, seeds, 16, &r1, &a));
        check_batch(adj, &a, seeds, 16, sizes, 3);
        /* another sampler (its own scratch, used before) and the same RNG: the same batch */
        TG_CHECK_OK(tg_sampler_sample(s2, seeds, 16, &r2, &b));
        TG_CHECK(same_batch(&a, &b));
        tg_rng_t r3;
        tg_sampler_batch_rng(&r3, 9, 2, batch + 100);
        TG_CHECK_OK(tg_sampler_sample(s2, seeds, 16, &r3, &c));
        differ += !same_batch(&a, &c);
        tg_batch_free(&a);
        tg_batch_free(&b);
        tg_batch_free(&c);
    }
    TG_CHECK(differ > 0); /* other RNG streams sample other nodes */
    /* -1: every neighbour, unsampled, with P's weights 1 / d_u */
    int64_t all[2] = {TG_FANOUT_ALL, TG_FANOUT_ALL};
    tg_sampler_t *sa = NULL;
    TG_CHECK_OK(tg_sampler_open(&sa, &tg_sampler_ladies, adj, 2, all));
    tg_rng_t r;
    tg_rng_seed(&r, 1);
    tg_batch_t f;
    TG_CHECK_OK(tg_sampler_sample(sa, seeds, 4, &r, &f));
    check_batch(adj, &f, seeds, 4, all, 2);
    const tg_block_t *bl = &f.blocks[1];
    for (uint32_t i = 0; i < bl->num_dst; i++) {
        uint64_t d = degree_no_self(adj, f.nodes[i]);
        TG_CHECK_EQ_U64(bl->indptr[i + 1] - bl->indptr[i], d + 1);
        for (uint64_t e = bl->indptr[i]; e < bl->indptr[i + 1]; e++)
            TG_CHECK(bl->weights[e] == (float)(1.0 / (double)(d + 1)));
    }
    tg_batch_free(&f);
    /* errors: a layer size of 0, a repeated seed, a seed beyond the graph */
    int64_t zero[2] = {5, 0};
    tg_sampler_t *z = NULL;
    TG_CHECK_ERR(tg_sampler_open(&z, &tg_sampler_ladies, adj, 2, zero), "layer size 0 for layer 1");
    uint64_t dup[2] = {3, 3}, far[1] = {400};
    tg_batch_t e;
    TG_CHECK_ERR(tg_sampler_sample(s, dup, 2, &r, &e), "appears twice");
    TG_CHECK_ERR(tg_sampler_sample(s, far, 1, &r, &e), "not a node id");
    int64_t neg[1] = {-2};
    TG_CHECK_ERR(tg_sampler_open(&z, &tg_sampler_ladies, adj, 1, neg), "layer size -2");
    TG_CHECK(tg_sampler_find("ladies") == &tg_sampler_ladies);
    TG_CHECK_ERR(tg_sampler_find("fastgcn") ? 0 : -EINVAL, "expected one of: node, ladies");
    tg_sampler_destroy(s);
    tg_sampler_destroy(s2);
    tg_sampler_destroy(sa);
    tg_adj_destroy(adj);
}

/* A crafted graph of 8 nodes (in-neighbour lists), node 2 with an explicit self edge. */
static tg_adj_t *crafted(void)
{
    static const uint64_t ip[] = {0, 3, 5, 8, 10, 11, 13, 14, 16};
    static const uint64_t ix[] = {1, 2, 5, /* 0 */ 0, 3, /* 1 */ 0, 2, 6, /* 2 */
                                  1, 4,                                   /* 3 */
                                  3,                                      /* 4 */
                                  0, 7,                                   /* 5 */
                                  2,                                      /* 6 */
                                  5, 6};                                  /* 7 */
    tg_adj_t *adj;
    if (tg_adj_memory_create(&adj, 8, 16, ip, ix, 0) < 0) exit(1);
    return adj;
}

/* q(v) = sum_{u in C} (P[u,v])^2, P = D^-1 (A + I) without the graph's own self edges, from the
 * dense matrix. */
static void brute_q(tg_adj_t *adj, const uint64_t *C, size_t nc, double *q)
{
    double P[8][8] = {{0}};
    for (uint64_t u = 0; u < 8; u++) {
        double d = 1.0 + (double)degree_no_self(adj, u);
        P[u][u] = 1.0 / d;
        for (uint64_t v = 0; v < 8; v++)
            if (v != u && has_edge(adj, u, v)) P[u][v] = 1.0 / d;
    }
    for (uint64_t v = 0; v < 8; v++) {
        q[v] = 0;
        for (size_t i = 0; i < nc; i++)
            q[v] += P[C[i]][v] * P[C[i]][v];
    }
}

TG_TEST(weights_brute_force)
{
    tg_adj_t *adj = crafted();
    uint64_t seeds[2] = {0, 2};
    for (int64_t k = 1; k <= 7; k++) {
        for (uint64_t rs = 0; rs < 8; rs++) {
            int64_t sizes[1] = {k};
            tg_sampler_t *s = NULL;
            TG_CHECK_OK(tg_sampler_open(&s, &tg_sampler_ladies, adj, 1, sizes));
            tg_rng_t r;
            tg_rng_seed2(&r, 5, rs);
            tg_batch_t b;
            TG_CHECK_OK(tg_sampler_sample(s, seeds, 2, &r, &b));
            check_batch(adj, &b, seeds, 2, sizes, 1);
            double q[8];
            brute_q(adj, seeds, 2, q);
            const tg_block_t *bl = &b.blocks[0];
            /* S as far as the edges show it; each row keeps exactly N(u) in S, plus u */
            uint8_t inS[8] = {0};
            for (uint32_t i = 0; i < bl->num_dst; i++)
                for (uint64_t e = bl->indptr[i]; e + 1 < bl->indptr[i + 1]; e++)
                    inS[b.nodes[bl->indices[e]]] = 1;
            int candidates = 0, shown = 0;
            for (uint64_t v = 0; v < 8; v++) {
                candidates += q[v] > 0;
                shown += inS[v];
            }
            TG_CHECK(shown <= k);
            for (uint32_t i = 0; i < bl->num_dst; i++) {
                uint64_t u = b.nodes[i];
                double sum = 0;
                int kept = 0;
                for (uint64_t v = 0; v < 8; v++)
                    if (v != u && has_edge(adj, u, v) && inS[v]) {
                        sum += 1.0 / q[v];
                        kept++;
                    }
                sum += 1.0 / q[u];
                TG_CHECK_EQ_U64(bl->indptr[i + 1] - bl->indptr[i], (uint64_t)kept + 1);
                for (uint64_t e = bl->indptr[i]; e < bl->indptr[i + 1]; e++) {
                    uint64_t v = b.nodes[bl->indices[e]];
                    double want = (1.0 / q[v]) / sum;
                    if (fabs(bl->weights[e] - want) > 1e-6)
                        TG_FAIL("k %lld: weight of %llu <- %llu is %.8f, brute force %.8f",
                                (long long)k, (unsigned long long)u, (unsigned long long)v,
                                (double)bl->weights[e], want);
                }
            }
            /* k >= the candidates: every neighbour is kept */
            if (k >= candidates)
                for (uint32_t i = 0; i < bl->num_dst; i++)
                    TG_CHECK_EQ_U64(bl->indptr[i + 1] - bl->indptr[i],
                                    degree_no_self(adj, b.nodes[i]) + 1);
            tg_batch_free(&b);
            tg_sampler_destroy(s);
        }
    }
    tg_adj_destroy(adj);
}

/* With one node per layer, the sampled node is v with probability p(v) = q(v) / sum q. Seeds 0
 * and 1 list each other, so every candidate shows as an edge when drawn. */
TG_TEST(inclusion_probabilities)
{
    tg_adj_t *adj = crafted();
    uint64_t seeds[2] = {0, 1};
    double q[8], Q = 0;
    brute_q(adj, seeds, 2, q);
    for (int v = 0; v < 8; v++)
        Q += q[v];
    int64_t sizes[1] = {1};
    tg_sampler_t *s = NULL;
    TG_CHECK_OK(tg_sampler_open(&s, &tg_sampler_ladies, adj, 1, sizes));
    enum { DRAWS = 20000 };
    double count[8] = {0};
    for (uint64_t t = 0; t < DRAWS; t++) {
        tg_rng_t r;
        tg_sampler_batch_rng(&r, 3, 0, t);
        tg_batch_t b;
        TG_CHECK_OK(tg_sampler_sample(s, seeds, 2, &r, &b));
        const tg_block_t *bl = &b.blocks[0];
        int found = 0;
        for (uint32_t i = 0; i < bl->num_dst && !found; i++)
            if (bl->indptr[i + 1] - bl->indptr[i] == 2) {
                count[b.nodes[bl->indices[bl->indptr[i]]]] += 1;
                found = 1;
            }
        if (!found) { /* a seed drew itself: only self loops */
            TG_CHECK_EQ_U64(bl->num_edges, 2);
            TG_CHECK_EQ_U64(b.num_nodes, 2);
        }
        tg_batch_free(&b);
    }
    /* a drawn seed that is also the other's neighbour shows as that edge; count the
     * self-only draws as the remainder */
    for (int v = 0; v < 8; v++) {
        if (q[v] == 0) {
            TG_CHECK(count[v] == 0);
            continue;
        }
        double p = q[v] / Q, f = count[v] / DRAWS;
        if (fabs(f - p) > 0.012) TG_FAIL("node %d drawn with frequency %.4f, p(v) = %.4f", v, f, p);
    }
    tg_sampler_destroy(s);
    tg_adj_destroy(adj);
}

TG_TEST(spill_keeps_weights)
{
    tg_adj_t *adj = random_graph(300, 10, 3);
    int64_t sizes[2] = {25, 15};
    tg_sampler_t *s = NULL;
    TG_CHECK_OK(tg_sampler_open(&s, &tg_sampler_ladies, adj, 2, sizes));
    tg_spill_t *sp = NULL;
    TG_CHECK_OK(tg_spill_open(&sp, tg_test_tmpdir("ladies-spill"), NULL));
    tg_batch_t b[3];
    uint64_t seeds[5] = {1, 50, 99, 150, 299};
    for (int i = 0; i < 3; i++) {
        tg_rng_t r;
        tg_sampler_batch_rng(&r, 1, 0, (uint64_t)i);
        TG_CHECK_OK(tg_sampler_sample(s, seeds, 5, &r, &b[i]));
        b[i].id = (uint64_t)i;
        TG_CHECK_OK(tg_spill_write(sp, &b[i]));
    }
    TG_CHECK_OK(tg_spill_rewind(sp));
    for (int i = 0; i < 3; i++) {
        tg_batch_t got;
        TG_CHECK(tg_spill_read(sp, &got) == 1);
        TG_CHECK(same_batch(&b[i], &got));
        tg_batch_free(&got);
    }
    /* a batch with weights on some blocks only is refused */
    TG_CHECK_OK(tg_spill_reset(sp));
    float *w = b[0].blocks[1].weights;
    b[0].blocks[1].weights = NULL;
    TG_CHECK_ERR(tg_spill_write(sp, &b[0]), "all blocks weighted or none");
    b[0].blocks[1].weights = w;
    for (int i = 0; i < 3; i++)
        tg_batch_free(&b[i]);
    tg_spill_close(sp);
    tg_sampler_destroy(s);
    tg_adj_destroy(adj);
}

/* ---------------------------------------------------------------- the model side */

static tg_model_config_t gcn_cfg(int layers)
{
    tg_model_config_t c;
    tg_model_config_default(&c);
    c.type = TG_MODEL_GCN;
    c.in_dim = 6;
    c.hidden = 8;
    c.out_dim = 4;
    c.num_layers = layers;
    c.dropout = 0.0f;
    return c;
}

typedef struct {
    const tg_layer_t *ly;
    tg_layer_acts_t acts;
    tg_block_t *blk;
    float *x, *out, *r;
} wlayer_ctx_t;

static double wlayer_obj(void *vc)
{
    wlayer_ctx_t *c = vc;
    tg_layer_forward(c->ly, &c->acts, c->blk, c->x, c->out, 1, 0, NULL);
    return nt_dot(c->r, c->out, (size_t)c->blk->num_dst * c->ly->out);
}

/* GCN's weighted aggregation alone: parameters and input by central differences, and the
 * forward against sum_e w_e x_j W + b; order 1 = aggregate first, 2 = transform first. */
static void weighted_layer_case(int order)
{
    tg_rng_t r;
    tg_rng_seed(&r, 31);
    tg_model_config_t cfg = gcn_cfg(1);
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, &cfg, 5));
    if (!m) return;
    m->layers[0].order = order;
    tg_block_t blk;
    nt_block_make(&blk, 20, 50, 6, &r);
    blk.weights = nt_alloc((blk.num_edges + 1) * sizeof(float));
    nt_fill(blk.weights, blk.num_edges, 0.05f, 1.0f, &r);
    wlayer_ctx_t c = {.ly = &m->layers[0], .blk = &blk};
    size_t in = c.ly->in, out = c.ly->out;
    c.x = nt_alloc(blk.num_src * in * 4);
    c.out = nt_alloc(blk.num_dst * out * 4);
    c.r = nt_alloc(blk.num_dst * out * 4);
    float *dx = nt_alloc(blk.num_src * in * 4);
    nt_fill(c.x, blk.num_src * in, -1, 1, &r);
    nt_fill(c.r, blk.num_dst * out, -1, 1, &r);
    nt_fill(m->params, m->nparams, -0.5f, 0.5f, &r);
    tg_arena_t a = {0};
    tg_layer_plan(c.ly, &c.acts, &blk, 1, 1, &a);
    a.base = nt_alloc(a.off);
    a.off = 0;
    tg_layer_plan(c.ly, &c.acts, &blk, 1, 1, &a);
    TG_CHECK(c.acts.tfirst == (order == 2));
    wlayer_obj(&c);
    /* the reference: h_i = sum_e w_e x_j W + b, in double */
    for (uint32_t i = 0; i < blk.num_dst; i++)
        for (size_t o = 0; o < out; o++) {
            double h = c.ly->b[o];
            for (uint64_t e = blk.indptr[i]; e < blk.indptr[i + 1]; e++)
                for (size_t k = 0; k < in; k++)
                    h += (double)blk.weights[e] * c.x[blk.indices[e] * in + k] *
                         c.ly->W[k * out + o];
            TG_CHECK_NEAR(c.out[i * out + o], h, 1e-4);
        }
    memset(m->grads, 0, m->nparams * 4);
    tg_layer_backward(c.ly, &c.acts, &blk, c.x, c.r, dx, NULL);
    float *g = nt_alloc(m->nparams * 4);
    memcpy(g, m->grads, m->nparams * 4);
    char what[64];
    snprintf(what, sizeof what, "weighted gcn order %d params", order);
    TG_CHECK(nt_gradcheck(what, wlayer_obj, &c, m->params, g, m->nparams, 1e-2f, 1e-2, 1e-3, 400,
                          &r) == 0);
    snprintf(what, sizeof what, "weighted gcn order %d input", order);
    TG_CHECK(nt_gradcheck(what, wlayer_obj, &c, c.x, dx, blk.num_src * in, 1e-2f, 1e-2, 1e-3, 400,
                          &r) == 0);
    free(g);
    free(a.base);
    free(c.x);
    free(c.out);
    free(c.r);
    free(dx);
    free(blk.weights);
    nt_block_free(&blk);
    tg_model_destroy(m);
}

typedef struct {
    tg_model_t *m;
    tg_batch_t *b;
    float *X;
    int32_t *y;
} wmodel_ctx_t;

static double wmodel_obj(void *vc)
{
    wmodel_ctx_t *c = vc;
    tg_step_stats_t st;
    if (tg_model_forward_backward(c->m, c->b, c->X, c->y, 1, 99, NULL, &st) < 0)
        TG_FAIL("forward: %s", tg_errmsg());
    return st.loss;
}

TG_TEST(weighted_gradients)
{
    weighted_layer_case(1);
    weighted_layer_case(2);
    /* a whole 2-layer GCN on a real LADIES batch: loss gradients of parameters and features */
    tg_adj_t *adj = random_graph(200, 8, 11);
    int64_t sizes[2] = {20, 12};
    tg_sampler_t *s = NULL;
    TG_CHECK_OK(tg_sampler_open(&s, &tg_sampler_ladies, adj, 2, sizes));
    uint64_t seeds[6] = {3, 17, 40, 88, 120, 199};
    tg_rng_t r;
    tg_sampler_batch_rng(&r, 2, 0, 0);
    tg_batch_t b;
    TG_CHECK_OK(tg_sampler_sample(s, seeds, 6, &r, &b));
    tg_model_config_t cfg = gcn_cfg(2);
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, &cfg, 21));
    tg_rng_seed(&r, 4);
    nt_fill(m->params, m->nparams, -0.6f, 0.6f, &r);
    size_t nx = (size_t)b.num_nodes * cfg.in_dim;
    wmodel_ctx_t c = {m, &b, nt_alloc(nx * 4), nt_alloc(6 * 4)};
    nt_fill(c.X, nx, -1, 1, &r);
    for (int i = 0; i < 6; i++)
        c.y[i] = (int32_t)tg_rng_below(&r, cfg.out_dim);
    float *dX = nt_alloc(nx * 4), *g = nt_alloc(m->nparams * 4);
    tg_step_stats_t st;
    TG_CHECK_OK(tg_model_forward_backward(m, &b, c.X, c.y, 1, 99, dX, &st));
    memcpy(g, m->grads, m->nparams * 4);
    TG_CHECK(nt_gradcheck("ladies gcn params", wmodel_obj, &c, m->params, g, m->nparams, 5e-3f,
                          2e-2, 2e-5, 300, &r) == 0);
    TG_CHECK(nt_gradcheck("ladies gcn input", wmodel_obj, &c, c.X, dX, nx, 5e-3f, 2e-2, 2e-5, 300,
                          &r) == 0);
    /* the operation count takes the block's own self loops (no +nd) */
    tg_flops_t f;
    TG_CHECK_OK(tg_model_batch_flops(&cfg, &b, &f));
    TG_CHECK(f.fwd_graph > 0);
    /* other models refuse weighted blocks, naming the block */
    tg_model_config_t sc = cfg;
    sc.type = TG_MODEL_SAGE;
    tg_model_t *sm;
    TG_CHECK_OK(tg_model_create(&sm, &sc, 1));
    TG_CHECK_ERR(tg_model_forward_backward(sm, &b, c.X, c.y, 1, 1, NULL, &st),
                 "block 0 carries edge weights");
    tg_model_destroy(sm);
    free(dX);
    free(g);
    free(c.X);
    free(c.y);
    tg_batch_free(&b);
    tg_model_destroy(m);
    tg_sampler_destroy(s);
    tg_adj_destroy(adj);
}

/* ---------------------------------------------------------------- training through the CLI */

static char ds[4200], root[4000];

#define LADIES                                                                                     \
    "--model gcn --layers 2 --hidden 16 --sampler ladies --layer-sizes 60,40 --batch-size 64 "     \
    "--seed 3 --threads 1 --io-depth 8 --io-gap 0"

static void expect_fail(const char *needle, const char *fmt, ...) TG_PRINTF(2, 3);
static void expect_fail(const char *needle, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *out = NULL;
    int rc = tg_test_cli(&out, "%s", args);
    if (rc == 0)
        TG_FAIL("'%s' succeeded, expected a failure containing '%s'", args, needle);
    else if (!out || !strstr(out, needle))
        TG_FAIL("'%s': output lacks '%s':\n%s", args, needle, out ? out : "");
    free(out);
}

TG_TEST(train_every_strategy)
{
    char *ref = NULL;
    char a[4400], b[4400];
    int rc = tg_test_cli(
        &ref, "train %s --out %s/memory --strategy memory " LADIES " --epochs 2 --json", ds, root);
    TG_CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "%s\n", ref ? ref : "");
        free(ref);
        return;
    }
    TG_CHECK(strstr(ref, "\"sampler\":\"ladies\"") != NULL);
    TG_CHECK(json_value(ref, "valid_acc", 1) > 0.4); /* 4 classes: it learns */
    double test_acc = json_value(ref, "test_acc", 2);
    free(ref);
    /* every strategy that promises memory's batches gives its checkpoints byte for byte: LADIES
     * through the disk adjacency (gnndrive, pagraph), the page cache (mmap) and spill files
     * (ginex, diskgnn) samples the same batches with the same weights */
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        if (!(si->caps & TG_STRAT_EXACT) || !strcmp(si->name, "memory")) continue;
        char *out = NULL;
        rc = tg_test_cli(&out, "train %s --out %s/%s --strategy %s %s " LADIES " --epochs 2 --json",
                         ds, root, si->name, si->name, si->example_args ? si->example_args : "");
        TG_CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s:\n%s\n", si->name, out ? out : "");
        snprintf(a, sizeof a, "%s/memory/%s", root, TG_CKPT_NAME);
        snprintf(b, sizeof b, "%s/%s/%s", root, si->name, TG_CKPT_NAME);
        if (!rc && !tg_test_same_file(a, b))
            TG_FAIL("checkpoint.bin of %s differs from memory's", si->name);
        free(out);
    }
    /* eval recomputes the run's test accuracy (layer-wise with P); --sampler must match */
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "eval %s --checkpoint %s/memory --json", ds, root) == 0);
    TG_CHECK_NEAR(json_value(out, "acc", 0), test_acc, 1e-5);
    free(out);
    TG_CHECK(tg_test_cli(&out,
                         "eval %s --checkpoint %s/memory --json --sampler ladies "
                         "--layer-sizes 60,40",
                         ds, root) == 0);
    free(out);
    expect_fail("trained with --sampler ladies", "eval %s --checkpoint %s/memory --sampler node",
                ds, root);
    expect_fail("differs from the 2 layer size(s)",
                "eval %s --checkpoint %s/memory --layer-sizes 60,41", ds, root);
    /* resume: the sampler and the layer sizes belong to the run */
    expect_fail("--sampler ladies there vs node here",
                "train %s --out %s/memory --resume --model gcn --layers 2 --hidden 16 "
                "--fanouts 60,40 --batch-size 64 --seed 3 --epochs 3",
                ds, root);
    expect_fail("layer size of layer 1 40 there vs 41 here",
                "train %s --out %s/memory --resume --model gcn --layers 2 --hidden 16 --sampler "
                "ladies --layer-sizes 60,41 --batch-size 64 --seed 3 --epochs 3",
                ds, root);
    /* a node-wise run refuses to resume as ladies */
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/nodewise --model gcn --layers 2 --hidden 16 "
                         "--fanouts 5,5 --batch-size 64 --epochs 1",
                         ds, root) == 0);
    free(out);
    expect_fail("--sampler node there vs ladies here",
                "train %s --out %s/nodewise --resume " LADIES " --epochs 2", ds, root);
    /* resumed with the same settings, it continues */
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/memory --resume " LADIES " --epochs 3 --json", ds,
                         root) == 0);
    free(out);
    /* the budget sizes input matrices by LADIES' bound: (64 + 60 + 40) nodes x 16 floats */
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/budget --strategy gnndrive --mem 64M " LADIES
                         " --epochs 1",
                         ds, root) == 0);
    TG_CHECK(out && strstr(out, "batch matrices of 10.25 KiB") != NULL);
    free(out);
    /* hier samples LADIES batches inside its mega-batches (from their subgraphs) */
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/hier --strategy hier --parts 8 --method stream " LADIES
                         " --epochs 1 --json",
                         ds, root) == 0);
    TG_CHECK(out && strstr(out, "\"megabatch\":") != NULL);
    free(out);
    /* sampled evaluation with the layer sizes, reproduced by eval */
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/evs " LADIES " --epochs 1 --eval-fanouts train --json",
                         ds, root) == 0);
    double t = json_value(out, "test_acc", 1);
    free(out);
    TG_CHECK(tg_test_cli(&out, "eval %s --checkpoint %s/evs --json", ds, root) == 0);
    TG_CHECK_NEAR(json_value(out, "acc", 0), t, 1e-5);
    free(out);
}

TG_TEST(flag_errors)
{
    expect_fail("unknown sampler 'fastgcn', expected one of: node, ladies",
                "train %s --out %s/e --sampler fastgcn", ds, root);
    expect_fail("--layer-sizes is for --sampler ladies",
                "train %s --out %s/e --model gcn --sampler node --layer-sizes 10,10", ds, root);
    expect_fail("--fanouts is node-wise sampling's",
                "train %s --out %s/e --model gcn --sampler ladies --fanouts 10,10", ds, root);
    expect_fail("--layer-sizes has 3 value(s) but --layers is 2",
                "train %s --out %s/e --model gcn --sampler ladies --layer-sizes 5,5,5 --layers 2",
                ds, root);
    expect_fail("--layer-sizes: item 2 is 0, expected >= 1",
                "train %s --out %s/e --model gcn --sampler ladies --layer-sizes 5,0", ds, root);
    expect_fail("--layer-sizes: item 1 is -1, expected >= 1",
                "train %s --out %s/e --model gcn --sampler ladies --layer-sizes -1,5", ds, root);
    expect_fail("--layer-sizes item 1",
                "train %s --out %s/e --model gcn --sampler ladies "
                "--layer-sizes x,5",
                ds, root);
    expect_fail("--sampler ladies needs --model gcn",
                "train %s --out %s/e --model sage --sampler ladies", ds, root);
    expect_fail("--sampler ladies needs --model gcn",
                "train %s --out %s/e --model mlp --sampler ladies", ds, root);
    expect_fail("unknown sampler", "bench %s --mem 64M --sampler x --out %s/bench", ds, root);
    expect_fail("--fanouts is node-wise sampling's",
                "bench %s --mem 64M --sampler ladies --fanouts 3,3 --out %s/bench", ds, root);
    /* the library refuses what the CLI would: a layer size below 1 */
    tg_train_opts_t o;
    tg_train_opts_default(&o);
    char out_dir[4200];
    snprintf(out_dir, sizeof out_dir, "%s/api", root);
    o.dataset = ds;
    o.out_dir = out_dir;
    o.model.type = TG_MODEL_GCN;
    o.sampler = &tg_sampler_ladies;
    o.fanouts[1] = -1;
    tg_train_result_t res;
    TG_CHECK_ERR(tg_train(&o, &res), "layer size -1 for layer 1, expected >= 1");
}

int main(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("ladies"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(ds, &so);
    TG_RUN(invariants_and_determinism);
    TG_RUN(weights_brute_force);
    TG_RUN(inclusion_probabilities);
    TG_RUN(spill_keeps_weights);
    TG_RUN(weighted_gradients);
    TG_RUN(train_every_strategy);
    TG_RUN(flag_errors);
    return tg_test_done();
}
