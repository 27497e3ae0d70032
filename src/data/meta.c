/* The dataset metadata file (meta.txt): "key = value" lines, one per fact, '#' comments.
 * Human-readable on purpose: `cat meta.txt` is the quickest answer to "what is this dataset". */
#include "tiergnn/data.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const file_names[TG_FILE_COUNT] = {
    "indptr.bin",    "indices.bin",   "features.bin", "labels.bin",
    "train_idx.bin", "valid_idx.bin", "test_idx.bin",
};

const char *tg_file_name(tg_file_id_t id)
{
    return (unsigned)id < TG_FILE_COUNT ? file_names[id] : "?";
}

const char *tg_feat_dtype_name(tg_feat_dtype_t t)
{
    return t == TG_F16 ? "f16" : "f32";
}

const char *tg_index_dtype_name(tg_index_dtype_t t)
{
    return t == TG_U64 ? "u64" : "u32";
}

tg_index_dtype_t tg_index_dtype_for(uint64_t num_nodes)
{
    return num_nodes < (1ULL << 32) ? TG_U32 : TG_U64;
}

uint64_t tg_meta_expected_size(const tg_meta_t *m, tg_file_id_t id)
{
    uint64_t isz = tg_index_dtype_size(m->index_dtype);
    switch (id) {
    case TG_FILE_INDPTR:
        return (m->num_nodes + 1) * 8;
    case TG_FILE_INDICES:
        return m->num_edges * isz;
    case TG_FILE_FEATURES:
        return m->num_nodes * m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    case TG_FILE_LABELS:
        return m->num_nodes * 4 * (m->multi_label ? m->num_classes : 1);
    case TG_FILE_TRAIN:
        return m->num_train * isz;
    case TG_FILE_VALID:
        return m->num_valid * isz;
    case TG_FILE_TEST:
        return m->num_test * isz;
    default:
        return 0;
    }
}

int tg_meta_format(const tg_meta_t *m, char **text)
{
    size_t cap = 4096;
    char *b = malloc(cap);
    if (!b) return tg_err(-ENOMEM, "out of memory formatting metadata");
    int n = snprintf(b, cap,
                     "# tiergnn dataset (docs/FORMAT.md)\n"
                     "format_version = %d\n"
                     "num_nodes = %" PRIu64 "\n"
                     "num_edges = %" PRIu64 "\n"
                     "feat_dim = %u\n"
                     "feat_dtype = %s\n"
                     "index_dtype = %s\n"
                     "num_classes = %u\n"
                     "multi_label = %d\n"
                     "num_train = %" PRIu64 "\n"
                     "num_valid = %" PRIu64 "\n"
                     "num_test = %" PRIu64 "\n"
                     "source = %s\n"
                     "# file = NAME SIZE_BYTES CRC32\n",
                     TG_FORMAT_VERSION, m->num_nodes, m->num_edges, m->feat_dim,
                     tg_feat_dtype_name(m->feat_dtype), tg_index_dtype_name(m->index_dtype),
                     m->num_classes, m->multi_label ? 1 : 0, m->num_train, m->num_valid,
                     m->num_test, m->source);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        n += snprintf(b + n, cap - (size_t)n, "file = %s %" PRIu64 " %08x\n", file_names[i],
                      m->files[i].size, m->files[i].crc32);
    *text = b;
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

static int parse_u64_field(const char *v, uint64_t *out, const char *path, int line, const char *k)
{
    char *end;
    if (!*v || *v == '-' || !isdigit((unsigned char)*v))
        return tg_err(-EINVAL, "%s: line %d: %s: expected a non-negative integer, got '%s'", path,
                      line, k, v);
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || errno)
        return tg_err(-EINVAL, "%s: line %d: %s: expected a non-negative integer, got '%s'", path,
                      line, k, v);
    *out = x;
    return 0;
}

