/* The gather pass (engine-impl.h): a pass on the pipeline whose sampler threads gather each
 * batch's rows right after sampling, for strategies whose rows are at hand in RAM or mapped;
 * the process's own I/O over the pass stands for the reads the io/ layer does not see. */
#include "engine-impl.h"
#include "pipeline.h"

void tg_proc_io_delta(const tg_proc_io_t *a, const tg_proc_io_t *b, tg_pass_stats_t *st)
{
    if (!a->have_read_bytes || !b->have_read_bytes) return;
    st->have_io = 1;
    st->io_read_bytes = b->read_bytes - a->read_bytes;
    /* Without readahead (MADV_RANDOM) each major fault reads one page: one request. */
    st->io_requests = b->major_faults - a->major_faults;
    if (a->have_blkio && b->have_blkio) {
        st->have_io_wait = 1;
        st->io_wait_s = b->blkio_s - a->blkio_s;
    }
}

int tg_gather_pass_in_flight(int sampler_threads, size_t prefetch)
{
    /* each sampler thread: prefetch queued + one gathered and waiting to be queued; the
     * trainer's (it frees it itself) */
    return TG_MAX(sampler_threads, 1) * (int)(prefetch + 1) + 1;
}

int tg_gather_pass(tg_run_t *r, const tg_pass_t *p, int sampler_threads, size_t prefetch,
                   tg_gather_fn gather, void *gctx, tg_pass_stats_t *st)
{
    tg_pipe_opts_t po = {.pass = p,
                         .adj = r->adj,
                         .dim = r->store->dim,
                         .sampler_threads = sampler_threads,
                         .prefetch = prefetch,
                         .gather = gather,
                         .gather_ctx = gctx,
                         .queue_depth = 1,
                         .in_order = 1};
    tg_proc_io_t a, b;
    tg_proc_io_sample(&a);
    int rc = tg_pipe_run(&po, st);
    tg_proc_io_sample(&b);
    tg_proc_io_delta(&a, &b, st);
    return rc;
}
