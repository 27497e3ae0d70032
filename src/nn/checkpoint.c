/* Model checkpoints: header (magic, version, model and optimiser config), training state
 * (optimiser step count, dropout RNG), parameters, optimiser moments, CRC-32 of all of it.
 *
 * Layout, little-endian, no padding:
 *     "TGNNMDL1"  u32 version (1 or 2)
 *     u32 type in_dim hidden out_dim num_layers heads gat_concat_last activation multi_label
 *         gin_train_eps;  f32 dropout attn_dropout gin_eps;  version 2 only: f32 input_dropout
 *     u32 optim type; f32 lr weight_decay beta1 beta2 eps momentum
 *     u64 nparams, u64 optimiser steps, u64 rng[4], u32 has_m, u32 has_v
 *     f32 params[nparams], f32 m[nparams] if has_m, f32 v[nparams] if has_v
 *     u32 crc32 of everything above
 * Version 1 has no input_dropout (it was the dropout value). The writer uses version 1 when the
 * model's input_dropout equals its dropout, so those files stay byte for byte what builds before
 * version 2 wrote and can read; version 2 only when the two differ.
 */
#include "nn/nn-impl.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints write floats in host order; add byte swapping for big-endian hosts"
#endif

#define CK_MAGIC "TGNNMDL1"
#define CK_VERSION 2u
#define CK_HEADER_BYTES_V1 (8 + 4 + 10 * 4 + 3 * 4 + 4 + 6 * 4 + 8 + 8 + 32 + 4 + 4)
#define CK_HEADER_BYTES_MAX (CK_HEADER_BYTES_V1 + 4)
/* what a short file most likely went through, for the messages that find one */
#define CUT_SHORT "(the file was cut short: an interrupted copy or write, or a full disk?)"

/* Header bytes of a format version (1 or 2). */
static size_t header_bytes(uint32_t ver)
{
    return ver == 1 ? CK_HEADER_BYTES_V1 : CK_HEADER_BYTES_V1 + 4;
}

typedef struct {
    unsigned char *p;
    size_t off;
} cur_t;

static void put32(cur_t *c, uint32_t v)
{
    memcpy(c->p + c->off, &v, 4);
    c->off += 4;
}
static void putf(cur_t *c, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    put32(c, v);
}
static void put64(cur_t *c, uint64_t v)
{
    memcpy(c->p + c->off, &v, 8);
    c->off += 8;
}
static uint32_t get32(cur_t *c)
{
    uint32_t v;
    memcpy(&v, c->p + c->off, 4);
    c->off += 4;
    return v;
}
static float getf(cur_t *c)
{
    uint32_t v = get32(c);
    float f;
    memcpy(&f, &v, 4);
    return f;
}
static uint64_t get64(cur_t *c)
{
    uint64_t v;
    memcpy(&v, c->p + c->off, 8);
    c->off += 8;
    return v;
}

typedef struct {
    tg_model_config_t cfg;
    tg_optim_config_t ocfg;
    uint64_t nparams, steps;
    tg_rng_t rng;
    uint32_t has_m, has_v;
} ck_header_t;

/* Encodes m's header into buf (CK_HEADER_BYTES_MAX); returns its length. */
static size_t encode_header(unsigned char *buf, const tg_model_t *m)
{
    cur_t c = {buf, 0};
    const tg_model_config_t *k = &m->cfg;
    uint32_t ver = k->input_dropout == k->dropout ? 1u : CK_VERSION;
    memcpy(buf, CK_MAGIC, 8);
    c.off = 8;
    put32(&c, ver);
    put32(&c, (uint32_t)k->type);
    put32(&c, k->in_dim);
    put32(&c, k->hidden);
    put32(&c, k->out_dim);
    put32(&c, (uint32_t)k->num_layers);
    put32(&c, (uint32_t)k->heads);
    put32(&c, (uint32_t)k->gat_concat_last);
    put32(&c, (uint32_t)k->activation);
    put32(&c, (uint32_t)k->multi_label);
    put32(&c, (uint32_t)k->gin_train_eps);
    putf(&c, k->dropout);
    putf(&c, k->attn_dropout);
    putf(&c, k->gin_eps);
    if (ver >= 2) putf(&c, k->input_dropout);
    const tg_optim_config_t *o = &m->opt.cfg;
    put32(&c, (uint32_t)o->type);
    putf(&c, o->lr);
    putf(&c, o->weight_decay);
    putf(&c, o->beta1);
    putf(&c, o->beta2);
    putf(&c, o->eps);
    putf(&c, o->momentum);
    put64(&c, m->nparams);
    put64(&c, m->opt.t);
    for (int i = 0; i < 4; i++)
        put64(&c, m->rng.s[i]);
    put32(&c, m->opt.m != NULL);
    put32(&c, m->opt.v != NULL);
    return c.off;
}

