/* io-impl.h - seams shared by the files of io/: the file object, fault checks, ring set-up. */
#ifndef TIERGNN_IO_IMPL_H
#define TIERGNN_IO_IMPL_H

#include <liburing.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "tiergnn/io.h"

/* Staging slots are page aligned; files whose direct-I/O memory alignment is larger are refused
 * at submit (no known filesystem asks for more). */
#define TG_IO_STAGING_ALIGN 4096u

struct tg_io_file {
    int fd;
    int direct;     /* opened with O_DIRECT */
    unsigned align; /* offset, length and memory alignment of every disk read */
    uint64_t size;  /* at open */
    dev_t dev;      /* st_dev, for the probe cache */
    char *path;
};

/* Loads TIERGNN_IO_FAULT once per process; returns its parse status (0 when unset). */
int tg_io_fault_env_load(void);
/* Positive errno if a fault rule fails this disk read of [off, off + *len) of path, else 0; a
 * short-read rule returns 0 and lowers *len to the bytes the read may return (0: none, as at the
 * end of the file). Each call is one matching operation for the rule's after/count bookkeeping. */
int tg_io_fault_check_read(const char *path, uint64_t off, uint64_t *len);
/* Positive errno if a rule of kind op (OPEN or RING) fires for path (NULL for RING), else 0. */
int tg_io_fault_check_op(tg_io_fault_op_t op, const char *path);

/* io_uring_queue_init with the flags we like, honouring TG_IO_FAULT_RING rules. Returns 0 or
 * -errno (no message: callers decide whether it is a fallback or an error). */
int tg_io_ring_init(struct io_uring *ring, unsigned entries);
/* Logs "io_uring unavailable ... using pread" once per process. */
void tg_io_warn_ring_fallback(int err);

/* A queue counting into s went busy (enter = 1: its first read in flight) or idle (0): keeps
 * any_ns_, the union of the queues' busy times (stats.c). */
void tg_io_stats_edge(tg_io_stats_t *s, int enter);

#endif
