/* Checkpoints: the engine record (dataset identity, run settings, progress) + nn's model record.
 *
 * The engine record is a fixed sequence of little-endian fields (the byte order of every machine
 * tiergnn runs on), closed by a CRC-32, so a truncated or foreign file is refused before the
 * model is read. Version 2 appends the progress inside an epoch (batches done and their loss
 * sums) so that a run stopped mid-epoch resumes exactly there; version 1 records are still read
 * (they always end on an epoch boundary). Version 3 appends the sampler's name (16 bytes, NUL
 * padded); it is written only for runs whose sampler is not node-wise, so a node-wise run's
 * checkpoint stays byte for byte the version 2 record older builds write and read. */
#include "engine-impl.h"

#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC "TGNNRUN1"
#define CKPT_VERSION 3u
#define CKPT_SAMPLER_BYTES 16

typedef struct {
    unsigned char buf[512];
    size_t len;
} rec_t;

static void put(rec_t *r, const void *p, size_t n)
{
    memcpy(r->buf + r->len, p, n);
    r->len += n;
}
static void put_u32(rec_t *r, uint32_t v)
{
    put(r, &v, 4);
}
static void put_u64(rec_t *r, uint64_t v)
{
    put(r, &v, 8);
}
static void put_f64(rec_t *r, double v)
{
    put(r, &v, 8);
}

typedef struct {
    const unsigned char *p;
    size_t len, off;
} rd_t;

static void get(rd_t *r, void *p, size_t n)
{
    memcpy(p, r->p + r->off, n);
    r->off += n;
}
static uint32_t get_u32(rd_t *r)
{
    uint32_t v;
    get(r, &v, 4);
    return v;
}
static uint64_t get_u64(rd_t *r)
{
    uint64_t v;
    get(r, &v, 8);
    return v;
}
static double get_f64(rd_t *r)
{
    double v;
    get(r, &v, 8);
    return v;
}

/* Byte length of the record: magic, version, length, body, CRC. */
#define CKPT_BODY_BYTES_V1                                                                         \
    (8 + 8 + 4 + 4 + 4 * TG_FILE_COUNT + 8 + 8 + 4 + 8 * TG_MAX_LAYERS + 4 + 4 + 8 + 8 + 8 * 4)
#define CKPT_RECORD_BYTES_V1 (8 + 4 + 4 + CKPT_BODY_BYTES_V1 + 4)
#define CKPT_BODY_BYTES_V2 (CKPT_BODY_BYTES_V1 + 8 * 4)
#define CKPT_RECORD_BYTES_V2 (8 + 4 + 4 + CKPT_BODY_BYTES_V2 + 4)
#define CKPT_BODY_BYTES (CKPT_BODY_BYTES_V2 + CKPT_SAMPLER_BYTES)
#define CKPT_RECORD_BYTES (8 + 4 + 4 + CKPT_BODY_BYTES + 4)

static void encode(rec_t *r, const tg_ckpt_info_t *in)
{
    /* node-wise ("" or "node"): version 2, without the sampler field */
    int v3 = in->sampler[0] && strcmp(in->sampler, "node") != 0;
    r->len = 0;
    put(r, CKPT_MAGIC, 8);
    put_u32(r, v3 ? CKPT_VERSION : 2u);
    put_u32(r, v3 ? CKPT_RECORD_BYTES : CKPT_RECORD_BYTES_V2);
    put_u64(r, in->num_nodes);
    put_u64(r, in->num_edges);
    put_u32(r, in->feat_dim);
    put_u32(r, in->num_classes);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        put_u32(r, in->crc[i]);
    put_u64(r, in->seed);
    put_u64(r, in->batch_size);
    put_u32(r, (uint32_t)in->num_layers);
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        put_u64(r, (uint64_t)(l < in->num_layers ? in->fanouts[l] : 0));
    put_u32(r, (uint32_t)in->normalize_features);
    put_u32(r, (uint32_t)in->eval_sampled);
    put_u64(r, in->epochs_done);
    put_u64(r, in->best_epoch);
    put_f64(r, in->best_valid_acc);
    put_f64(r, in->best_valid_loss);
    put_f64(r, in->test_at_best);
    put_f64(r, in->last_train_loss);
    put_u64(r, in->epoch_batches);
    put_f64(r, in->epoch_loss_sum);
    put_u64(r, in->epoch_correct);
    put_u64(r, in->epoch_count);
    if (v3) {
        char name[CKPT_SAMPLER_BYTES] = {0};
        memcpy(name, in->sampler, strnlen(in->sampler, sizeof in->sampler - 1));
        put(r, name, sizeof name);
    }
    put_u32(r, tg_crc32(0, r->buf, r->len));
}