/* The first 12 bytes: magic and a format version this build reads. */
static int decode_version(uint32_t *ver, const unsigned char *buf, const char *name)
{
    if (memcmp(buf, CK_MAGIC, 8))
        return tg_err(-EINVAL, "%s: not a tiergnn model checkpoint (bad magic)", name);
    memcpy(ver, buf + 8, 4);
    if (*ver < 1 || *ver > CK_VERSION)
        return tg_err(-EINVAL, "%s: checkpoint format version %u, this build reads versions 1..%u",
                      name, *ver, CK_VERSION);
    return 0;
}

/* The rest of a header of version ver (buf holds header_bytes(ver)). */
static int decode_header(ck_header_t *h, unsigned char *buf, uint32_t ver, const char *name)
{
    cur_t c = {buf, 12};
    tg_model_config_t *k = &h->cfg;
    memset(h, 0, sizeof *h);
    k->type = (tg_model_type_t)get32(&c);
    k->in_dim = get32(&c);
    k->hidden = get32(&c);
    k->out_dim = get32(&c);
    k->num_layers = (int)get32(&c);
    k->heads = (int)get32(&c);
    k->gat_concat_last = (int)get32(&c);
    k->activation = (tg_act_t)get32(&c);
    k->multi_label = (int)get32(&c);
    k->gin_train_eps = (int)get32(&c);
    k->dropout = getf(&c);
    k->attn_dropout = getf(&c);
    k->gin_eps = getf(&c);
    k->input_dropout = ver >= 2 ? getf(&c) : k->dropout;
    tg_optim_config_t *o = &h->ocfg;
    o->type = (tg_optim_type_t)get32(&c);
    o->lr = getf(&c);
    o->weight_decay = getf(&c);
    o->beta1 = getf(&c);
    o->beta2 = getf(&c);
    o->eps = getf(&c);
    o->momentum = getf(&c);
    h->nparams = get64(&c);
    h->steps = get64(&c);
    for (int i = 0; i < 4; i++)
        h->rng.s[i] = get64(&c);
    h->has_m = get32(&c);
    h->has_v = get32(&c);
    int rc = tg_model_config_check(k);
    if (rc < 0) return tg_err_prefix(rc, "%s: corrupt checkpoint header", name);
    if (k->input_dropout < 0.0f) /* written resolved: negative is no model's rate */
        return tg_err(-EINVAL, "%s: corrupt checkpoint header (input dropout %g)", name,
                      (double)k->input_dropout);
    if (h->has_m > 1 || h->has_v > 1)
        return tg_err(-EINVAL, "%s: corrupt checkpoint header (optimiser fields)", name);
    /* The optimiser's type and values, here and not only where a model is created from the
     * header: --resume loads into the run's own model, and a value no optimiser takes (a NaN
     * weight decay) passed there, to a file that eval then refused. */
    if ((rc = tg_optim_config_check(o)) < 0)
        return tg_err_prefix(rc, "%s: corrupt checkpoint header", name);
    if (h->nparams > ((uint64_t)1 << 40))
        return tg_err(-EINVAL, "%s: corrupt checkpoint header (%llu parameters)", name,
                      (unsigned long long)h->nparams);
    return 0;
}

