/* tiergnn infer: predictions (and embeddings) of a run's model for every node; its parsing and
 * run (tg_cli_infer_parse, tg_cli_infer_run) are Python's too. */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tiergnn/dist.h"
#include "tiergnn/data.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

static const char infer_usage[] =
    "usage: tiergnn infer DATASET --checkpoint RUNDIR|FILE --out FILE [options]\n"
    "\n"
    "Computes the model layer by layer with full neighbourhoods over chunks of nodes and writes\n"
    "  FILE        int32[N]: the argmax class of every node (multi-label: int32[N][C] of 0/1)\n"
    "  FILE.emb    with --embeddings: float32[N][E], the last hidden representation\n"
    "  FILE.json   shapes, dtypes and CRC-32s of the above\n"
    "  FILE.npy, FILE.emb.npy   with --format npy: the same arrays as NumPy .npy files\n"
    "              (np.load(FILE + '.npy') has shape (N,), or (N, C) multi-label)\n"
    "Intermediate layers are kept in temporary files in RUNDIR, so the embeddings of all nodes\n"
    "need not fit in RAM.\n"
    "\n"
    "  --embeddings        also write FILE.emb\n"
    "  --format raw|npy    raw (default): the files above; npy: also FILE.npy (and\n"
    "                      FILE.emb.npy), shape and dtype in their headers\n"
    "  --last              use the last checkpoint instead of the best model\n"
    "  --chunk-nodes N     destination nodes per chunk (default: as many as take\n"
    "                      ~64 MiB of input rows, at most 65536)\n"
    "  --mem SIZE          memory budget: graph and features are kept in RAM only if\n"
    "                      they fit in SIZE, else read from disk (default: RAM/4 decides)\n"
    "  --threads T         compute threads (default: the online CPUs)\n"
    "  --strategy NAME     auto (default) or a strategy below, with its options\n"
    "  --verify            check every dataset file's CRC-32 against meta.txt first\n"
    "  --verify-reads      check every feature row read from a disk against its CRC-32\n"
    "                      (derived/rowcrc, as train --verify-reads)\n"
    "  --derived-dir DIR   derived and runtime files in DIR, as train --derived-dir\n";

/* Copies the raw array `raw` (dtype descr, n rows of `width` elements, width 0: a 1-D array)
 * into raw.npy behind a .npy header: written to a temporary file beside it, fsynced and
 * renamed, so a reader sees the whole file or none. */
