/* Engine internals: feature stores, checkpoints, layer-wise forward vs the batch path. */
#include "test_engine_common.h"

#include "engine/engine-impl.h"
#include "tiergnn/engine.h"
#include "tiergnn/store.h"

static const char *make_dataset(const char *name, tg_feat_dtype_t dtype, int self_loops,
                                uint64_t seed)
{
    static char path[8][4096];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 4096, "%s/ds", tg_test_tmpdir(name));
    synth_opts_t so;
    synth_default(&so);
    so.dtype = dtype;
    so.self_loops = self_loops;
    so.seed = seed;
    synth_write(p, &so);
    return p;
}

TG_TEST(stores_agree)
{
    for (int f16 = 0; f16 <= 1; f16++)
        for (int norm = 0; norm <= 1; norm++) {
            const char *dir = make_dataset("stores", f16 ? TG_F16 : TG_F32, 0, 3);
            tg_dataset_t *ds;
            TG_CHECK_OK(tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES));
            tg_budget_t b;
            tg_budget_init(&b, 0);
            tg_store_opts_t so = {.normalize = norm, .budget = &b};
            tg_store_t *mem, *file;
            TG_CHECK_OK(tg_store_memory_open(&mem, ds, &so));
            TG_CHECK_OK(tg_store_file_open(&file, ds, &so));
            TG_CHECK_EQ_U64(b.used, ds->meta.num_nodes * ds->meta.feat_dim * 4);
            uint64_t ids[5] = {599, 0, 17, 18, 300};
            size_t D = mem->dim;
            float *a = malloc(5 * D * sizeof *a), *c = malloc(5 * D * sizeof *c);
            TG_CHECK_OK(tg_store_gather(mem, ids, 5, a));
            TG_CHECK_OK(tg_store_gather(file, ids, 5, c));
            TG_CHECK(memcmp(a, c, 5 * D * sizeof *a) == 0);
            /* the rows are those of the file, normalised when asked */
            float *raw = malloc(D * sizeof *raw);
            TG_CHECK_OK(tg_dataset_read_features(ds, 17, 1, raw));
            double l1 = 0;
            for (size_t k = 0; k < D; k++)
                l1 += fabs(raw[k]);
            for (size_t k = 0; k < D; k++)
                TG_CHECK_NEAR(a[2 * D + k], norm ? raw[k] / l1 : raw[k], 1e-6);
            if (norm) {
                double s = 0;
                for (size_t k = 0; k < D; k++)
                    s += fabs(a[k]);
                TG_CHECK_NEAR(s, 1.0, 1e-5);
            }
            uint64_t bad = 600;
            TG_CHECK_ERR(tg_store_gather(mem, &bad, 1, a), "node 600 out of range");
            TG_CHECK_ERR(tg_store_gather(file, &bad, 1, a), "node 600 out of range");
            tg_store_release(mem);
            tg_store_release(file);
            TG_CHECK_EQ_U64(b.used, 0);
            /* a budget too small for the features is refused, naming what */
            tg_budget_t small;
            tg_budget_init(&small, 1000);
            so.budget = &small;
            TG_CHECK_ERR(tg_store_memory_open(&mem, ds, &so), "feature store");
            tg_budget_destroy(&small);
            tg_budget_destroy(&b);
            free(a);
            free(c);
            free(raw);
            tg_dataset_close(ds);
        }
}

/* Logits of every node through the batch path: one batch whose seeds are all nodes, full
 * neighbours (every node a destination of every block: the whole-graph computation). */
