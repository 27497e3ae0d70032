/* libFuzzer target for the .npy reader: header parsing, size checks and conversions.
 * Oracles: no crash/UB/leak; an accepted header describes exactly the bytes that follow it;
 * every element reads in every conversion; errors carry a one-line message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/import-impl.h"

static void check_msg(void)
{
    const char *m = tg_errmsg();
    if (!m[0] || strchr(m, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", m);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tg_npy_t f;
    if (tg_npy_open_mem(&f, data, size, "fuzz.npy") < 0) {
        check_msg();
        return 0;
    }
    if (f.data_off + f.count * f.itemsize != size) abort();
    enum { CH = 4096 };
    static double d[CH];
    static float fl[CH];
    static int64_t iv[CH];
    for (uint64_t first = 0; first < f.count; first += CH) {
        size_t k = (size_t)(f.count - first < CH ? f.count - first : CH);
        if (tg_npy_read_f64(&f, first, k, d) < 0 || tg_npy_read_f32(&f, first, k, fl) < 0) abort();
        if (tg_npy_read_i64(&f, first, k, iv) < 0) check_msg();
    }
    tg_npy_expect_dtype(&f, TG_NPY_KIND_FLOAT, "features");
    tg_npy_close(&f);
    tg_err_clear();
    return 0;
}
