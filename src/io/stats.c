/* I/O statistics: exact counters shared by every queue of a run, snapshot/take per epoch. */
#include "io-impl.h"

void tg_io_stats_init(tg_io_stats_t *s)
{
    atomic_init(&s->requests_, 0);
    atomic_init(&s->read_bytes_, 0);
    atomic_init(&s->need_bytes_, 0);
    atomic_init(&s->wait_ns_, 0);
    atomic_init(&s->depth_ns_, 0);
    atomic_init(&s->busy_ns_, 0);
    atomic_init(&s->any_ns_, 0);
    atomic_init(&s->any_lock_, 0);
    s->any_active_ = 0;
    s->any_since_ = 0;
}

void tg_io_stats_snapshot(tg_io_stats_t *s, tg_io_counts_t *out)
{
    out->io_requests = atomic_load(&s->requests_);
    out->io_read_bytes = atomic_load(&s->read_bytes_);
    out->io_needed_bytes = atomic_load(&s->need_bytes_);
    out->io_wait_s = 1e-9 * (double)atomic_load(&s->wait_ns_);
    out->io_depth_s = 1e-9 * (double)atomic_load(&s->depth_ns_);
    out->io_busy_s = 1e-9 * (double)atomic_load(&s->busy_ns_);
    out->io_any_s = 1e-9 * (double)atomic_load(&s->any_ns_);
}

void tg_io_stats_take(tg_io_stats_t *s, tg_io_counts_t *out)
{
    out->io_requests = atomic_exchange(&s->requests_, 0);
    out->io_read_bytes = atomic_exchange(&s->read_bytes_, 0);
    out->io_needed_bytes = atomic_exchange(&s->need_bytes_, 0);
    out->io_wait_s = 1e-9 * (double)atomic_exchange(&s->wait_ns_, 0);
    out->io_depth_s = 1e-9 * (double)atomic_exchange(&s->depth_ns_, 0);
    out->io_busy_s = 1e-9 * (double)atomic_exchange(&s->busy_ns_, 0);
    out->io_any_s = 1e-9 * (double)atomic_exchange(&s->any_ns_, 0);
}

void tg_io_stats_reset(tg_io_stats_t *s)
{
    tg_io_counts_t dummy;
    tg_io_stats_take(s, &dummy);
}

/* A queue of the sink went busy (enter = 1: its first read in flight) or idle (0). Called by
 * io/ on those edges only, a few times per batch of reads, so a spin lock costs nothing. */
void tg_io_stats_edge(tg_io_stats_t *s, int enter)
{
    uint32_t free_ = 0;
    while (!atomic_compare_exchange_weak(&s->any_lock_, &free_, 1))
        free_ = 0;
    double now = tg_now();
    if (enter) {
        if (s->any_active_++ == 0) s->any_since_ = now;
    } else if (s->any_active_ > 0 && --s->any_active_ == 0 && now > s->any_since_) {
        atomic_fetch_add(&s->any_ns_, (uint64_t)((now - s->any_since_) * 1e9));
    }
    atomic_store(&s->any_lock_, 0);
}