static float *whole_graph_logits(tg_run_t *r, tg_model_t *m)
{
    const tg_model_config_t *cfg = tg_model_config(m);
    uint64_t N = r->adj->num_nodes;
    int64_t fan[TG_MAX_LAYERS];
    for (int l = 0; l < cfg->num_layers; l++)
        fan[l] = TG_FANOUT_ALL;
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, r->adj, cfg->num_layers, fan));
    uint64_t *seeds = malloc(N * sizeof *seeds);
    for (uint64_t i = 0; i < N; i++)
        seeds[i] = i;
    tg_rng_t rng;
    tg_rng_seed(&rng, 1);
    tg_batch_t b;
    TG_CHECK_OK(tg_sampler_sample(s, seeds, N, &rng, &b));
    float *X = malloc((size_t)b.num_nodes * r->store->dim * sizeof *X);
    TG_CHECK_OK(tg_store_gather(r->store, b.nodes, b.num_nodes, X));
    float *logits = malloc(N * cfg->out_dim * sizeof *logits);
    TG_CHECK_OK(tg_model_predict(m, &b, X, logits, NULL));
    tg_batch_free(&b);
    tg_sampler_destroy(s);
    free(seeds);
    free(X);
    return logits;
}

typedef struct {
    float *logits, *emb;
    uint32_t C, E;
    uint64_t n;
} collect_t;

static int collect(void *ctx, uint64_t pos, const uint64_t *ids, size_t n, const float *logits,
                   const float *emb)
{
    (void)pos;
    collect_t *c = ctx;
    for (size_t i = 0; i < n; i++) {
        memcpy(c->logits + ids[i] * c->C, logits + i * c->C, c->C * sizeof(float));
        if (emb) memcpy(c->emb + ids[i] * c->E, emb + i * c->E, c->E * sizeof(float));
    }
    c->n += n;
    return 0;
}

TG_TEST(layerwise_equals_whole_graph)
{
    static const tg_model_type_t types[] = {TG_MODEL_GCN, TG_MODEL_SAGE, TG_MODEL_GAT, TG_MODEL_GIN,
                                            TG_MODEL_MLP};
    double worst = 0;
    size_t flips = 0;
    for (int loops = 0; loops <= 1; loops++) {
        const char *dir = make_dataset("layerwise", TG_F32, loops, 5);
        tg_run_t r;
        TG_CHECK_OK(tg_run_open(&r, dir, TG_RUN_STORE_MEMORY, 1, 0, 2));
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            tg_model_config_t cfg;
            tg_model_config_default(&cfg);
            cfg.type = types[t];
            cfg.in_dim = r.store->dim;
            cfg.out_dim = 4;
            cfg.hidden = 8;
            cfg.heads = types[t] == TG_MODEL_GAT ? 2 : 1;
            cfg.num_layers = 3;
            tg_model_t *m;
            TG_CHECK_OK(tg_model_create(&m, &cfg, 7));
            tg_model_set_pool(m, r.pool);
            float *ref = whole_graph_logits(&r, m);
            uint64_t N = r.adj->num_nodes;
            uint32_t E = tg_model_embed_dim(m);
            for (int ci = 0; ci < 3; ci++) {
                static const uint64_t chunks[] = {7, 128, 100000};
                collect_t c = {malloc(N * 4 * sizeof(float)), malloc(N * E * sizeof(float)), 4, E,
                               0};
                tg_lw_opts_t lo = {.chunk = chunks[ci],
                                   .tmp_dir = ci == 0 ? tg_test_tmpdir("lwtmp") : NULL,
                                   .want_emb = 1,
                                   .sink = collect,
                                   .ctx = &c};
                TG_CHECK_OK(tg_lw_forward(&r, m, &lo));
                TG_CHECK_EQ_U64(c.n, N);
                /* other row blocks than the whole-graph batch's GEMMs: equal within the
                 * tolerance, and so are the predictions but for near ties */
                char what[128];
                snprintf(what, sizeof what, "%s, self loops %d, chunk %llu: logits",
                         tg_model_type_name(types[t]), loops, (unsigned long long)chunks[ci]);
                worst =
                    TG_MAX(worst, tg_test_check_close(ref, c.logits, N * 4, TG_TEST_RTOL, what));
                flips += tg_test_check_argmax(ref, c.logits, N, 4, TG_TEST_RTOL, what);
                free(c.logits);
                free(c.emb);
            }
            free(ref);
            tg_model_destroy(m);
        }
        tg_run_close(&r);
    }
    fprintf(stderr,
            "  layer-wise vs whole graph (%s): worst |a-b|/(1+|a|) %.3g, %zu predictions flipped\n",
            tg_test_blas_core(), worst, flips);
}

