/* Flag parsing for the sub-commands. */
#include "cli.h"
#include "tiergnn/dist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/derived.h"
#include "tiergnn/engine.h"
#include "tiergnn/graph.h"
#include "tiergnn/util.h"

/* The global options, accepted before the command and among its own options. */
static const struct {
    const char *name, *letter;
    int level;
} globals[] = {{"quiet", "-q", TG_LOG_WARN}, {"verbose", "-v", TG_LOG_DEBUG}};

#define NUM_GLOBALS (sizeof globals / sizeof globals[0])

int tg_cli_global_option(const char *arg)
{
    for (size_t i = 0; i < NUM_GLOBALS; i++)
        if ((!strncmp(arg, "--", 2) && !strcmp(arg + 2, globals[i].name)) ||
            !strcmp(arg, globals[i].letter)) {
            tg_log_set_level(globals[i].level);
            return 1;
        }
    return 0;
}

/* Edit distance of a[0..na) and b[0..nb): insertions, deletions, substitutions and swaps of two
 * neighbours ("trian" is one edit from "train"). Names are short: longer ones are "far". */
#define NAME_MAX_LEN 63

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    size_t d[NAME_MAX_LEN + 1][NAME_MAX_LEN + 1];
    if (na > NAME_MAX_LEN || nb > NAME_MAX_LEN) return SIZE_MAX;
    for (size_t i = 0; i <= na; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= nb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

typedef struct {
    const char *name; /* the unknown name */
    size_t n;
    const char *best; /* nearest so far, best_n characters, best_d edits away */
    size_t best_n, best_d;
    const char *prefixed; /* the one name that starts with `name`, if exactly one does */
    size_t prefixed_n;
    int num_prefixed;
} nearest_t;

static void consider(nearest_t *q, const char *cand, size_t nc)
{
    size_t d = edit_distance(q->name, q->n, cand, nc);
    if (d < q->best_d) {
        q->best = cand;
        q->best_n = nc;
        q->best_d = d;
    }
    if (nc > q->n && !strncmp(cand, q->name, q->n)) {
        q->prefixed = cand;
        q->prefixed_n = nc;
        q->num_prefixed++;
    }
}

int tg_cli_closest(const char *name, const char *const *names, size_t count, const char *spec,
                   char *out, size_t len)
{
    nearest_t q = {.name = name, .n = strlen(name), .best_d = SIZE_MAX};
    for (size_t i = 0; i < count; i++)
        consider(&q, names[i], strlen(names[i]));
    for (const char *p = spec; p && *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        consider(&q, p, l > 0 && p[l - 1] == '=' ? l - 1 : l);
        p = e ? e + 1 : NULL;
    }
    /* up to a third of the name's letters, at least one: "windw" finds "window", while "out"
     * is no typo of "seed"; else the one name the given one begins ("gnd": "gnndrive" is not,
     * "gnn" is) */
    size_t allowed = q.n / 3 > 1 ? q.n / 3 : 1;
    if (q.best && q.best_d <= allowed && q.best_d < q.n) {
        snprintf(out, len, "%.*s", (int)q.best_n, q.best);
        return 1;
    }
    if (q.num_prefixed == 1 && q.n >= 3) {
        snprintf(out, len, "%.*s", (int)q.prefixed_n, q.prefixed);
        return 1;
    }
    return 0;
}

static int unknown_option(const char *spec, const char *name, size_t n)
{
    const char *names[NUM_GLOBALS];
    for (size_t i = 0; i < NUM_GLOBALS; i++)
        names[i] = globals[i].name;
    char given[128], near[128];
    snprintf(given, sizeof given, "%.*s", (int)n, name);
    if (tg_cli_closest(given, names, NUM_GLOBALS, spec, near, sizeof near))
        return tg_err(-EINVAL, "unknown option '--%s' (did you mean --%s?)", given, near);
    return tg_err(-EINVAL, "unknown option '--%s'", given);
}

/* Looks `name` (length n) up in the spec; returns 1 = takes a value, 0 = boolean, -1 unknown. */
static int spec_lookup(const char *spec, const char *name, size_t n)
{
    const char *p = spec;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int val = len > 0 && p[len - 1] == '=';
        size_t nlen = val ? len - 1 : len;
        if (nlen == n && strncmp(p, name, n) == 0) return val;
        if (!e) break;
        p = e + 1;
    }
    return -1;
}