static int write_all(FILE *f, const void *p, size_t n, uint32_t *crc, const char *name)
{
    if (n && fwrite(p, 1, n, f) != n)
        return tg_err(-EIO, "%s: writing checkpoint: %s", name, strerror(errno ? errno : EIO));
    *crc = tg_crc32(*crc, p, n);
    return 0;
}

int tg_model_save(const tg_model_t *m, FILE *f, const char *name)
{
    unsigned char hdr[CK_HEADER_BYTES_MAX];
    size_t hlen = encode_header(hdr, m);
    uint32_t crc = 0;
    size_t bytes = m->nparams * sizeof(float);
    int rc;
    if ((rc = write_all(f, hdr, hlen, &crc, name)) < 0 ||
        (rc = write_all(f, m->params, bytes, &crc, name)) < 0 ||
        (m->opt.m && (rc = write_all(f, m->opt.m, bytes, &crc, name)) < 0) ||
        (m->opt.v && (rc = write_all(f, m->opt.v, bytes, &crc, name)) < 0))
        return rc;
    uint32_t c = crc;
    if (fwrite(&c, 4, 1, f) != 1 || fflush(f) != 0)
        return tg_err(-EIO, "%s: writing checkpoint: %s", name, strerror(errno ? errno : EIO));
    return 0;
}

static int read_all(FILE *f, void *p, size_t n, uint32_t *crc, const char *name, const char *what)
{
    if (n && fread(p, 1, n, f) != n) {
        if (ferror(f))
            return tg_err(-EIO, "%s: reading checkpoint %s: %s", name, what, strerror(errno));
        return tg_err(-EIO,
                      "%s: checkpoint truncated in %s: the file ends inside its %s " CUT_SHORT,
                      name, what, what);
    }
    if (crc) *crc = tg_crc32(*crc, p, n);
    return 0;
}

/* -EIO when f is a regular file with fewer than `need` bytes left after its position (memory
 * streams and pipes are not checked: their reads find out). The message says what the file should
 * hold, from its header h, and how much of it is there. */
static int check_left(FILE *f, uint64_t need, const ck_header_t *h, const char *name)
{
    struct stat st;
    int fd = fileno(f);
    long pos = fd >= 0 ? ftell(f) : -1;
    if (pos < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) return 0;
    uint64_t left = (uint64_t)st.st_size > (uint64_t)pos ? (uint64_t)st.st_size - (uint64_t)pos : 0;
    if (left >= need) return 0;
    int states = h->has_m + h->has_v;
    char opt[128] = "";
    if (states)
        snprintf(opt, sizeof opt,
                 ", stored with the %s optimiser's %d running average%s per weight",
                 tg_optim_type_name(h->ocfg.type), states, states > 1 ? "s" : "");
    uint64_t body = need - 4; /* the weights and optimiser state, without the closing CRC */
    return tg_err(-EIO,
                  "%s: checkpoint truncated in parameters: the file has %llu bytes but should have "
                  "%llu: its header describes a %d-layer %s model with %llu weights%s (%llu "
                  "bytes), of which %llu are there " CUT_SHORT,
                  name, (unsigned long long)st.st_size, (unsigned long long)pos + need,
                  h->cfg.num_layers, tg_model_type_name(h->cfg.type),
                  (unsigned long long)h->nparams, opt, (unsigned long long)body,
                  (unsigned long long)(left < body ? left : body));
}

