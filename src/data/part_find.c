/* data/part_find.c - which partition of a dataset to use (tiergnn/partition.h, tg_part_find):
 * with method AUTO, one that is already built and valid is preferred to building another. */
#include "tiergnn/partition.h"

int tg_part_find(const tg_dataset_t *ds, tg_part_assign_opts_t *o, char *buf, size_t len)
{
    if (o->method == TG_PART_AUTO) {
        const tg_part_method_t try[2] = {TG_PART_METIS, TG_PART_STREAM};
        for (int i = 0; i < 2; i++) {
            tg_part_t *p = NULL;
            int rc = tg_part_params(o, try[i], buf, len);
            if (rc == 0 && tg_part_open(&p, ds, buf) == 0) {
                tg_part_close(p);
                o->method = try[i];
                return 0;
            }
        }
        char why[256];
        o->method = tg_part_resolve(ds, o, why, sizeof why);
    }
    return tg_part_params(o, o->method, buf, len);
}