void tg_ckpt_identity(tg_ckpt_info_t *info, const tg_dataset_t *ds)
{
    const tg_meta_t *m = &ds->meta;
    info->num_nodes = m->num_nodes;
    info->num_edges = m->num_edges;
    info->feat_dim = m->feat_dim;
    info->num_classes = m->num_classes;
    for (int i = 0; i < TG_FILE_COUNT; i++)
        info->crc[i] = m->files[i].crc32;
}

int tg_ckpt_check_dataset(const tg_ckpt_info_t *info, const tg_dataset_t *ds, const char *path)
{
    tg_ckpt_info_t here;
    memset(&here, 0, sizeof here);
    tg_ckpt_identity(&here, ds);
    char diff[1024] = "";
    size_t n = 0;
#define DIFF(...) tg_err_list_add(diff, sizeof diff, &n, __VA_ARGS__)
    if (info->num_nodes != here.num_nodes)
        DIFF("%llu nodes there vs %llu here", (unsigned long long)info->num_nodes,
             (unsigned long long)here.num_nodes);
    if (info->num_edges != here.num_edges)
        DIFF("%llu edges there vs %llu here", (unsigned long long)info->num_edges,
             (unsigned long long)here.num_edges);
    if (info->feat_dim != here.feat_dim)
        DIFF("feature width %u there vs %u here", info->feat_dim, here.feat_dim);
    if (info->num_classes != here.num_classes)
        DIFF("%u classes there vs %u here", info->num_classes, here.num_classes);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        if (info->crc[i] != here.crc[i])
            DIFF("%s CRC %08x there vs %08x here", tg_file_name((tg_file_id_t)i), info->crc[i],
                 here.crc[i]);
#undef DIFF
    if (n)
        return tg_err(-EINVAL, "checkpoint %s was made on another dataset than %s: %s", path,
                      ds->dir, diff);
    return 0;
}