/* Logits of every node by the layer-wise forward in chunks of `chunk` (0: the default). */
static float *lw_logits(tg_run_t *r, tg_model_t *m, uint64_t chunk)
{
    uint64_t N = r->adj->num_nodes;
    uint32_t C = tg_model_config(m)->out_dim;
    collect_t c = {malloc(N * C * sizeof(float)), NULL, C, 0, 0};
    tg_lw_opts_t lo = {.chunk = chunk, .sink = collect, .ctx = &c};
    TG_CHECK_OK(tg_lw_forward(r, m, &lo));
    TG_CHECK_EQ_U64(c.n, N);
    return c.logits;
}

TG_TEST(evaluate_modes)
{
    const char *dir = make_dataset("evaluate", TG_F32, 0, 6);
    tg_run_t r;
    TG_CHECK_OK(tg_run_open(&r, dir, TG_RUN_STORE_MEMORY, 0, 0, 1));
    tg_model_config_t cfg;
    tg_model_config_default(&cfg);
    cfg.in_dim = r.store->dim;
    cfg.out_dim = 4;
    cfg.hidden = 16;
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, &cfg, 3));
    int want[3] = {1, 1, 1};
    int64_t fan[2] = {3, 2};
    tg_split_eval_t a[3], b[3], full[3], full2[3];
    TG_CHECK_OK(tg_run_evaluate(&r, m, want, 1, fan, 50, 9, 0, a));
    TG_CHECK_OK(tg_run_evaluate(&r, m, want, 1, fan, 50, 9, 0, b));
    TG_CHECK_OK(tg_run_evaluate(&r, m, want, 0, fan, 50, 9, 0, full));
    TG_CHECK_OK(tg_run_evaluate(&r, m, want, 0, fan, 50, 9, 33, full2));
    /* Chunks of 33 nodes run other GEMM row blocks than one chunk of all: a prediction may flip
     * only where two logits lie within the tolerance, and each flip moves a split's correct
     * count by at most one. */
    float *one = lw_logits(&r, m, 0), *c33 = lw_logits(&r, m, 33);
    uint64_t N = r.adj->num_nodes;
    tg_test_check_close(one, c33, N * 4, TG_TEST_RTOL, "logits, chunks of 33 vs one chunk");
    size_t flips = tg_test_check_argmax(one, c33, N, 4, TG_TEST_RTOL, "chunks of 33 vs one");
    free(one);
    free(c33);
    for (int s = 0; s < 3; s++) {
        TG_CHECK_EQ_U64(a[s].count, r.split_n[s]);
        TG_CHECK(a[s].acc == b[s].acc && a[s].loss == b[s].loss); /* fixed eval stream */
        TG_CHECK_EQ_U64(full[s].count, r.split_n[s]);
        TG_CHECK(fabs(full[s].acc - full2[s].acc) * (double)full[s].count <= (double)flips + 0.5);
        TG_CHECK_NEAR(full[s].loss, full2[s].loss, TG_TEST_RTOL * (1 + full[s].loss));
    }
    tg_model_destroy(m);
    tg_run_close(&r);
}

