/* bench-impl.h - the seams inside bench/. bench.c drives one bench: it checks the options, finds
 * membudget, samples the footprint (footprint.c), probes the device and times the GEMM
 * (bounds.c), then for each strategy evicts the dataset and runs `tiergnn train` (spawn.c),
 * reads what the run reported (run.c), computes the Belady bound with the runs' cache size
 * (bounds.c), and at the end writes the reports (report.c). Nothing in report.c or run.c knows one
 * strategy from another: every strategy's row is made the same way. */
#ifndef TG_BENCH_IMPL_H
#define TG_BENCH_IMPL_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/resource.h>

#include "tiergnn/bench.h"
#include "tiergnn/data.h"
#include "tiergnn/io.h"
#include "tiergnn/util.h"

#define TG_BENCH_NAME_MAX 96

/* ================================================================ text (report.c)
 *
 * A growing string for composing a report; on out of memory it stays as it was and oom is set,
 * checked once by tg_bench_sb_write. Zero-initialise; free(b.s) after. */
typedef struct tg_bench_sbuf {
    char *s;
    size_t len, cap;
    int oom;
} tg_bench_sbuf_t;

void tg_bench_sb_printf(tg_bench_sbuf_t *b, const char *fmt, ...) TG_PRINTF(2, 3);
/* Writes the text to path atomically (tg_write_file_atomic). */
int tg_bench_sb_write(tg_bench_sbuf_t *b, const char *path);

/* ================================================================ processes (spawn.c) */

/* Runs argv (argv[0] a path) with stdin from /dev/null and stdout / stderr into the files;
 * waits. *status is the wait status; ru the child's resource usage (with its waited-for
 * descendants). */
int tg_bench_spawn_wait(char *const argv[], const char *out_path, const char *err_path, int *status,
                        struct rusage *ru, double *wall_s);
/* Refuses (a negative code, a message naming exe) unless exe is an executable file that answers
 * `--version` with "tiergnn VERSION" and status 0 within 5 s; also refuses inside such a
 * question (spawn.c says why). Scratch files go to scratch_dir and are removed. */
int tg_bench_check_exe(const char *exe, const char *scratch_dir);
/* ../shared/tools/membudget relative to the current directory, then relative to exe's directory
 * and up to three of its parents. Returns 1 with the path in buf, 0 when not found. */
int tg_bench_find_membudget(const char *exe, char *buf, size_t len);
/* Runs `membudget 64M -- true`: 1 when it set a limit, 0 when not (why says so). Scratch files
 * go to rundir and are removed. */
int tg_bench_membudget_works(const char *membudget, const char *rundir, char *why, size_t len);
/* The out-of-memory kills counted so far below this process's cgroup: the oom_kill line of the
 * cgroup v2 memory.events, which counts the whole subtree (membudget's cgroup is a child of
 * ours). -1 where the kernel does not keep it (cgroup v1, no memory controller). */
int64_t tg_bench_oom_kills(void);
/* Drops every file of the dataset from the page cache (unless only_measure), then measures what
 * is resident (mincore). */
int tg_bench_dataset_cache(const tg_dataset_t *ds, int only_measure, uint64_t *resident,
                           uint64_t *total);
/* The last non-empty line of a file that does not start with skip (NULL: none); text after a
 * progress bar's last carriage return. Empty when the file cannot be read. */
void tg_bench_last_line(const char *path, const char *skip, char *buf, size_t len);

/* ================================================================ one run (run.c) */

/* Per-epoch keys the bench reads ("n/a" where a run does not write them). */
enum {
    TG_BENCH_E_TIME,
    TG_BENCH_E_SAMPLE,
    TG_BENCH_E_GATHER,
    TG_BENCH_E_COMPUTE,
    TG_BENCH_E_WAIT,
    TG_BENCH_E_IO_WAIT,
    TG_BENCH_E_IO_REQ,
    TG_BENCH_E_IO_READ,
    TG_BENCH_E_IO_NEED,
    TG_BENCH_E_HIT,
    TG_BENCH_E_PEAK_RSS,
    TG_BENCH_E_COUNT
};

typedef struct tg_bench_epoch {
    double v[TG_BENCH_E_COUNT];
} tg_bench_epoch_t;

