/* A training run's configuration file (tiergnn/config.h): one table of the settings, each with
 * its key, its flag, where it lives in tg_train_opts_t and whether it changes the trained model;
 * the writer, the reader (a small JSON reader for the file's flat object) and the resume check
 * all walk the same table, so a setting added to it is written, read and checked at once. */
#include "tiergnn/config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/graph.h"
#include "tiergnn/util.h"

typedef enum {
    T_U64,
    T_U32,
    T_INT,
    T_F32,
    T_BOOL,
    T_MODEL,
    T_ACT,
    T_OPTIM,
    T_SAMPLER,
    T_FANOUTS,
    T_EVALF,
    T_STRATEGY
} type_t;

typedef struct {
    const char *key, *flag; /* flag NULL: no command-line flag sets it */
    type_t type;
    size_t off;
    int model; /* a different value changes the trained model */
} setting_t;

#define O(f) offsetof(tg_train_opts_t, f)

static const setting_t settings[] = {
    {"model", "model", T_MODEL, O(model.type), 1},
    {"layers", "layers", T_INT, O(model.num_layers), 1},
    {"hidden", "hidden", T_U32, O(model.hidden), 1},
    {"heads", "heads", T_INT, O(model.heads), 1},
    {"activation", "activation", T_ACT, O(model.activation), 1},
    {"dropout", "dropout", T_F32, O(model.dropout), 1},
    {"input_dropout", "input-dropout", T_F32, O(model.input_dropout), 1},
    {"attn_dropout", "attn-dropout", T_F32, O(model.attn_dropout), 1},
    {"gat_concat_last", NULL, T_INT, O(model.gat_concat_last), 1},
    {"gin_train_eps", NULL, T_INT, O(model.gin_train_eps), 1},
    {"gin_eps", NULL, T_F32, O(model.gin_eps), 1},
    {"sampler", "sampler", T_SAMPLER, O(sampler), 1},
    {"fanouts", "fanouts", T_FANOUTS, O(fanouts), 1},
    {"batch_size", "batch-size", T_U64, O(batch_size), 1},
    {"batches_per_epoch", "batches-per-epoch", T_U64, O(batches_per_epoch), 1},
    {"normalize_features", "normalize-features", T_BOOL, O(normalize_features), 1},
    {"seed", "seed", T_U64, O(seed), 1},
    {"optimizer", "optimizer", T_OPTIM, O(optim.type), 1},
    {"lr", "lr", T_F32, O(optim.lr), 1},
    {"weight_decay", "weight-decay", T_F32, O(optim.weight_decay), 1},
    {"momentum", "momentum", T_F32, O(optim.momentum), 1},
    {"adam_beta1", NULL, T_F32, O(optim.beta1), 1},
    {"adam_beta2", NULL, T_F32, O(optim.beta2), 1},
    {"adam_eps", NULL, T_F32, O(optim.eps), 1},
    /* sampled evaluation decides the best model's bookkeeping in the checkpoint record */
    {"eval_fanouts", "eval-fanouts", T_EVALF, O(eval_sampled), 1},
    {"strategy", "strategy", T_STRATEGY, O(strategy), 1},
    {"epochs", "epochs", T_U64, O(epochs), 0},
    {"eval_every", "eval-every", T_U64, O(eval_every), 0},
    {"eval_chunk", "eval-chunk", T_U64, O(eval_chunk), 0},
    {"eval_max_nodes", "eval-max-nodes", T_U64, O(eval_max_nodes), 0},
    {"checkpoint_every", "checkpoint-every", T_U64, O(checkpoint_every), 0},
    {"threads", "threads", T_INT, O(threads), 0},
    {"sampler_threads", "sampler-threads", T_INT, O(sampler_threads), 0},
    {"mem", "mem", T_U64, O(mem_bytes), 0},
    {"verify", "verify", T_BOOL, O(verify), 0},
    {"verify_reads", "verify-reads", T_BOOL, O(verify_reads), 0},
};
#undef O

