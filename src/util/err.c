/* Thread-local error messages (see util.h for the error rule). */
#include "tiergnn/util.h"

#include <string.h>

static _Thread_local char tg_errbuf[1024];

int tg_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tg_errbuf, sizeof tg_errbuf, fmt, ap);
    va_end(ap);
    return code;
}

void tg_err_list_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len < cap) *len += (size_t)snprintf(buf + *len, cap - *len, "%s", *len ? "; " : "");
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    *len += (size_t)vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
}

int tg_err_prefix(int code, const char *fmt, ...)
{
    char pre[512], old[sizeof tg_errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, tg_errbuf, sizeof old);
    if (!old[0]) snprintf(old, sizeof old, "%s", strerror(code < 0 ? -code : code));
    /* Build "pre: old" by hand: the result is cut to the buffer size on purpose. */
    size_t n = strlen(pre);
    if (n > sizeof tg_errbuf - 3) n = sizeof tg_errbuf - 3;
    memcpy(tg_errbuf, pre, n);
    memcpy(tg_errbuf + n, ": ", 2);
    size_t m = strlen(old);
    if (m > sizeof tg_errbuf - n - 3) m = sizeof tg_errbuf - n - 3;
    memcpy(tg_errbuf + n + 2, old, m);
    tg_errbuf[n + 2 + m] = 0;
    return code;
}

const char *tg_errmsg(void)
{
    return tg_errbuf;
}

void tg_err_clear(void)
{
    tg_errbuf[0] = 0;
}

/* ---------------------------------------------------------------- first-error box */

void tg_errbox_init(tg_errbox_t *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
}

void tg_errbox_destroy(tg_errbox_t *b)
{
    pthread_mutex_destroy(&b->mu);
}

int tg_errbox_set(tg_errbox_t *b, int rc, const char *msg)
{
    int won = 0;
    if (!msg || !*msg) msg = tg_errbuf[0] ? tg_errbuf : strerror(rc < 0 ? -rc : rc);
    pthread_mutex_lock(&b->mu);
    if (!b->rc) {
        b->rc = rc < 0 ? rc : -EIO;
        snprintf(b->msg, sizeof b->msg, "%s", msg);
        __atomic_store_n(&b->failed, 1, __ATOMIC_RELEASE);
        won = 1;
    }
    pthread_mutex_unlock(&b->mu);
    return won;
}

int tg_errbox_failed(tg_errbox_t *b)
{
    return __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
}

int tg_errbox_raise(tg_errbox_t *b)
{
    pthread_mutex_lock(&b->mu);
    int rc = b->rc;
    if (rc) tg_err(rc, "%s", b->msg);
    pthread_mutex_unlock(&b->mu);
    return rc;
}
