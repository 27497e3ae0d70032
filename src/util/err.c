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