int tg_args_parse(tg_args_t *a, int argc, char **argv, const char *spec)
{
    memset(a, 0, sizeof *a);
    int only_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        /* --quiet / --verbose on this side of the command too, unless the command has an
         * option of that name */
        if (!only_pos && (strncmp(s, "--", 2) || spec_lookup(spec, s + 2, strlen(s + 2)) < 0) &&
            tg_cli_global_option(s))
            continue;
        if (only_pos || strncmp(s, "--", 2) != 0 || s[2] == 0) {
            if (!only_pos && strcmp(s, "--") == 0) {
                only_pos = 1;
                continue;
            }
            if (a->npos >= TG_ARGS_MAX) return tg_err(-EINVAL, "too many arguments");
            a->pos[a->npos++] = s;
            continue;
        }
        const char *name = s + 2;
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        int kind = spec_lookup(spec, name, n);
        if (kind < 0) return unknown_option(spec, name, n);
        for (int k = 0; k < a->nflags; k++)
            if (strlen(a->flag[k]) == n && strncmp(a->flag[k], name, n) == 0)
                return tg_err(-EINVAL, "option '--%.*s' given twice", (int)n, name);
        if (a->nflags >= TG_ARGS_MAX) return tg_err(-EINVAL, "too many options");
        const char *val = NULL;
        if (kind == 1) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                return tg_err(-EINVAL, "option '--%.*s' needs a value", (int)n, name);
        } else if (eq) {
            return tg_err(-EINVAL, "option '--%.*s' takes no value", (int)n, name);
        }
        /* Store the name NUL-terminated: argv strings are writable by C's rules. */
        if (eq) *(char *)eq = 0;
        a->flag[a->nflags] = name;
        a->value[a->nflags] = val;
        a->nflags++;
    }
    return 0;
}

static int find(const tg_args_t *a, const char *name)
{
    for (int k = 0; k < a->nflags; k++)
        if (strcmp(a->flag[k], name) == 0) return k;
    return -1;
}

int tg_args_has(const tg_args_t *a, const char *name)
{
    return find(a, name) >= 0;
}

const char *tg_args_str(const tg_args_t *a, const char *name, const char *def)
{
    int k = find(a, name);
    return k >= 0 && a->value[k] ? a->value[k] : def;
}

/* The one message of an integer flag, whatever is wrong with its value: it names the flag, the
 * rule (the range the parser was given) and what was given. */
static int int_rule_err(const char *name, const char *v, long long lo, unsigned long long hi,
                        int no_max)
{
    if (no_max && lo == 0)
        return tg_err(-EINVAL, "--%s must be a non-negative integer, got '%s'", name, v);
    if (no_max)
        return tg_err(-EINVAL, "--%s must be at least %lld (an integer), got '%s'", name, lo, v);
    return tg_err(-EINVAL, "--%s must be between %lld and %llu (an integer), got '%s'", name, lo,
                  hi, v);
}