typedef struct tg_bench_run {
    char name[TG_BENCH_NAME_MAX];     /* the --strategies item: "S" or "S:opt=val:flag" */
    char strategy[TG_BENCH_NAME_MAX]; /* S, what --strategy gets */
    /* the item's own options, "--opt" "val" / "--flag" words into opt_buf (at most 16) */
    char opt_buf[2 * TG_BENCH_NAME_MAX];
    const char *opt_argv[32];
    int num_opts;
    char dir[4096];
    /* process */
    int ran;        /* the process was started */
    int exit_code;  /* exit status, 128 + signal for a signal */
    int signalled;  /* killed by a signal (or membudget reported a killed child) */
    int oom_killed; /* ... by the cgroup's out-of-memory killer */
    double wall_s;
    struct rusage ru;
    double resident_start; /* fraction of the dataset in the page cache when it started */
    char last_err[512];
    /* JSON lines */
    tg_bench_epoch_t *ep;
    size_t nep, cap_ep;
    int have_final;
    double best_epoch, valid_acc, test_acc, final_peak_rss;
    double budget_rest; /* the final line's budget.rest: left for caches (NAN: not reported) */
    /* membudget's line: limit, peak (NAN when it printed "unknown"), oom_kill (-1: absent) */
    int have_cg;
    double cg_limit, cg_peak;
    int64_t cg_oom_kills;
    /* summary (NAN = n/a) */
    double s_epoch, s_first, s_sample, s_gather, s_train, s_wait, s_io_wait, s_io_req, s_read,
        s_need, s_amp, s_hit, s_peak_rss, s_kernel_read;
    double s_gather_bw;  /* effective gather bandwidth: needed bytes / gather seconds */
    uint64_t timed_from; /* 1-based first epoch of the means */
    /* the planner's steady epoch for the run's strategy with its default options (auto: its
     * choice): its profile measured in the bench's process before the runs, its device probe
     * again right before this run (a disk that slows under the runs before, as a cloud disk
     * out of burst credits does, would leave a probe of the bench's start stale); NAN: none (the
     * planner could not run, or the strategy has no cost model or cannot run on these inputs) */
    double predicted_s;
    /* that probe: random 4 KiB reads per second at its best depth, sequential bytes per
     * second (NAN: no probe) */
    double probe_iops, probe_seq;
} tg_bench_run_t;

/* Reads the run's JSON lines (stdout). */
int tg_bench_run_parse_stdout(tg_bench_run_t *r, const char *path);
/* Reads the run's stderr: its last line (not membudget's) and membudget's summary line. */
void tg_bench_run_parse_stderr(tg_bench_run_t *r, const char *path);
/* Records how the process ended (wait status, after both parses): exit code, a signal, and
 * whether the out-of-memory killer did it (oom_delta: the change of tg_bench_oom_kills over the
 * run, -1 unknown); the failure message says so first. */
void tg_bench_run_ended(tg_bench_run_t *r, int wait_status, int cgroup_on, int64_t oom_delta);
/* The summary columns: means over the timed epochs, peak RSS, kernel reads. */
void tg_bench_run_summarise(tg_bench_run_t *r);
/* "ok", "failed", "oom-killed", "killed", "incomplete" or "not run". */
const char *tg_bench_run_status(const tg_bench_run_t *r);
int tg_bench_run_ok(const tg_bench_run_t *r);

/* ================================================================ bounds (bounds.c) */

struct tg_bench_report;
/* The footprint's settings: the runs' sampling and model, epoch 2 when there are two or more. */
void tg_bench_footprint_opts(const tg_bench_opts_t *o, tg_bench_footprint_opts_t *fo);
/* The compute bound from c->fp's operation count and the GEMM rate measured now; NAN with
 * c->compute_note saying why when it cannot be had. */
void tg_bench_compute_bound(struct tg_bench_report *c, tg_bench_bounds_t *bd);
/* The Belady bound after the runs: the cache size from their budgets, the epoch's trace sampled
 * again, the simulator; NAN with c->belady_note saying why when it cannot be had. */
void tg_bench_belady_bound(struct tg_bench_report *c, tg_bench_bounds_t *bd,
                           const tg_bench_run_t *runs, int nruns);

/* ================================================================ reports (report.c) */

/* What the reports say besides the runs. Every pointer outlives the report calls. */
typedef struct tg_bench_report {
    const tg_bench_opts_t *o;
    const tg_dataset_t *ds;
    const tg_bench_footprint_t *fp;
    uint64_t fp_epoch; /* 0-based epoch the footprint sampled */
    const tg_io_probe_t *probe;
    int probe_ok;
    char probe_err[512];
    double lb_s, lb_cached_s;
    tg_bench_bounds_t *bd;
    char compute_note[512];             /* why there is no compute bound */
    char belady_note[512];              /* why there is no Belady bound */
    char cache_from[TG_BENCH_NAME_MAX]; /* the run whose budget gave the cache size; "": --mem */
    int cg_on;
    char cg_note[600]; /* why there is no cgroup limit */
    char membudget[4096];
    char exe[4096];
    char train_cmd[2048];
    char plan_note[512]; /* the planner's choice, or why there are no predictions */
} tg_bench_report_t;

int tg_bench_write_csv(const char *path, const tg_bench_run_t *runs, int nruns);
int tg_bench_write_json(const char *path, const tg_bench_report_t *c, const tg_bench_run_t *runs,
                        int nruns);
int tg_bench_write_md(const char *path, const tg_bench_report_t *c, const tg_bench_run_t *runs,
                      int nruns);
int tg_bench_write_svg(const char *path, const tg_bench_report_t *c, const tg_bench_run_t *runs,
                       int nruns);

#endif
