/* libFuzzer target for the zip (.npz) reader and `import --from npz`: the input is the archive.
 *
 * Oracles: no crash/UB/leak; every failure carries a one-line message; a member read to its end
 * without an error has the CRC-32 the central directory records (checked here again with zlib's
 * crc32, independent of the reader's own check); an .npy member that opens reads every element;
 * an import that succeeds gives a dataset that verifies, and one that fails leaves no output. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/import-impl.h"
#include "fuzz_common.h"

#define MEMBER_CAP                                                                                 \
    (1u << 20) /* bytes read of one member (a small deflate stream may inflate to                  \
                  gigabytes: the reader streams it, the fuzzer need not) */

static void read_member(const tg_zip_t *z, const tg_zip_entry_t *e)
{
    tg_zip_rd_t r;
    if (tg_zip_rd_open(&r, z, e, 0) < 0) {
        fz_check_msg();
        return;
    }
    static uint8_t buf[4096];
    uLong crc = crc32(0, Z_NULL, 0);
    uint64_t left = e->usize, done = 0;
    int rc = 0;
    while (left > 0 && done < MEMBER_CAP) {
        size_t k = (size_t)(left < sizeof buf ? left : sizeof buf);
        if ((rc = tg_zip_rd_read(&r, buf, k)) < 0) break;
        crc = crc32(crc, buf, (uInt)k);
        left -= k;
        done += k;
    }
    if (rc < 0)
        fz_check_msg();
    else if (left == 0 && (uint32_t)crc != e->crc)
        fz_fail("a member read to its end without an error has another CRC-32");
    tg_zip_rd_close(&r);
}

static void read_array(const tg_zip_t *z, const tg_zip_entry_t *e)
{
    tg_npz_arr_t a;
    if (tg_npz_arr_open(&a, z, e->name) < 0) {
        fz_check_msg();
        return;
    }
    enum { CH = 4096 };
    static double d[CH];
    uint64_t n = a.f.count < MEMBER_CAP / 8 ? a.f.count : MEMBER_CAP / 8;
    for (uint64_t first = 0; first < n; first += CH) {
        size_t k = (size_t)(n - first < CH ? n - first : CH);
        if (tg_npy_read_f64(&a.f, first, k, d) < 0) {
            fz_check_msg();
            break;
        }
    }
    tg_npz_arr_close(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_path(0, "in.npz");
    fz_write(path, data, size);
    tg_zip_t z;
    if (tg_zip_open(&z, path) < 0) {
        fz_check_msg();
    } else {
        for (size_t i = 0; i < z.n && i < 16; i++) {
            read_member(&z, &z.e[i]);
            read_array(&z, &z.e[i]);
        }
        tg_zip_close(&z);
    }
    const char *out = fz_path(1, "out");
    tg_rmtree(out);
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_NPZ;
    o.src = path;
    o.mem_bytes = 16u << 20;
    o.overwrite = 1;
    if (tg_import(out, &o) < 0) {
        fz_check_msg();
        fz_check_no_output(out);
    } else if (tg_dataset_verify(out) < 0) {
        fz_fail("an imported archive does not verify");
    }
    tg_rmtree(out);
    tg_err_clear();
    return 0;
}
