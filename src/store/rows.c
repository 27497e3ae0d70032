/* Feature rows as the model sees them: raw rows of the file's dtype widened to f32 and, when
 * asked, L1-normalised (see "Row normalisation" in tiergnn/store.h). Every store, the feature
 * buffer and store/extract convert through here, so a row's numbers never depend on where it
 * came from. */
#include <math.h>
#include <string.h>

#include "tiergnn/data.h"
#include "tiergnn/store.h"

void tg_feat_normalize_rows(float *x, size_t n, size_t dim)
{
    for (size_t i = 0; i < n; i++) {
        float *r = x + i * dim;
        /* Sum in double: bag-of-words rows have thousands of entries. */
        double s = 0;
        for (size_t k = 0; k < dim; k++)
            s += fabs((double)r[k]);
        if (s == 0) continue;
        float inv = (float)(1.0 / s);
        for (size_t k = 0; k < dim; k++)
            r[k] *= inv;
    }
}

void tg_feat_rows_f32(float *dst, const void *src, size_t src_stride, size_t n, size_t dim,
                      tg_feat_dtype_t dtype, int normalize)
{
    size_t row = dim * tg_feat_dtype_size(dtype);
    if (!src_stride) src_stride = row;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *s = (const unsigned char *)src + i * src_stride;
        float *d = dst + i * dim;
        if (dtype == TG_F32) {
            if ((const void *)d != (const void *)s) memmove(d, s, row);
        } else {
            for (size_t k = 0; k < dim; k++) {
                uint16_t h;
                memcpy(&h, s + 2 * k, 2); /* rows may lie at odd multiples of 2 */
                d[k] = tg_f16_to_f32(h);
            }
        }
        if (normalize) tg_feat_normalize_rows(d, 1, dim);
    }
}