/* Appends "; <field> <ck> in checkpoint vs <here> here" for each structural difference. */
static int describe_diff(char *buf, size_t len, const tg_model_config_t *ck,
                         const tg_model_config_t *here)
{
    size_t o = 0;
    int n = 0;
#define DIFF(cond, ...)                                                                            \
    do {                                                                                           \
        if ((cond) && o < len) {                                                                   \
            o += (size_t)snprintf(buf + o, len - o, "%s", n++ ? "; " : "");                        \
            if (o < len) o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__);                     \
        }                                                                                          \
    } while (0)
    DIFF(ck->type != here->type, "type %s in checkpoint vs %s here", tg_model_type_name(ck->type),
         tg_model_type_name(here->type));
    DIFF(ck->in_dim != here->in_dim, "in_dim %u in checkpoint vs %u here", ck->in_dim,
         here->in_dim);
    DIFF(ck->hidden != here->hidden, "hidden %u in checkpoint vs %u here", ck->hidden,
         here->hidden);
    DIFF(ck->out_dim != here->out_dim, "out_dim (classes) %u in checkpoint vs %u here", ck->out_dim,
         here->out_dim);
    DIFF(ck->num_layers != here->num_layers, "num_layers %d in checkpoint vs %d here",
         ck->num_layers, here->num_layers);
    DIFF(ck->activation != here->activation, "activation %s in checkpoint vs %s here",
         tg_act_name(ck->activation), tg_act_name(here->activation));
    DIFF(ck->multi_label != here->multi_label, "multi_label %d in checkpoint vs %d here",
         ck->multi_label, here->multi_label);
    if (ck->type == TG_MODEL_GAT && here->type == TG_MODEL_GAT) {
        DIFF(ck->heads != here->heads, "heads %d in checkpoint vs %d here", ck->heads, here->heads);
        DIFF(ck->gat_concat_last != here->gat_concat_last,
             "gat_concat_last %d in checkpoint vs %d here", ck->gat_concat_last,
             here->gat_concat_last);
    }
    if (ck->type == TG_MODEL_GIN && here->type == TG_MODEL_GIN) {
        DIFF(ck->gin_train_eps != here->gin_train_eps, "gin_train_eps %d in checkpoint vs %d here",
             ck->gin_train_eps, here->gin_train_eps);
        DIFF(!ck->gin_train_eps && !here->gin_train_eps && ck->gin_eps != here->gin_eps,
             "fixed gin_eps %g in checkpoint vs %g here", (double)ck->gin_eps,
             (double)here->gin_eps);
    }
#undef DIFF
    return n;
}

