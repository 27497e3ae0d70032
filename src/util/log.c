/* Logging and the progress bar. Both write to stderr so stdout stays clean for --json. */
#include "tiergnn/util.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int tg_level = TG_LOG_INFO;
/* Set once before threads start (a data-parallel rank's "rank R/K: "), read by every line. */
static const char *tg_prefix = "";

void tg_log_set_prefix(const char *prefix)
{
    tg_prefix = prefix ? prefix : "";
}

void tg_log_set_level(int level)
{
    atomic_store(&tg_level, level);
}

int tg_log_level(void)
{
    return atomic_load(&tg_level);
}

static void vlog(int level, const char *tag, const char *fmt, va_list ap)
{
    if (atomic_load(&tg_level) < level) return;
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s%s%s\n", tg_prefix, tag, line);
}

void tg_log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(TG_LOG_INFO, "", fmt, ap);
    va_end(ap);
}

void tg_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(TG_LOG_WARN, "warning: ", fmt, ap);
    va_end(ap);
}

void tg_log_debug(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(TG_LOG_DEBUG, "debug: ", fmt, ap);
    va_end(ap);
}

double tg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tg_progress_begin(tg_progress_t *p, const char *label, uint64_t total, const char *unit)
{
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->t_start = tg_now();
    p->t_last_draw = p->t_start;
    p->tty = isatty(STDERR_FILENO);
    p->last_decile = 0;
    p->active = tg_log_level() >= TG_LOG_INFO;
}

static void fmt_eta(double s, char *buf, size_t len)
{
    if (s < 0 || s > 1e7) {
        snprintf(buf, len, "--:--");
        return;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%02lu:%02lu", t / 60, t % 60);
}

static void draw(tg_progress_t *p, double now, int final)
{
    double el = now - p->t_start;
    double rate = el > 0 ? (double)p->done / el : 0;
    char eta[32];
    fmt_eta(final ? el : (rate > 0 ? (double)(p->total - TG_MIN(p->done, p->total)) / rate : -1),
            eta, sizeof eta);
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    if (frac > 1) frac = 1;
    const char *sep = p->suffix[0] ? " " : "";
    if (p->tty) {
        char bar[31];
        int fill = (int)(frac * 30);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r%s [%s] %5.1f%% %llu/%llu %s %.3g/s %s %s%s%s\033[K", p->label, bar,
                100 * frac, (unsigned long long)p->done, (unsigned long long)p->total, p->unit,
                rate, final ? "in" : "ETA", eta, sep, p->suffix);
        if (final) fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s: %5.1f%% %llu/%llu %s %.3g/s %s %s%s%s\n", p->label, 100 * frac,
                (unsigned long long)p->done, (unsigned long long)p->total, p->unit, rate,
                final ? "in" : "ETA", eta, sep, p->suffix);
    }
    fflush(stderr);
}

void tg_progress_update(tg_progress_t *p, uint64_t done, const char *suffix)
{
    p->done = done;
    if (suffix) snprintf(p->suffix, sizeof p->suffix, "%s", suffix);
    if (!p->active) return;
    double now = tg_now();
    if (p->tty) {
        if (now - p->t_last_draw < 0.1) return;
    } else {
        int decile = p->total ? (int)(10 * (double)done / (double)p->total) : 0;
        if (decile <= p->last_decile || now - p->t_last_draw < 10.0) return;
        p->last_decile = decile;
    }
    p->t_last_draw = now;
    draw(p, now, 0);
}

void tg_progress_end(tg_progress_t *p)
{
    if (!p->active) return;
    draw(p, tg_now(), 1);
    p->active = 0;
}