int tg_ckpt_read_record(FILE *f, const char *path, tg_ckpt_info_t *info)
{
    unsigned char buf[CKPT_RECORD_BYTES];
    memset(info, 0, sizeof *info);
    size_t got = fread(buf, 1, sizeof buf, f);
    if (got < 16 || memcmp(buf, CKPT_MAGIC, 8) != 0)
        return tg_err(-EINVAL, "%s: not a tiergnn checkpoint (bad magic)", path);
    rd_t r = {buf, got, 8};
    uint32_t version = get_u32(&r), len = get_u32(&r);
    if (version < 1 || version > CKPT_VERSION)
        return tg_err(-EINVAL,
                      "%s: checkpoint format version %u, this tiergnn reads versions 1 to %u", path,
                      version, CKPT_VERSION);
    uint32_t want = version == 1   ? CKPT_RECORD_BYTES_V1
                    : version == 2 ? CKPT_RECORD_BYTES_V2
                                   : CKPT_RECORD_BYTES;
    if (len != want || got < len)
        return tg_err(-EINVAL,
                      "%s: truncated or damaged checkpoint (record of %zu bytes, %u "
                      "expected)",
                      path, got, want);
    uint32_t crc;
    memcpy(&crc, buf + len - 4, 4);
    if (crc != tg_crc32(0, buf, len - 4))
        return tg_err(-EINVAL, "%s: checkpoint record CRC mismatch (damaged file)", path);
    info->version = version;
    info->num_nodes = get_u64(&r);
    info->num_edges = get_u64(&r);
    info->feat_dim = get_u32(&r);
    info->num_classes = get_u32(&r);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        info->crc[i] = get_u32(&r);
    info->seed = get_u64(&r);
    info->batch_size = get_u64(&r);
    info->num_layers = (int)get_u32(&r);
    if (info->num_layers < 1 || info->num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "%s: checkpoint names %d layers (damaged?)", path, info->num_layers);
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        info->fanouts[l] = (int64_t)get_u64(&r);
    info->normalize_features = (int)get_u32(&r);
    info->eval_sampled = (int)get_u32(&r);
    info->epochs_done = get_u64(&r);
    info->best_epoch = get_u64(&r);
    info->best_valid_acc = get_f64(&r);
    info->best_valid_loss = get_f64(&r);
    info->test_at_best = get_f64(&r);
    info->last_train_loss = get_f64(&r);
    if (version >= 2) {
        info->epoch_batches = get_u64(&r);
        info->epoch_loss_sum = get_f64(&r);
        info->epoch_correct = get_u64(&r);
        info->epoch_count = get_u64(&r);
    }
    if (version >= 3) {
        get(&r, info->sampler, CKPT_SAMPLER_BYTES);
        /* a name, as the samplers' are: the bytes of a damaged one must not reach a message */
        int bad = info->sampler[CKPT_SAMPLER_BYTES - 1] != 0;
        for (const char *c = info->sampler; *c && !bad; c++)
            bad = !((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-');
        if (bad)
            return tg_err(-EINVAL, "%s: checkpoint names a sampler that is not a name (damaged?)",
                          path);
    }
    /* f is left right after the record, where the model record starts. */
    if (fseek(f, (long)len, SEEK_SET) != 0) return tg_err(-EIO, "%s: seek failed", path);
    return 0;
}

int tg_ckpt_serialize(const tg_ckpt_info_t *info, const tg_model_t *m, char **buf, size_t *len)
{
    rec_t rec;
    encode(&rec, info);
    *buf = NULL;
    *len = 0;
    /* A memory stream lets nn's FILE-based writer fill a buffer: the run keeps the best model
     * as bytes and writes it to disk only at checkpoint time. */
    FILE *f = open_memstream(buf, len);
    if (!f) return tg_err(-ENOMEM, "checkpoint: out of memory");
    int rc = 0;
    if (fwrite(rec.buf, 1, rec.len, f) != rec.len)
        rc = tg_err(-ENOMEM, "checkpoint: out of memory");
    if (!rc) rc = tg_model_save(m, f, "checkpoint (in memory)");
    if (fclose(f) != 0 && !rc) rc = tg_err(-ENOMEM, "checkpoint: out of memory");
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
        *len = 0;
    }
    return rc;
}

int tg_ckpt_write(const char *path, const tg_ckpt_info_t *info, const tg_model_t *m)
{
    char *buf;
    size_t len;
    int rc = tg_ckpt_serialize(info, m, &buf, &len);
    if (rc < 0) return rc;
    /* path.tmp, fsync, rename, fsync of the directory */
    rc = tg_write_file_atomic(path, buf, len);
    free(buf);
    return rc;
}

int tg_ckpt_read_info(const char *path, tg_ckpt_info_t *info)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tg_err(-errno, "%s: cannot open checkpoint: %s", path, strerror(errno));
    int rc = tg_ckpt_read_record(f, path, info);
    fclose(f);
    return rc;
}

int tg_ckpt_load_model(const char *path, tg_ckpt_info_t *info, tg_model_t **model)
{
    *model = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tg_err(-errno, "%s: cannot open checkpoint: %s", path, strerror(errno));
    int rc = tg_ckpt_read_record(f, path, info);
    if (rc >= 0) rc = tg_model_load_create(model, f, path);
    fclose(f);
    return rc;
}