/* Decimal digits with an optional '-': no spaces, signs or bases strtoll would take. */
static int is_integer(const char *v)
{
    const char *p = v + (*v == '-');
    if (!*p) return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int tg_args_uint(const tg_args_t *a, const char *name, uint64_t def, uint64_t lo, uint64_t hi,
                 uint64_t *out)
{
    const char *v = tg_args_str(a, name, NULL);
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    unsigned long long x = is_integer(v) && *v != '-' ? strtoull(v, NULL, 10) : 0;
    if (!is_integer(v) || *v == '-' || errno || x < lo || x > hi)
        return int_rule_err(name, v, (long long)lo, hi, hi == UINT64_MAX);
    *out = x;
    return 0;
}

int tg_args_u64(const tg_args_t *a, const char *name, uint64_t def, uint64_t *out)
{
    return tg_args_uint(a, name, def, 0, UINT64_MAX, out);
}

int tg_args_i64(const tg_args_t *a, const char *name, int64_t def, int64_t *out)
{
    const char *v = tg_args_str(a, name, NULL);
    char what[80];
    snprintf(what, sizeof what, "--%s", name);
    if (!v) {
        *out = def;
        return 0;
    }
    return tg_parse_i64(v, out, what);
}

int tg_args_double(const tg_args_t *a, const char *name, double def, double *out)
{
    const char *v = tg_args_str(a, name, NULL);
    char what[80];
    snprintf(what, sizeof what, "--%s", name);
    if (!v) {
        *out = def;
        return 0;
    }
    return tg_parse_double(v, out, what);
}

int tg_args_size(const tg_args_t *a, const char *name, uint64_t def, uint64_t *out)
{
    const char *v = tg_args_str(a, name, NULL);
    if (!v) {
        *out = def;
        return 0;
    }
    int rc = tg_parse_size(v, out);
    return rc < 0 ? tg_err_prefix(rc, "--%s", name) : rc;
}

int tg_args_int_range(const tg_args_t *a, const char *name, int64_t def, int64_t lo, int64_t hi,
                      int *out)
{
    const char *v = tg_args_str(a, name, NULL);
    if (!v) {
        *out = (int)def;
        return 0;
    }
    errno = 0;
    long long x = is_integer(v) ? strtoll(v, NULL, 10) : 0;
    if (!is_integer(v) || errno || x < lo || x > hi)
        return int_rule_err(name, v, (long long)lo, (unsigned long long)hi, 0);
    *out = (int)x;
    return 0;
}

int tg_cli_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

int tg_cli_model_widths(const tg_args_t *a, int is_gat, uint32_t *hidden, int *heads)
{
    int v = 0, rc;
    if ((rc = tg_args_int_range(a, "hidden", 256, 1, 1 << 20, &v)) < 0) return rc;
    *hidden = (uint32_t)v;
    if ((rc = tg_args_int_range(a, "heads", is_gat ? TG_CLI_GAT_HEADS : 1, 1, 1024, heads)) < 0)
        return rc;
    if (is_gat && *hidden % (uint32_t)*heads)
        return tg_err(-EINVAL,
                      "--hidden %u is not a multiple of --heads %d (GAT hidden = heads "
                      "x per-head width)",
                      *hidden, *heads);
    return 0;
}

/* The LADIES paper samples 64 to 512 nodes per layer; 512 keeps a batch's blocks dense enough
 * to train a GCN on graphs of Cora's size and larger. */
#define DEFAULT_LAYER_SIZE 512

int tg_cli_sampling(const tg_args_t *a, int is_mlp, int *layers, int64_t *fanouts,
                    const tg_sampler_i **sampler)
{
    const char *fs = tg_args_str(a, "fanouts", NULL), *ls = tg_args_str(a, "layer-sizes", NULL);
    /* --layer-sizes names its sampler, as --fanouts names node-wise sampling: a resumed LADIES
     * run given its layer sizes again needs no --sampler */
    const tg_sampler_i *kind = tg_sampler_find(tg_args_str(a, "sampler", ls ? "ladies" : "node"));
    if (!kind) return tg_err_prefix(-EINVAL, "--sampler");
    int ladies = kind != &tg_sampler_node;
    if (ladies && fs)
        return tg_err(-EINVAL,
                      "--fanouts is node-wise sampling's (neighbours per node); --sampler %s "
                      "takes --layer-sizes (nodes per layer)",
                      kind->name);
    if (!ladies && ls)
        return tg_err(-EINVAL, "--layer-sizes is for --sampler ladies (nodes per layer); node-wise "
                               "sampling takes --fanouts (neighbours per node)");
    int n = 0, rc;
    int64_t v[TG_MAX_LAYERS];
    if (fs && (rc = tg_fanouts_parse(fs, v, &n)) < 0) return rc;
    if (ls && (rc = tg_layer_sizes_parse(ls, v, &n)) < 0) return rc;
    if ((rc = tg_args_int_range(a, "layers", n ? n : 2, 1, TG_MAX_LAYERS, layers)) < 0) return rc;
    if (n && n != *layers)
        return tg_err(-EINVAL, "%s has %d value(s) but --layers is %d: give one %s per layer",
                      ls ? "--layer-sizes" : "--fanouts", n, *layers, ls ? "layer size" : "fanout");
    for (int l = 0; l < *layers; l++)
        fanouts[l] = n ? v[l] : ladies ? DEFAULT_LAYER_SIZE : is_mlp ? 0 : 10;
    *sampler = kind;
    return 0;
}

int tg_cli_feat_dtype(const tg_args_t *a, tg_feat_dtype_t *t)
{
    const char *s = tg_args_str(a, "feat-dtype", "f32");
    if (!strcmp(s, "f32"))
        *t = TG_F32;
    else if (!strcmp(s, "f16"))
        *t = TG_F16;
    else
        return tg_err(-EINVAL, "--feat-dtype must be f32 or f16, got '%s'", s);
    return 0;
}

int tg_cli_fail(void)
{
    const char *msg = tg_errmsg()[0] ? tg_errmsg() : "failed";
    /* one of K ranks: the message says which, as its log lines do (one write: the ranks share
     * mpirun's stderr) */
    if (tg_dist_size() > 1)
        fprintf(stderr, "rank %d/%d: tiergnn: %s\n", tg_dist_rank(), tg_dist_size(), msg);
    else
        fprintf(stderr, "tiergnn: %s\n", msg);
    return 1;
}

int tg_cli_checkpoint(const char *arg, int last, char *rundir, size_t len, int *which_last)
{
    struct stat st;
    if (stat(arg, &st) != 0) {
        int e = errno;
        return tg_err(-e,
                      "--checkpoint %s: %s, so no %s to read (expected a run directory, or "
                      "the %s or %s in one)",
                      arg, e == ENOENT ? "no such run directory or file" : strerror(e),
                      last ? "last checkpoint" : "best model", TG_CKPT_BEST_NAME, TG_CKPT_NAME);
    }
    if (S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(rundir, len, "%s", arg) >= len)
            return tg_err(-ENAMETOOLONG, "--checkpoint %s: path too long", arg);
        *which_last = last;
        return 0;
    }
    const char *slash = strrchr(arg, '/');
    const char *base = slash ? slash + 1 : arg;
    int is_best = !strcmp(base, TG_CKPT_BEST_NAME), is_last = !strcmp(base, TG_CKPT_NAME);
    if (!S_ISREG(st.st_mode) || (!is_best && !is_last))
        return tg_err(-EINVAL,
                      "--checkpoint %s: expected a run directory, or the %s (best model) or %s "
                      "(last checkpoint) that training wrote in one",
                      arg, TG_CKPT_BEST_NAME, TG_CKPT_NAME);
    if (last && is_best)
        return tg_err(-EINVAL,
                      "--last asks for the last checkpoint (%s), but --checkpoint %s names the "
                      "best model: leave --last out, or give the run directory",
                      TG_CKPT_NAME, arg);
    /* the file's directory is the run's: the engine opens RUNDIR/<name> and puts its temporary
     * files beside it */
    const char *dir = !slash ? "." : slash == arg ? "/" : arg;
    int dl = slash && slash != arg ? (int)(slash - arg) : 1;
    if ((size_t)snprintf(rundir, len, "%.*s", dl, dir) >= len)
        return tg_err(-ENAMETOOLONG, "--checkpoint %s: path too long", arg);
    *which_last = is_last;
    return 0;
}

int tg_cli_derived_dir(const tg_args_t *a, int create)
{
    const char *dir = tg_args_str(a, "derived-dir", NULL);
    if (!dir) return 0;
    if (!*dir) return tg_err(-EINVAL, "--derived-dir: expected a directory, got ''");
    return tg_derived_set_dir(dir, create);
}