/* Reads a checkpoint into m (existing: config must match) or into a new model (*created). */
static int load_impl(tg_model_t *m, tg_model_t **created, FILE *f, const char *name)
{
    unsigned char hdr[CK_HEADER_BYTES_MAX];
    uint32_t crc = 0, ver = 0;
    float *params = NULL, *mom = NULL, *vel = NULL;
    tg_model_t *fresh = NULL;
    ck_header_t h;
    int rc = read_all(f, hdr, 12, &crc, name, "header");
    if (rc < 0) return rc;
    if ((rc = decode_version(&ver, hdr, name)) < 0) return rc;
    if ((rc = read_all(f, hdr + 12, header_bytes(ver) - 12, &crc, name, "header")) < 0) return rc;
    if ((rc = decode_header(&h, hdr, ver, name)) < 0) return rc;
    /* What the header claims is checked before anything of that size is allocated: its
     * parameter count against the model it describes, the blocks against the bytes left. */
    uint64_t n = tg_model_config_nparams(&h.cfg);
    if (h.nparams != n)
        return tg_err(-EINVAL,
                      "%s: corrupt checkpoint header (%llu parameters, but the model it "
                      "describes has %llu)",
                      name, (unsigned long long)h.nparams, (unsigned long long)n);
    if ((rc = check_left(f, h.nparams * 4 * (1 + h.has_m + h.has_v) + 4, &h, name)) < 0) return rc;
    if (created) {
        if ((rc = tg_model_create(&fresh, &h.cfg, 0)) < 0) return tg_err_prefix(rc, "%s", name);
        if ((rc = tg_model_set_optim(fresh, &h.ocfg)) < 0) {
            tg_model_destroy(fresh);
            return tg_err_prefix(rc, "%s", name);
        }
        m = fresh;
    } else {
        char diff[768];
        if (describe_diff(diff, sizeof diff, &h.cfg, &m->cfg))
            return tg_err(-EINVAL, "%s: checkpoint is of another model: %s", name, diff);
        if (h.ocfg.type != m->opt.cfg.type)
            return tg_err(-EINVAL, "%s: optimiser %s in checkpoint vs %s here", name,
                          tg_optim_type_name(h.ocfg.type), tg_optim_type_name(m->opt.cfg.type));
    }
    if (h.nparams != m->nparams) {
        rc = tg_err(-EINVAL, "%s: checkpoint has %llu parameters, the model %zu (corrupt file?)",
                    name, (unsigned long long)h.nparams, m->nparams);
        goto out;
    }
    size_t bytes = (m->nparams ? m->nparams : 1) * sizeof(float);
    params = malloc(bytes);
    mom = h.has_m ? malloc(bytes) : NULL;
    vel = h.has_v ? malloc(bytes) : NULL;
    if (!params || (h.has_m && !mom) || (h.has_v && !vel)) {
        rc = tg_err(-ENOMEM, "%s: out of memory loading the checkpoint", name);
        goto out;
    }
    bytes = m->nparams * sizeof(float);
    if ((rc = read_all(f, params, bytes, &crc, name, "parameters")) < 0 ||
        (mom && (rc = read_all(f, mom, bytes, &crc, name, "optimiser state")) < 0) ||
        (vel && (rc = read_all(f, vel, bytes, &crc, name, "optimiser state")) < 0))
        goto out;
    uint32_t stored;
    if ((rc = read_all(f, &stored, 4, NULL, name, "checksum")) < 0) goto out;
    if (stored != crc) {
        rc = tg_err(-EINVAL,
                    "%s: checkpoint checksum mismatch (stored %08x, computed %08x): file "
                    "is damaged",
                    name, stored, crc);
        goto out;
    }
    if (h.has_v != (m->opt.v != NULL)) {
        rc = tg_err(-EINVAL, "%s: checkpoint optimiser state does not fit the optimiser", name);
        goto out;
    }
    /* All checks passed: commit. */
    memcpy(m->params, params, bytes);
    if (m->opt.m) {
        if (mom)
            memcpy(m->opt.m, mom, bytes);
        else
            memset(m->opt.m, 0, bytes); /* saved by an SGD without momentum: start from zero */
    }
    if (m->opt.v) memcpy(m->opt.v, vel, bytes);
    m->opt.t = h.steps;
    m->rng = h.rng;
    if (created) {
        *created = fresh;
        fresh = NULL;
    }
    rc = 0;
out:
    free(params);
    free(mom);
    free(vel);
    tg_model_destroy(fresh);
    return rc;
}

int tg_model_load(tg_model_t *m, FILE *f, const char *name)
{
    return load_impl(m, NULL, f, name);
}

int tg_model_load_create(tg_model_t **out, FILE *f, const char *name)
{
    *out = NULL;
    return load_impl(NULL, out, f, name);
}

int tg_model_save_path(const tg_model_t *m, const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return tg_err(-errno, "%s: cannot buffer the checkpoint: %s", path, strerror(errno));
    int rc = tg_model_save(m, f, path);
    if (fclose(f) != 0 && rc == 0) rc = tg_err(-EIO, "%s: cannot buffer the checkpoint", path);
    if (rc == 0) rc = tg_write_file_atomic(path, buf, len);
    free(buf);
    return rc;
}

static int open_read(FILE **f, const char *path)
{
    *f = fopen(path, "rb");
    if (!*f) return tg_err(-errno, "%s: cannot open checkpoint: %s", path, strerror(errno));
    return 0;
}

int tg_model_load_path(tg_model_t *m, const char *path)
{
    FILE *f;
    int rc = open_read(&f, path);
    if (rc < 0) return rc;
    rc = tg_model_load(m, f, path);
    fclose(f);
    return rc;
}

int tg_model_load_create_path(tg_model_t **out, const char *path)
{
    FILE *f;
    *out = NULL;
    int rc = open_read(&f, path);
    if (rc < 0) return rc;
    rc = tg_model_load_create(out, f, path);
    fclose(f);
    return rc;
}