TG_TEST(checkpoint_records)
{
    const char *d1 = make_dataset("ckpt1", TG_F32, 0, 1);
    const char *d2 = make_dataset("ckpt2", TG_F32, 0, 2); /* same sizes, other content */
    tg_dataset_t *a, *b;
    TG_CHECK_OK(tg_dataset_open(&a, d1, 0));
    TG_CHECK_OK(tg_dataset_open(&b, d2, 0));
    tg_ckpt_info_t in;
    memset(&in, 0, sizeof in);
    tg_ckpt_identity(&in, a);
    in.seed = 5;
    in.batch_size = 64;
    in.num_layers = 2;
    in.fanouts[0] = -1;
    in.fanouts[1] = 7;
    in.normalize_features = 1;
    in.epochs_done = 3;
    in.best_epoch = 2;
    in.best_valid_acc = 0.75;
    in.best_valid_loss = 0.5;
    in.test_at_best = 0.7;
    in.last_train_loss = 0.25;
    tg_model_config_t cfg;
    tg_model_config_default(&cfg);
    cfg.in_dim = 16;
    cfg.out_dim = 4;
    cfg.hidden = 8;
    tg_model_t *m, *m2;
    TG_CHECK_OK(tg_model_create(&m, &cfg, 1));
    char path[4200];
    snprintf(path, sizeof path, "%s/ck.bin", tg_test_tmpdir("ckpt"));
    TG_CHECK_OK(tg_ckpt_write(path, &in, m));
    tg_ckpt_info_t out;
    TG_CHECK_OK(tg_ckpt_load_model(path, &out, &m2));
    TG_CHECK(out.seed == 5 && out.batch_size == 64 && out.num_layers == 2);
    TG_CHECK(out.fanouts[0] == -1 && out.fanouts[1] == 7 && out.normalize_features == 1);
    TG_CHECK(out.epochs_done == 3 && out.best_epoch == 2 && out.best_valid_acc == 0.75);
    TG_CHECK(out.best_valid_loss == 0.5 && out.test_at_best == 0.7 && out.last_train_loss == 0.25);
    TG_CHECK(memcmp(tg_model_params(m), tg_model_params(m2),
                    tg_model_param_count(m) * sizeof(float)) == 0);
    TG_CHECK_OK(tg_ckpt_check_dataset(&out, a, path));
    TG_CHECK_ERR(tg_ckpt_check_dataset(&out, b, path), "another dataset");
    TG_CHECK_ERR(tg_ckpt_check_dataset(&out, b, path), "features.bin CRC");

    /* damaged files are refused before the model is read */
    char *buf;
    size_t len;
    TG_CHECK_OK(tg_read_file(path, &buf, &len));
    buf[40] ^= 1;
    tg_test_write_file(path, "");
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    TG_CHECK_ERR(tg_ckpt_read_info(path, &out), "CRC mismatch");
    f = fopen(path, "wb");
    fwrite(buf, 1, 30, f);
    fclose(f);
    TG_CHECK_ERR(tg_ckpt_read_info(path, &out), "truncated");
    tg_test_write_file(path, "hello, not a checkpoint");
    TG_CHECK_ERR(tg_ckpt_read_info(path, &out), "not a tiergnn checkpoint");
    free(buf);

    /* a version 3 record's sampler name whose bytes are not a name (they reached the message of
     * tg_sampler_find, newlines and all): refused as damaged, CRC or not */
    snprintf(in.sampler, sizeof in.sampler, "ladies");
    TG_CHECK_OK(tg_ckpt_write(path, &in, m));
    TG_CHECK_OK(tg_read_file(path, &buf, &len));
    uint32_t rec;
    memcpy(&rec, buf + 12, 4);
    memcpy(buf + rec - 4 - 16, "lad\nies", 8);
    uint32_t crc = tg_crc32(0, buf, rec - 4);
    memcpy(buf + rec - 4, &crc, 4);
    TG_CHECK_OK(tg_write_file_atomic(path, buf, len));
    TG_CHECK_ERR(tg_ckpt_read_info(path, &out), "checkpoint names a sampler that is not a name");
    free(buf);
    tg_model_destroy(m);
    tg_model_destroy(m2);
    tg_dataset_close(b);

    /* eval of a best.bin whose engine record is the dataset's but whose model takes another
     * feature width or label kind: refused (its layers read rows of the wrong width: a heap
     * overflow under ASan) */
    char rundir[4000];
    snprintf(rundir, sizeof rundir, "%s", tg_test_tmpdir("ckpt_shape"));
    snprintf(path, sizeof path, "%s/%s", rundir, TG_CKPT_BEST_NAME);
    memset(&in, 0, sizeof in);
    tg_ckpt_identity(&in, a);
    in.num_layers = 2;
    in.fanouts[0] = in.fanouts[1] = 5;
    in.batch_size = 64;
    in.epochs_done = in.best_epoch = 1;
    for (int k = 0; k < 2; k++) {
        tg_model_config_default(&cfg);
        cfg.hidden = 8;
        cfg.in_dim = a->meta.feat_dim + (k == 0);
        cfg.out_dim = a->meta.num_classes;
        cfg.multi_label = k == 1;
        TG_CHECK_OK(tg_model_create(&m, &cfg, 1));
        TG_CHECK_OK(tg_ckpt_write(path, &in, m));
        tg_model_destroy(m);
        tg_eval_opts_t eo = {.threads = 1, .strategy = "memory"};
        tg_eval_result_t er;
        TG_CHECK_ERR(tg_eval(d1, rundir, TG_FILE_TEST, &eo, &er), "(damaged checkpoint?)");
    }
    tg_dataset_close(a);
}