#define NSET ((int)(sizeof settings / sizeof settings[0]))

int tg_train_config_count(void)
{
    return NSET;
}
const char *tg_train_config_key(int i)
{
    return settings[i].key;
}
const char *tg_train_config_flag(int i)
{
    return settings[i].flag;
}
int tg_train_config_changes_model(int i)
{
    return settings[i].model;
}

static void *field(tg_train_opts_t *o, int i)
{
    return (char *)o + settings[i].off;
}
static const void *cfield(const tg_train_opts_t *o, int i)
{
    return (const char *)o + settings[i].off;
}

static size_t type_size(type_t t)
{
    switch (t) {
    case T_U64:
        return sizeof(uint64_t);
    case T_U32:
        return sizeof(uint32_t);
    case T_F32:
        return sizeof(float);
    case T_MODEL:
        return sizeof(tg_model_type_t);
    case T_ACT:
        return sizeof(tg_act_t);
    case T_OPTIM:
        return sizeof(tg_optim_type_t);
    case T_SAMPLER:
        return sizeof(const tg_sampler_i *);
    case T_FANOUTS:
        return sizeof(int64_t) * TG_MAX_LAYERS;
    case T_STRATEGY:
        return sizeof(const char *);
    default:
        return sizeof(int);
    }
}

void tg_train_config_copy(tg_train_opts_t *dst, const tg_train_opts_t *src, int i)
{
    memcpy(field(dst, i), cfield(src, i), type_size(settings[i].type));
}

/* The shortest decimal that reads back as the same float: 5e-4f is "0.0005", not
 * "0.000500000024", and the file gives the bits of the run. */
