/* Helpers shared by the tests that read feature files with io/ (test_featbuf_io, test_extract):
 * a known value per (node, column) and a raw features.bin-style file of N rows holding it. */
#ifndef TEST_FEAT_COMMON_H
#define TEST_FEAT_COMMON_H

#include <fcntl.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"

/* Feature value of (node, j): exact in f32 and in f16 (|x| < 1024, integer). */
static inline float tfeat_val(uint64_t node, size_t j)
{
    return (float)((node * 37 + j * 11) % 2001) - 1000.0f;
}

/* Writes dir/name: n rows of dim values of dtype, row v = tfeat_val(v, .). Returns the path
 * (malloc'd); exits on failure. */
static inline char *tfeat_write(const char *dir, const char *name, uint64_t n, uint32_t dim,
                                tg_feat_dtype_t dtype)
{
    size_t pl = strlen(dir) + strlen(name) + 2, es = tg_feat_dtype_size(dtype);
    char *path = malloc(pl);
    snprintf(path, pl, "%s/%s", dir, name);
    size_t row = dim * es;
    unsigned char *buf = malloc((size_t)n * row);
    for (uint64_t v = 0; v < n; v++)
        for (size_t j = 0; j < dim; j++) {
            if (dtype == TG_F32) {
                float x = tfeat_val(v, j);
                memcpy(buf + v * row + j * 4, &x, 4);
            } else {
                uint16_t h = tg_f32_to_f16(tfeat_val(v, j));
                memcpy(buf + v * row + j * 2, &h, 2);
            }
        }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || tg_pwrite_full(fd, buf, (size_t)n * row, 0, path) < 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    close(fd);
    free(buf);
    return path;
}

#endif
