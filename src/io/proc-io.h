/* io/proc-io.h - the process's own I/O as the kernel counts it: bytes read from storage
 * (/proc/self/io read_bytes), major page faults, and block-I/O delay when the kernel's delay
 * accounting is on. For reads the io/ layer does not see (the page faults of a mapped file). */
#ifndef TG_IO_PROC_IO_H
#define TG_IO_PROC_IO_H

#include <stdint.h>

typedef struct tg_proc_io {
    uint64_t read_bytes, major_faults;
    double blkio_s;
    int have_read_bytes, have_blkio; /* the kernel gave read_bytes; blkio_s */
} tg_proc_io_t;

/* The counters now (a field the kernel does not give stays 0, its have_ flag 0). */
void tg_proc_io_sample(tg_proc_io_t *s);

#endif