static void put_float(char *buf, size_t len, float v)
{
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, len, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

void tg_train_config_value(const tg_train_opts_t *o, int i, char *buf, size_t len)
{
    const void *f = cfield(o, i);
    size_t n = 0;
    switch (settings[i].type) {
    case T_U64:
        snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
        break;
    case T_U32:
        snprintf(buf, len, "%u", *(const uint32_t *)f);
        break;
    case T_INT:
        snprintf(buf, len, "%d", *(const int *)f);
        break;
    case T_F32:
        put_float(buf, len, *(const float *)f);
        break;
    case T_BOOL:
        snprintf(buf, len, "%s", *(const int *)f ? "true" : "false");
        break;
    case T_MODEL:
        snprintf(buf, len, "\"%s\"", tg_model_type_name(*(const tg_model_type_t *)f));
        break;
    case T_ACT:
        snprintf(buf, len, "\"%s\"", tg_act_name(*(const tg_act_t *)f));
        break;
    case T_OPTIM:
        snprintf(buf, len, "\"%s\"", tg_optim_type_name(*(const tg_optim_type_t *)f));
        break;
    case T_SAMPLER:
        snprintf(buf, len, "\"%s\"", tg_sampler_name(*(const tg_sampler_i *const *)f));
        break;
    case T_EVALF:
        snprintf(buf, len, "\"%s\"", *(const int *)f ? "train" : "full");
        break;
    case T_STRATEGY: {
        const char *s = *(const char *const *)f;
        snprintf(buf, len, "\"%s\"", s && *s ? s : "auto");
        break;
    }
    case T_FANOUTS: {
        const int64_t *fo = f;
        n = (size_t)snprintf(buf, len, "[");
        for (int l = 0; l < o->model.num_layers && l < TG_MAX_LAYERS && n < len; l++)
            n += (size_t)snprintf(buf + n, len - n, "%s%lld", l ? "," : "", (long long)fo[l]);
        if (n < len) snprintf(buf + n, len - n, "]");
        break;
    }
    }
}

void tg_train_config_show(const tg_train_opts_t *o, int i, char *buf, size_t len)
{
    tg_train_config_value(o, i, buf, len);
    size_t n = strlen(buf);
    if (n >= 2 && buf[0] == '"' && buf[n - 1] == '"') {
        memmove(buf, buf + 1, n - 2);
        buf[n - 2] = 0;
    }
}

size_t tg_train_config_diff(const tg_train_opts_t *there, const tg_train_opts_t *here, int i,
                            char *buf, size_t len)
{
    char a[512], b[512];
    tg_train_config_show(there, i, a, sizeof a);
    tg_train_config_show(here, i, b, sizeof b);
    if (!strcmp(a, b) || !len) return 0;
    const setting_t *st = &settings[i];
    size_t n = 0;
    buf[0] = 0;
    if (st->type == T_FANOUTS && there->model.num_layers == here->model.num_layers) {
        /* per layer, in the sampler's words, as the checkpoint's own check says it */
        const char *what = here->sampler && strcmp(tg_sampler_name(here->sampler), "node")
                               ? "layer size"
                               : "fanout";
        for (int l = 0; l < here->model.num_layers && n < len; l++)
            if (there->fanouts[l] != here->fanouts[l])
                n += (size_t)snprintf(buf + n, len - n, "%s%s of layer %d %lld there vs %lld here",
                                      n ? "; " : "", what, l, (long long)there->fanouts[l],
                                      (long long)here->fanouts[l]);
        return n < len ? n : len - 1;
    }
    n = (size_t)snprintf(buf, len, "%s%s %s there vs %s here", st->flag ? "--" : "",
                         st->flag ? st->flag : st->key, a, b);
    return n < len ? n : len - 1;
}

/* ---------------------------------------------------------------- writing */

/* A JSON string's body: the strategy options' names and values are plain words, but a value is
 * what the user typed. */
static size_t put_str(char *buf, size_t len, size_t n, const char *s)
{
    if (n < len) n += (size_t)snprintf(buf + n, len - n, "\"");
    for (; s && *s && n < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            n += (size_t)snprintf(buf + n, len - n, "\\%c", c);
        else if (c < 0x20)
            n += (size_t)snprintf(buf + n, len - n, "\\u%04x", c);
        else
            n += (size_t)snprintf(buf + n, len - n, "%c", c);
    }
    if (n < len) n += (size_t)snprintf(buf + n, len - n, "\"");
    return n;
}

int tg_train_config_write(const char *path, const tg_train_opts_t *o, const char *strategy)
{
    enum { CAP = 16384 };
    char *buf = malloc(CAP), v[512];
    if (!buf) return tg_err(-ENOMEM, "%s: out of memory", path);
    tg_train_opts_t w = *o;
    w.strategy = strategy ? strategy : o->strategy;
    size_t n = (size_t)snprintf(buf, CAP,
                                "{\n  \"format\": \"tiergnn-train-config\",\n"
                                "  \"version\": 1,\n");
    for (int i = 0; i < NSET && n < CAP; i++) {
        tg_train_config_value(&w, i, v, sizeof v);
        n += (size_t)snprintf(buf + n, CAP - n, "  \"%s\": %s,\n", settings[i].key, v);
    }
    if (n < CAP) n += (size_t)snprintf(buf + n, CAP - n, "  \"strategy_options\": {");
    for (int k = 0; k < o->num_strategy_args && n < CAP; k++) {
        if (n < CAP) n += (size_t)snprintf(buf + n, CAP - n, "%s", k ? ", " : "");
        n = put_str(buf, CAP, n, o->strategy_args[k].name);
        if (n < CAP) n += (size_t)snprintf(buf + n, CAP - n, ": ");
        if (o->strategy_args[k].value)
            n = put_str(buf, CAP, n, o->strategy_args[k].value);
        else if (n < CAP)
            n += (size_t)snprintf(buf + n, CAP - n, "true"); /* a flag */
    }
    if (n < CAP) n += (size_t)snprintf(buf + n, CAP - n, "}\n}\n");
    int rc = n < CAP ? tg_write_file_atomic(path, buf, n)
                     : tg_err(-E2BIG, "%s: the configuration exceeds %d bytes", path, CAP);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- reading */

/* The reader's position in the file's text; strings are unescaped in place. */
typedef struct {
    char *p;
    const char *path, *key;
} rd_t;

static void ws(rd_t *r)
{
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
        r->p++;
}

static int bad(rd_t *r, const char *what)
{
    /* the token there, up to the next delimiter */
    char got[24];
    size_t n = strcspn(r->p, ",}]\n\r\t");
    snprintf(got, sizeof got, "%.*s", (int)(n ? (n < 16 ? n : 16) : 1),
             *r->p ? r->p : "the end of the file");
    if (!*r->p) snprintf(got, sizeof got, "the end of the file");
    if (r->key)
        return tg_err(-EINVAL, "%s: \"%s\": expected %s, got '%s'", r->path, r->key, what, got);
    return tg_err(-EINVAL, "%s: expected %s, got '%s'", r->path, what, got);
}

static int expect(rd_t *r, char c)
{
    ws(r);
    if (*r->p != c) {
        char what[8] = {'\'', c, '\'', 0};
        return bad(r, what);
    }
    r->p++;
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A string; *out points into the text, unescaped and NUL-terminated. Only \u escapes below 0x80
 * are taken: the writer uses them for control characters only. */
static int string(rd_t *r, char **out)
{
    ws(r);
    if (*r->p != '"') return bad(r, "a string");
    char *s = ++r->p, *d = s;
    for (;;) {
        char c = *r->p;
        if (!c) return bad(r, "the end of a string");
        r->p++;
        if (c == '"') break;
        if (c != '\\') {
            *d++ = c;
            continue;
        }
        c = *r->p++;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            *d++ = c;
            break;
        case 'n':
            *d++ = '\n';
            break;
        case 't':
            *d++ = '\t';
            break;
        case 'r':
            *d++ = '\r';
            break;
        case 'u': {
            int v = 0;
            for (int k = 0; k < 4; k++) {
                int h = hexval(r->p[k]);
                if (h < 0) return bad(r, "four hex digits after \\u");
                v = v * 16 + h;
            }
            if (v == 0 || v >= 0x80) return bad(r, "a \\u escape of a character below 0x80");
            r->p += 4;
            *d++ = (char)v;
            break;
        }
        default:
            return bad(r, "a JSON escape");
        }
    }
    *d = 0;
    *out = s;
    return 0;
}

/* A number's text, NUL-terminated in buf. */
static int number(rd_t *r, char *buf, size_t len)
{
    ws(r);
    size_t n = 0;
    while (strchr("-+0123456789.eE", *r->p) && *r->p && n + 1 < len)
        buf[n++] = *r->p++;
    buf[n] = 0;
    if (!n) return bad(r, "a number");
    return 0;
}

static int u64_of(rd_t *r, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *at = r->p, buf[32], *end;
    int rc = number(r, buf, sizeof buf);
    if (rc < 0) return rc;
    errno = 0;
    unsigned long long v = buf[0] != '-' ? strtoull(buf, &end, 10) : 0;
    if (buf[0] == '-' || errno || *end || v < lo || v > hi) {
        r->p = at;
        char what[96];
        snprintf(what, sizeof what, "an integer between %llu and %llu", (unsigned long long)lo,
                 (unsigned long long)hi);
        return bad(r, what);
    }
    *out = v;
    return 0;
}

static int i64_of(rd_t *r, int64_t lo, int64_t hi, int64_t *out)
{
    char *at = r->p, buf[32], *end;
    int rc = number(r, buf, sizeof buf);
    if (rc < 0) return rc;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        r->p = at;
        char what[96];
        snprintf(what, sizeof what, "an integer between %lld and %lld", (long long)lo,
                 (long long)hi);
        return bad(r, what);
    }
    *out = v;
    return 0;
}

static int f32_of(rd_t *r, float *out)
{
    char *at = r->p, buf[64], *end;
    int rc = number(r, buf, sizeof buf);
    if (rc < 0) return rc;
    errno = 0;
    float v = strtof(buf, &end);
    if (errno || *end || !isfinite(v)) {
        r->p = at;
        return bad(r, "a finite number");
    }
    *out = v;
    return 0;
}

static int bool_of(rd_t *r, int *out)
{
    ws(r);
    if (!strncmp(r->p, "true", 4)) {
        r->p += 4;
        *out = 1;
    } else if (!strncmp(r->p, "false", 5)) {
        r->p += 5;
        *out = 0;
    } else {
        return bad(r, "true or false");
    }
    return 0;
}

static int fanouts_of(rd_t *r, int64_t *fo, int *n)
{
    int rc = expect(r, '[');
    *n = 0;
    ws(r);
    if (*r->p == ']') return r->p++, 0;
    for (;;) {
        if (*n >= TG_MAX_LAYERS) return bad(r, "one value per layer (too many layers)");
        if ((rc = i64_of(r, TG_FANOUT_ALL, INT64_MAX, &fo[(*n)++])) < 0) return rc;
        ws(r);
        if (*r->p == ']') return r->p++, 0;
        if ((rc = expect(r, ',')) < 0) return rc;
    }
}

/* One setting's value into o. */
static int value_of(rd_t *r, tg_train_config_t *cf, tg_train_opts_t *o, int i, int *nfan)
{
    void *f = field(o, i);
    char *s;
    int rc, b = 0;
    uint64_t u = 0;
    int64_t v = 0;
    switch (settings[i].type) {
    case T_U64:
        return u64_of(r, 0, UINT64_MAX, f);
    case T_U32:
        if ((rc = u64_of(r, 0, UINT32_MAX, &u)) < 0) return rc;
        *(uint32_t *)f = (uint32_t)u;
        return 0;
    case T_INT:
        if ((rc = i64_of(r, -1, 1 << 20, &v)) < 0) return rc;
        *(int *)f = (int)v;
        return 0;
    case T_F32:
        return f32_of(r, f);
    case T_BOOL:
        if ((rc = bool_of(r, &b)) < 0) return rc;
        *(int *)f = b;
        return 0;
    case T_FANOUTS:
        return fanouts_of(r, f, nfan);
    default:
        break;
    }
    char *at = r->p;
    if ((rc = string(r, &s)) < 0) return rc;
    switch (settings[i].type) {
    case T_MODEL:
        rc = tg_model_type_parse(s, f);
        break;
    case T_ACT:
        rc = tg_act_parse(s, f);
        break;
    case T_OPTIM:
        rc = tg_optim_type_parse(s, f);
        break;
    case T_SAMPLER: {
        const tg_sampler_i *k = tg_sampler_find(s);
        rc = k ? 0 : -EINVAL;
        if (k) *(const tg_sampler_i **)f = k;
        break;
    }
    case T_EVALF:
        rc = !strcmp(s, "full") || !strcmp(s, "train") ? 0 : -EINVAL;
        *(int *)f = !strcmp(s, "train");
        if (rc) tg_err(rc, "expected full or train");
        break;
    case T_STRATEGY:
        rc = !strcmp(s, "auto") || tg_strategy_info_find(s) ? 0 : -EINVAL;
        if (rc) {
            tg_err(rc, "expected auto or one of %s", tg_strategy_names());
        } else {
            snprintf(cf->strategy, sizeof cf->strategy, "%s", s);
            *(const char **)f = cf->strategy;
        }
        break;
    default:
        rc = -EINVAL;
    }
    if (rc < 0) {
        r->p = at;
        char what[512];
        snprintf(what, sizeof what, "a valid value (%s)", tg_errmsg());
        return bad(r, what);
    }
    return 0;
}

/* "strategy_options": {"name": "value" or true, ...}: the strategy's own flags. */
static int args_of(rd_t *r, tg_train_config_t *cf)
{
    int rc = expect(r, '{');
    if (rc < 0) return rc;
    cf->nargs = 0;
    ws(r);
    if (*r->p == '}') return r->p++, 0;
    for (;;) {
        char *name, *val = NULL;
        if ((rc = string(r, &name)) < 0 || (rc = expect(r, ':')) < 0) return rc;
        ws(r);
        if (!strncmp(r->p, "true", 4)) {
            r->p += 4;
        } else if (*r->p == '"') {
            if ((rc = string(r, &val)) < 0) return rc;
        } else {
            return bad(r, "a string (the option's value) or true (a flag)");
        }
        if (tg_strategy_opt_kind(name) < 0)
            return tg_err(-EINVAL,
                          "%s: \"strategy_options\": --%s is not an option of any strategy",
                          r->path, name);
        if (cf->nargs >= TG_CONFIG_MAX_ARGS) return bad(r, "fewer strategy options");
        cf->args[cf->nargs++] = (tg_strategy_arg_t){name, val};
        ws(r);
        if (*r->p == '}') return r->p++, 0;
        if ((rc = expect(r, ',')) < 0) return rc;
    }
}

/* Skips the value of "format" / "version" after checking it. */
static int header_of(rd_t *r, const char *key)
{
    char *s;
    int64_t v;
    int rc;
    if (!strcmp(key, "format")) {
        char *at = r->p;
        if ((rc = string(r, &s)) < 0) return rc;
        if (strcmp(s, "tiergnn-train-config") != 0) {
            r->p = at;
            return bad(r, "\"tiergnn-train-config\"");
        }
        return 0;
    }
    return i64_of(r, 1, 1, &v);
}

int tg_train_config_read(tg_train_config_t *cf, const char *path, tg_train_opts_t *o)
{
    memset(cf, 0, sizeof *cf);
    size_t len;
    int rc = tg_read_file(path, &cf->text, &len);
    if (rc < 0) return rc;
    if (strlen(cf->text) != len)
        return tg_err(-EINVAL, "%s: a NUL byte in the file (not a configuration)", path);
    rd_t r = {cf->text, path, NULL};
    tg_train_opts_t w = *o;
    int nfan = -1, have_args = 0, have_layers = 0;
    if ((rc = expect(&r, '{')) < 0) return rc;
    ws(&r);
    int first = 1;
    while (*r.p != '}') {
        if (!first && (rc = expect(&r, ',')) < 0) return rc;
        first = 0;
        char *key;
        r.key = NULL;
        if ((rc = string(&r, &key)) < 0 || (rc = expect(&r, ':')) < 0) return rc;
        r.key = key;
        int i = 0;
        while (i < NSET && strcmp(settings[i].key, key) != 0)
            i++;
        if (i < NSET) {
            rc = value_of(&r, cf, &w, i, &nfan);
            have_layers |= !strcmp(key, "layers");
        } else if (!strcmp(key, "strategy_options"))
            rc = args_of(&r, cf), have_args = 1;
        else if (!strcmp(key, "format") || !strcmp(key, "version"))
            rc = header_of(&r, key);
        else
            rc = tg_err(-EINVAL, "%s: unknown key \"%s\" (docs/TRAINING.md lists the keys)", path,
                        key);
        if (rc < 0) return rc;
        ws(&r);
    }
    r.p++;
    r.key = NULL;
    ws(&r);
    if (*r.p) return bad(&r, "the end of the file after the object");
    /* the layer count is the fanouts' when the file gives only them */
    if (nfan >= 0 && !have_layers) w.model.num_layers = nfan;
    if (nfan >= 0 && nfan != w.model.num_layers)
        return tg_err(-EINVAL, "%s: \"fanouts\" has %d value(s) but \"layers\" is %d", path, nfan,
                      w.model.num_layers);
    if (have_args) {
        w.strategy_args = cf->args;
        w.num_strategy_args = cf->nargs;
    }
    *o = w;
    return 0;
}

void tg_train_config_destroy(tg_train_config_t *cf)
{
    free(cf->text);
    memset(cf, 0, sizeof *cf);
}

/* ---------------------------------------------------------------- resume */

int tg_train_config_strategy_exact(const char *from, const char *to)
{
    if (!from || !to) return 0;
    if (!strcmp(from, to)) return 1;
    const tg_strategy_info_t *a = tg_strategy_info_find(from), *b = tg_strategy_info_find(to);
    /* auto takes memory or the first out-of-core strategy, both exact */
    int b_exact = !strcmp(to, "auto") || (b && (b->caps & TG_STRAT_EXACT));
    int a_exact = !strcmp(from, "auto") || (a && (a->caps & TG_STRAT_EXACT));
    return a_exact && b_exact;
}

static int has_arg(const tg_strategy_arg_t *a, int na, const tg_strategy_arg_t *x)
{
    for (int k = 0; k < na; k++)
        if (!strcmp(a[k].name, x->name))
            return (!a[k].value && !x->value) ||
                   (a[k].value && x->value && !strcmp(a[k].value, x->value));
    return 0;
}

int tg_train_config_same_args(const tg_strategy_arg_t *a, int na, const tg_strategy_arg_t *b,
                              int nb)
{
    for (int k = 0; k < na; k++)
        if (!has_arg(b, nb, &a[k])) return 0;
    for (int k = 0; k < nb; k++)
        if (!has_arg(a, na, &b[k])) return 0;
    return 1;
}

static size_t args_text(const tg_strategy_arg_t *a, int n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "%s", n ? "" : "none");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s--%s%s%s", i ? " " : "", a[i].name,
                              a[i].value ? " " : "", a[i].value ? a[i].value : "");
    return k;
}

