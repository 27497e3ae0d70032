/* libFuzzer target for tg_meta_parse (meta.txt). Oracles: no crash/UB/leak; errors carry a
 * one-line message; whatever parses formats and parses back to the same struct. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    tg_meta_t m, m2;
    if (tg_meta_parse(&m, text, "fuzz/meta.txt") < 0) {
        const char *msg = tg_errmsg();
        if (!msg[0] || strchr(msg, '\n')) {
            fprintf(stderr, "bad error message: '%s'\n", msg);
            abort();
        }
        free(text);
        return 0;
    }
    char *again;
    if (tg_meta_format(&m, &again) < 0) abort();
    if (tg_meta_parse(&m2, again, "formatted") < 0) {
        fprintf(stderr, "formatted metadata does not parse: %s\n%s", tg_errmsg(), again);
        abort();
    }
    if (m.num_nodes != m2.num_nodes || m.num_edges != m2.num_edges || m.feat_dim != m2.feat_dim ||
        m.feat_dtype != m2.feat_dtype || m.index_dtype != m2.index_dtype ||
        m.num_classes != m2.num_classes || m.multi_label != m2.multi_label ||
        m.num_train != m2.num_train || m.num_valid != m2.num_valid || m.num_test != m2.num_test ||
        memcmp(m.files, m2.files, sizeof m.files)) {
        fprintf(stderr, "metadata changed in a format/parse round trip\n%s", again);
        abort();
    }
    free(again);
    free(text);
    return 0;
}
