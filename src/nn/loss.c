/* Losses on the seeds' logits: log-softmax + cross-entropy (single-label) and sigmoid + binary
 * cross-entropy (multi-label), each with its gradient. Sequential on purpose: a batch has at
 * most a few thousand seeds x classes, and one thread keeps the sum order fixed. */
#include "nn/nn-impl.h"

int tg_loss_forward_backward(float *dlogits, const float *logits, const int32_t *labels, uint32_t n,
                             uint32_t C, int multi_label, tg_step_stats_t *stats)
{
    tg_step_stats_t st = {0};
    if (C == 0) return tg_err(-EINVAL, "loss: zero classes");
    /* Pass 1: validate labels and count the labelled entries (the mean's denominator). */
    uint64_t count = 0;
    if (!multi_label) {
        for (uint32_t i = 0; i < n; i++) {
            int32_t y = labels[i];
            if (y < -1 || y >= (int32_t)C)
                return tg_err(-EINVAL, "loss: label %d of seed %u is outside -1..%u", (int)y, i,
                              C - 1);
            count += y >= 0;
        }
    } else {
        for (size_t k = 0; k < (size_t)n * C; k++) {
            int32_t y = labels[k];
            if (y < -1 || y > 1)
                return tg_err(-EINVAL,
                              "loss: multi-label entry %d of seed %zu, label %zu is not -1, 0 or 1",
                              (int)y, k / C, k % C);
            count += y >= 0;
        }
    }
    double inv = count ? 1.0 / (double)count : 0.0;
    double total = 0.0;
    if (!multi_label) {
        for (uint32_t i = 0; i < n; i++) {
            const float *z = logits + (size_t)i * C;
            float *dz = dlogits ? dlogits + (size_t)i * C : NULL;
            int32_t y = labels[i];
            if (y < 0) {
                if (dz) memset(dz, 0, C * sizeof(float));
                continue;
            }
            /* log-softmax with the max subtracted; double accumulation keeps the check tight */
            float mx = z[0];
            uint32_t am = 0;
            for (uint32_t k = 1; k < C; k++)
                if (z[k] > mx) {
                    mx = z[k];
                    am = k;
                }
            double se = 0.0;
            for (uint32_t k = 0; k < C; k++)
                se += exp((double)z[k] - (double)mx);
            double lse = (double)mx + log(se);
            total += lse - (double)z[y];
            st.correct += am == (uint32_t)y;
            if (dz) {
                for (uint32_t k = 0; k < C; k++) {
                    double pk = exp((double)z[k] - lse);
                    dz[k] = (float)((pk - (k == (uint32_t)y ? 1.0 : 0.0)) * inv);
                }
            }
        }
    } else {
        for (size_t k = 0; k < (size_t)n * C; k++) {
            int32_t y = labels[k];
            if (y < 0) {
                if (dlogits) dlogits[k] = 0.0f;
                continue;
            }
            double z = logits[k];
            /* BCE with logits, stable: max(z, 0) - z y + log(1 + exp(-|z|)) */
            total += (z > 0 ? z : 0.0) - z * y + log1p(exp(-fabs(z)));
            int pred = z > 0;
            st.correct += pred == y;
            st.tp += pred && y;
            st.fp += pred && !y;
            st.fn += !pred && y;
            if (dlogits) {
                double s = 1.0 / (1.0 + exp(-z));
                dlogits[k] = (float)((s - y) * inv);
            }
        }
    }
    st.count = count;
    st.loss = total * inv;
    if (stats) *stats = st;
    if (!isfinite(st.loss))
        return tg_err(-ERANGE, "loss is %s (diverged: lower the learning rate?)",
                      isnan(st.loss) ? "NaN" : "infinite");
    return 0;
}

int tg_loss_eval(const float *logits, const int32_t *labels, uint32_t n, uint32_t C,
                 int multi_label, tg_step_stats_t *stats)
{
    return tg_loss_forward_backward(NULL, logits, labels, n, C, multi_label, stats);
}