/* A pass's shared figures: tiers appended up to TG_PASS_MAX_TIERS, passes summed (counts add,
 * tiers by name, the peak of batch bytes), the cache_tiers and neighbor_cache JSON values; a
 * strategy without a report hook reports the shared struct's fields (none here: nothing). */
TG_TEST(pass_figures)
{
    tg_pass_stats_t a, sum;
    memset(&a, 0, sizeof a);
    memset(&sum, 0, sizeof sum);
    TG_CHECK_OK(tg_pass_tier_add(&a, "ram", 10, 4, 400));
    TG_CHECK_OK(tg_pass_tier_add(&a, "file", 6, 6, 600));
    a.steps = 3;
    a.batch_bytes_peak = 100;
    a.have_ncache = 1;
    a.ncache_lookups = 8;
    a.ncache_hits = 2;
    a.ncache_bytes = 4096;
    tg_pass_stats_t b = a;
    b.batch_bytes_peak = 50;
    b.ntiers = 0;
    TG_CHECK_OK(tg_pass_tier_add(&b, "file", 1, 1, 100));
    TG_CHECK_OK(tg_pass_tier_add(&b, "featbuf", 5, 2, 200));
    tg_run_t r;
    memset(&r, 0, sizeof r);
    TG_CHECK_OK(tg_strategy_find("memory", &r.strat_i));
    tg_pass_stats_add(&r, &sum, &a);
    tg_pass_stats_add(&r, &sum, &b);
    TG_CHECK_EQ_U64(sum.steps, 6);
    TG_CHECK_EQ_U64(sum.batch_bytes_peak, 100);
    TG_CHECK(sum.ntiers == 3 && !strcmp(sum.tiers[2].name, "featbuf"));
    TG_CHECK_EQ_U64(sum.tiers[1].lookups, 7);
    TG_CHECK_EQ_U64(sum.tiers[1].bytes, 700);
    TG_CHECK_EQ_U64(sum.ncache_lookups, 16);
    TG_CHECK_EQ_U64(sum.ncache_bytes, 4096);
    char buf[1024];
    TG_CHECK(!strcmp(tg_pass_tiers_json(&a, buf, sizeof buf),
                     "[{\"name\":\"ram\",\"lookups\":10,\"hits\":4,\"bytes\":400},"
                     "{\"name\":\"file\",\"lookups\":6,\"hits\":6,\"bytes\":600}]"));
    TG_CHECK(!strcmp(tg_pass_ncache_json(&a, buf, sizeof buf),
                     "{\"bytes\":4096,\"lookups\":8,\"hits\":2,\"hit_ratio\":0.250000}"));
    char line[256] = "";
    tg_pass_line(&r, &a, 0, line, sizeof line);
    TG_CHECK(!strcmp(line, "; neighbour cache hit ratio 0.250"));
    for (int t = a.ntiers; t < TG_PASS_MAX_TIERS; t++)
        TG_CHECK_OK(tg_pass_tier_add(&a, "more", 1, 1, 1));
    TG_CHECK(tg_pass_tier_add(&a, "one too many", 1, 1, 1) == -ENOSPC);
    TG_CHECK(a.ntiers == TG_PASS_MAX_TIERS);
}

int main(void)
{
    TG_RUN(stores_agree);
    TG_RUN(layerwise_equals_whole_graph);
    TG_RUN(evaluate_modes);
    TG_RUN(checkpoint_records);
    TG_RUN(pass_figures);
    return tg_test_done();
}