int tg_meta_parse(tg_meta_t *m, const char *text, const char *path)
{
    memset(m, 0, sizeof *m);
    m->format_version = -1;
    char *copy = strdup(text);
    if (!copy) return tg_err(-ENOMEM, "out of memory parsing %s", path);
    enum { K_NODES = 1, K_EDGES = 2, K_DIM = 4, K_FD = 8, K_ID = 16, K_CLS = 32 };
    unsigned seen = 0, files_seen = 0;
    int rc = 0, line = 0, file_line[TG_FILE_COUNT] = {0};
    char *next = copy;
    while (next) {
        char *ln = next;
        char *nl = strchr(ln, '\n');
        if (nl) *nl = 0;
        next = nl ? nl + 1 : NULL;
        line++;
        char *s = trim(ln);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = tg_err(-EINVAL, "%s: line %d: expected 'key = value', got '%.60s'", path, line, s);
            goto out;
        }
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        uint64_t x = 0;
        if (!strcmp(k, "format_version")) {
            if ((rc = parse_u64_field(v, &x, path, line, k))) goto out;
            if (x != TG_FORMAT_VERSION) {
                rc = tg_err(-EINVAL,
                            "%s: line %d: format_version %llu is not supported (this tiergnn "
                            "reads version %d)",
                            path, line, (unsigned long long)x, TG_FORMAT_VERSION);
                goto out;
            }
            m->format_version = (int)x;
        } else if (!strcmp(k, "num_nodes")) {
            if ((rc = parse_u64_field(v, &m->num_nodes, path, line, k))) goto out;
            seen |= K_NODES;
        } else if (!strcmp(k, "num_edges")) {
            if ((rc = parse_u64_field(v, &m->num_edges, path, line, k))) goto out;
            seen |= K_EDGES;
        } else if (!strcmp(k, "feat_dim")) {
            if ((rc = parse_u64_field(v, &x, path, line, k))) goto out;
            if (x == 0 || x > (1u << 24)) {
                rc = tg_err(-EINVAL, "%s: line %d: feat_dim %llu out of range 1..16777216", path,
                            line, (unsigned long long)x);
                goto out;
            }
            m->feat_dim = (uint32_t)x;
            seen |= K_DIM;
        } else if (!strcmp(k, "feat_dtype")) {
            if (!strcmp(v, "f32"))
                m->feat_dtype = TG_F32;
            else if (!strcmp(v, "f16"))
                m->feat_dtype = TG_F16;
            else {
                rc = tg_err(-EINVAL, "%s: line %d: feat_dtype must be f32 or f16, got '%s'", path,
                            line, v);
                goto out;
            }
            seen |= K_FD;
        } else if (!strcmp(k, "index_dtype")) {
            if (!strcmp(v, "u32"))
                m->index_dtype = TG_U32;
            else if (!strcmp(v, "u64"))
                m->index_dtype = TG_U64;
            else {
                rc = tg_err(-EINVAL, "%s: line %d: index_dtype must be u32 or u64, got '%s'", path,
                            line, v);
                goto out;
            }
            seen |= K_ID;
        } else if (!strcmp(k, "num_classes")) {
            if ((rc = parse_u64_field(v, &x, path, line, k))) goto out;
            if (x == 0 || x > (1u << 24)) {
                rc = tg_err(-EINVAL, "%s: line %d: num_classes %llu out of range 1..16777216", path,
                            line, (unsigned long long)x);
                goto out;
            }
            m->num_classes = (uint32_t)x;
            seen |= K_CLS;
        } else if (!strcmp(k, "multi_label")) {
            if ((rc = parse_u64_field(v, &x, path, line, k))) goto out;
            m->multi_label = x != 0;
        } else if (!strcmp(k, "num_train")) {
            if ((rc = parse_u64_field(v, &m->num_train, path, line, k))) goto out;
        } else if (!strcmp(k, "num_valid")) {
            if ((rc = parse_u64_field(v, &m->num_valid, path, line, k))) goto out;
        } else if (!strcmp(k, "num_test")) {
            if ((rc = parse_u64_field(v, &m->num_test, path, line, k))) goto out;
        } else if (!strcmp(k, "source")) {
            snprintf(m->source, sizeof m->source, "%s", v);
        } else if (!strcmp(k, "file")) {
            char name[64];
            unsigned long long size;
            unsigned crc;
            char extra;
            if (sscanf(v, "%63s %llu %x %c", name, &size, &crc, &extra) != 3) {
                rc = tg_err(-EINVAL, "%s: line %d: expected 'file = NAME SIZE CRC32', got '%.60s'",
                            path, line, v);
                goto out;
            }
            int id = -1;
            for (int i = 0; i < TG_FILE_COUNT; i++)
                if (!strcmp(name, file_names[i])) id = i;
            if (id < 0) {
                rc = tg_err(-EINVAL, "%s: line %d: unknown file '%s'", path, line, name);
                goto out;
            }
            m->files[id].size = size;
            m->files[id].crc32 = crc;
            files_seen |= 1u << id;
            file_line[id] = line;
        }
        /* Unknown keys are ignored so that a later minor addition stays readable. */
    }
    if (m->format_version < 0) {
        rc = tg_err(-EINVAL, "%s: missing key 'format_version' (after line %d, the last)", path,
                    line);
        goto out;
    }
    static const char *const need[] = {"num_nodes",  "num_edges",   "feat_dim",
                                       "feat_dtype", "index_dtype", "num_classes"};
    for (int i = 0; i < 6; i++)
        if (!(seen & (1u << i))) {
            rc = tg_err(-EINVAL, "%s: missing key '%s' (after line %d, the last)", path, need[i],
                        line);
            goto out;
        }
    for (int i = 0; i < TG_FILE_COUNT; i++)
        if (!(files_seen & (1u << i))) {
            rc =
                tg_err(-EINVAL, "%s: missing 'file = %s SIZE CRC32' line (after line %d, the last)",
                       path, file_names[i], line);
            goto out;
        }
    /* Counts whose byte sizes would overflow 64 bits could make a forged size "match". */
    if (m->num_nodes > (1ULL << 48) || m->num_edges > (1ULL << 50) ||
        (double)m->num_nodes * m->feat_dim * 4 > 0x1p62 ||
        (m->multi_label && (double)m->num_nodes * m->num_classes * 4 > 0x1p62)) {
        rc = tg_err(-EINVAL, "%s: counts too large (num_nodes %llu, num_edges %llu)", path,
                    (unsigned long long)m->num_nodes, (unsigned long long)m->num_edges);
        goto out;
    }
    if (m->num_train > m->num_nodes || m->num_valid > m->num_nodes || m->num_test > m->num_nodes) {
        rc = tg_err(-EINVAL, "%s: a split is larger than num_nodes = %llu", path,
                    (unsigned long long)m->num_nodes);
        goto out;
    }
    if (m->index_dtype == TG_U32 && m->num_nodes > (1ULL << 32)) {
        rc = tg_err(-EINVAL, "%s: index_dtype u32 cannot address %llu nodes", path,
                    (unsigned long long)m->num_nodes);
        goto out;
    }
    for (int i = 0; i < TG_FILE_COUNT; i++) {
        uint64_t want = tg_meta_expected_size(m, (tg_file_id_t)i);
        if (m->files[i].size != want) {
            rc = tg_err(-EINVAL,
                        "%s: line %d: %s is recorded as %llu bytes but the counts imply %llu", path,
                        file_line[i], file_names[i], (unsigned long long)m->files[i].size,
                        (unsigned long long)want);
            goto out;
        }
    }
out:
    free(copy);
    return rc;
}

int tg_meta_read(tg_meta_t *m, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, TG_META_NAME);
    char *text;
    int rc = tg_read_file(path, &text, NULL);
    if (rc) return rc;
    rc = tg_meta_parse(m, text, path);
    free(text);
    return rc;
}

/* IEEE half <-> single, round to nearest even; handles subnormals, Inf and NaN. */
float tg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t tg_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent, which is the correct rounding */
    return (uint16_t)(sign | half);
}