static int write_npy(const char *raw, const char *descr, uint64_t n, uint64_t width)
{
    char path[4200], tmp[4300], hdr[256];
    snprintf(path, sizeof path, "%s.npy", raw);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    uint64_t shape[2] = {n, width};
    size_t hl = tg_npy_header(hdr, sizeof hdr, descr, width ? 2 : 1, shape);
    int in = open(raw, O_RDONLY | O_CLOEXEC);
    if (in < 0) return tg_err(-errno, "%s: cannot open: %s", raw, strerror(errno));
    struct stat st;
    uint64_t want = n * (width ? width : 1) * 4;
    if (fstat(in, &st) || (uint64_t)st.st_size != want) {
        close(in);
        return tg_err(-EINVAL, "%s: %llu bytes, expected %llu for %llu rows", raw,
                      (unsigned long long)st.st_size, (unsigned long long)want,
                      (unsigned long long)n);
    }
    tg_filew_t fw;
    int rc = tg_filew_open(&fw, tmp, 1u << 20);
    if (rc) {
        close(in);
        return rc;
    }
    rc = tg_filew_write(&fw, hdr, hl);
    char *buf = malloc(1u << 20);
    if (!buf && !rc) rc = tg_err(-ENOMEM, "out of memory");
    for (uint64_t off = 0; off < want && !rc; off += 1u << 20) {
        size_t k = (size_t)TG_MIN((uint64_t)1 << 20, want - off);
        if (!(rc = tg_pread_full(in, buf, k, off, raw))) rc = tg_filew_write(&fw, buf, k);
    }
    free(buf);
    close(in);
    if (!rc)
        rc = tg_filew_close(&fw, NULL);
    else
        tg_filew_discard(&fw);
    if (!rc && rename(tmp, path))
        rc = tg_err(-errno, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    if (rc) {
        unlink(tmp);
        return rc;
    }
    char *d = strdup(path);
    if (d) tg_fsync_dir(dirname(d));
    free(d);
    return 0;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

/* --format npy: FILE.npy and FILE.emb.npy from the raw files tg_infer wrote, their shapes from
 * the dataset's node count and the files' sizes; multi-label from FILE.json. */
static int write_npy_outputs(const char *dataset, const char *out, int embeddings)
{
    tg_meta_t m;
    int rc = tg_meta_read(&m, dataset);
    if (rc) return rc;
    char p[4200];
    snprintf(p, sizeof p, "%s.json", out);
    char *json = NULL;
    size_t jl = 0;
    FILE *jf = fopen(p, "r");
    if (jf) {
        json = calloc(1, 1u << 16);
        if (json) jl = fread(json, 1, (1u << 16) - 1, jf);
        fclose(jf);
    }
    int multi = json && jl && strstr(json, "\"multi_label\": true") != NULL;
    free(json);
    uint64_t n = m.num_nodes, size = file_size(out);
    uint64_t width = n ? size / 4 / n : 0;
    if ((rc = write_npy(out, "<i4", n, multi ? width : 0))) return rc;
    if (!embeddings) return 0;
    snprintf(p, sizeof p, "%s.emb", out);
    uint64_t e = n ? file_size(p) / 4 / n : 0;
    return write_npy(p, "<f4", n, e);
}

/* The operands and flags, in the order their errors are reported. */
static int parse_infer(const tg_args_t *a, tg_cli_infer_t *p)
{
    tg_infer_opts_t *o = &p->o;
    if (a->npos != 1)
        return tg_err(-EINVAL, "infer: expected one DATASET directory, got %d arguments", a->npos);
    p->dataset = a->pos[0];
    const char *ckpt = tg_args_str(a, "checkpoint", NULL);
    p->out = tg_args_str(a, "out", NULL);
    if (!ckpt || !p->out)
        return tg_err(-EINVAL, "infer: --checkpoint RUNDIR|FILE and --out FILE are required");
    o->embeddings = tg_args_has(a, "embeddings");
    o->progress = 1;
    o->verify = tg_args_has(a, "verify");
    o->verify_reads = tg_args_has(a, "verify-reads");
    int rc = tg_cli_strategy_name(a, &o->strategy);
    if (!rc) rc = tg_cli_strategy_args(a, p->sargs, TG_ARGS_MAX, &o->num_strategy_args);
    o->strategy_args = p->sargs;
    if (!rc) rc = tg_args_uint(a, "chunk-nodes", 0, 1, UINT64_MAX, &o->chunk_nodes);
    if (!rc) rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc) rc = tg_args_int_range(a, "threads", tg_cli_default_threads(), 1, 1024, &o->threads);
    /* the number options first, then the checkpoint path, as eval does */
    if (!rc)
        rc = tg_cli_checkpoint(ckpt, tg_args_has(a, "last"), p->rundir, sizeof p->rundir,
                               &o->which_last);
    if (rc) return rc;
    const char *format = tg_args_str(a, "format", "raw");
    if (strcmp(format, "raw") && strcmp(format, "npy"))
        return tg_err(-EINVAL, "--format must be raw or npy, got '%s'", format);
    p->npy = !strcmp(format, "npy");
    return 0;
}

int tg_cli_infer_parse(int argc, char **argv, tg_cli_infer_t *p)
{
    memset(p, 0, sizeof *p);
    int rc = tg_cli_parse_with_strategies(
        &p->a, argc, argv,
        "checkpoint=,out=,embeddings,format=,last,chunk-nodes=,mem=,threads=,strategy=,verify,"
        "verify-reads,help,help-strategy=,derived-dir=",
        &p->help);
    if (!rc) rc = tg_cli_derived_dir(&p->a, 1);
    if (rc) return rc;
    return p->help ? 0 : parse_infer(&p->a, p);
}

int tg_cli_infer_run(const tg_cli_infer_t *p)
{
    int rc = tg_infer(p->dataset, p->rundir, p->out, &p->o);
    /* rank 0 wrote the files (one rank without mpirun); a failure here is its alone */
    if (!rc && p->npy && tg_dist_rank() == 0)
        rc = write_npy_outputs(p->dataset, p->out, p->o.embeddings);
    return rc;
}

/* Under mpirun every rank computes its share of every layer and rank 0 writes the files
 * (docs/DISTRIBUTED.md); MPI ends as in train. */
int tg_cmd_infer(int argc, char **argv)
{
    tg_cli_infer_t p;
    if (tg_cli_infer_parse(argc, argv, &p) < 0) return tg_cli_fail();
    if (p.help) return tg_cli_help(&p.a, infer_usage);
    int rc = tg_dist_init();
    if (rc >= 0) rc = tg_cli_infer_run(&p);
    int code = rc < 0 ? tg_cli_fail() : 0;
    int rank = tg_dist_rank();
    tg_dist_finish(rc);
    if (code || rank != 0) return code;
    tg_log_info("wrote %s%s%s", p.out, p.o.embeddings ? " and its .emb" : "",
                p.npy ? " (and .npy copies)" : "");
    return 0;
}