int tg_train_config_check_resume(const tg_train_opts_t *file, const char *file_strategy,
                                 const tg_train_opts_t *now, const char *now_strategy,
                                 const char *path)
{
    char diff[2048] = "", a[512], b[512];
    size_t n = 0;
#define DIFF(...) tg_err_list_add(diff, sizeof diff, &n, __VA_ARGS__)
    tg_train_opts_t f = *file, w = *now;
    f.strategy = file_strategy;
    w.strategy = now_strategy;
    for (int i = 0; i < NSET; i++) {
        if (!settings[i].model || settings[i].type == T_STRATEGY) continue;
        char one[1024];
        if (tg_train_config_diff(&f, &w, i, one, sizeof one)) DIFF("%s", one);
    }
    int exact = tg_train_config_strategy_exact(file_strategy, now_strategy);
    if (!exact)
        DIFF("--strategy %s there vs %s here (only strategies that give the same batches may "
             "replace each other)",
             file_strategy, now_strategy);
    else if (!strcmp(file_strategy, now_strategy) &&
             !(tg_strategy_info_find(now_strategy) &&
               (tg_strategy_info_find(now_strategy)->caps & TG_STRAT_EXACT)) &&
             !tg_train_config_same_args(file->strategy_args, file->num_strategy_args,
                                        now->strategy_args, now->num_strategy_args)) {
        args_text(file->strategy_args, file->num_strategy_args, a, sizeof a);
        args_text(now->strategy_args, now->num_strategy_args, b, sizeof b);
        DIFF("strategy %s's options '%s' there vs '%s' here", now_strategy, a, b);
    }
#undef DIFF
    if (n)
        return tg_err(-EINVAL,
                      "cannot resume with the settings of %s: settings differ: %s (these change "
                      "the trained model; start a new run with another --out to change them)",
                      path, diff);
    return 0;
}
