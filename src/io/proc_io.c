/* The process's own I/O counters from the kernel (io/proc-io.h). */
#include "proc-io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void tg_proc_io_sample(tg_proc_io_t *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen("/proc/self/io", "r");
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "read_bytes:", 11)) {
                s->read_bytes = strtoull(line + 11, NULL, 10);
                s->have_read_bytes = 1;
            }
        fclose(f);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) s->major_faults = (uint64_t)ru.ru_majflt;
    /* Field 42 of /proc/self/stat: aggregated block I/O delays in clock ticks. It stays 0 unless
     * the kernel's delay accounting is on (kernel.task_delayacct), so it only counts then. */
    int on = 0;
    f = fopen("/proc/sys/kernel/task_delayacct", "r");
    if (f) {
        on = fgetc(f) == '1';
        fclose(f);
    }
    if (!on) return;
    f = fopen("/proc/self/stat", "r");
    if (!f) return;
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces: count after it */
    if (!p) return;
    int field = 2;
    for (char *q = p + 1; *q; q++)
        if (*q == ' ' && ++field == 42) {
            s->blkio_s = (double)strtoull(q + 1, NULL, 10) / (double)sysconf(_SC_CLK_TCK);
            s->have_blkio = 1;
            break;
        }
}
