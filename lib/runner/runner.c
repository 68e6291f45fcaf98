#include "runner.h"

#include <string.h>

#include "../ckpt/load.h"
#include "../model/layer.h"
#include "weights.h"

static void free_model(model_runner *r) {
    model_free(&r->m);
    model_text_free(&r->mt);
}

/* On the CPU the weights packed as w asks as they load; on a device
 * backend the float32 weights and the MXFP4 experts w keeps (its on_device
 * plan), which model_to_backend copies. */
static int load_model(model_runner *r, const char *path, bool classifier, const backend *be, weight_choice w,
                      gerr *e) {
    if (be) w = (weight_choice){.fmt = w.fmt == WEIGHTS_MXFP4 ? WEIGHTS_MXFP4 : WEIGHTS_F32,
                                .keep_mxfp4 = w.keep_mxfp4, .on_device = true};
    return model_load_for_inference(&r->m, path, classifier, w, e);
}

int runner_open(model_runner *r, const char *path, bool classifier, gerr *e) {
    return runner_open_on(r, path, classifier, NULL, (weight_choice){.fmt = WEIGHTS_F32}, e);
}

int runner_open_on(model_runner *r, const char *path, bool classifier, const backend *be, weight_choice w,
                   gerr *e) {
    memset(r, 0, sizeof *r);
    int rc;
    if (classifier)
        rc = load_model(r, path, classifier, be, w, e);
    else
        rc = model_text_load(path, &r->mt, e);
    if (!rc) rc = classifier ? model_text_load(path, &r->mt, e) : load_model(r, path, classifier, be, w, e);
    if (!rc && be) rc = model_to_backend(&r->m, be, e);
    if (!rc && !be) r->kv_fmt = weights_kv_format(weights_computed_as(&r->m, w));
    if (!rc && tok_vocab_size(r->mt.tok) > (size_t)r->m.cfg.vocab_size)
        rc = gerr_set(e, EX_DATAERR, "%s: the tokenizer has %zu tokens but the model only %d embeddings", path,
                      tok_vocab_size(r->mt.tok), r->m.cfg.vocab_size);
    if (rc) free_model(r);
    return rc;
}

static int with_headroom(int n, int cap) {
    long long grown = (long long)n + n / 4;
    return grown < cap ? (int)grown : cap;
}

int runner_reserve(model_runner *r, int n_seqs, int max_len, size_t rows, gerr *e) {
    const model_config *cf = &r->m.cfg;
    const backend *on = r->m.dev ? r->m.dev->be : NULL;
    int rc;
    if (max_len > cf->max_seq_len) max_len = cf->max_seq_len;
    if (!r->cache_ready) {
        if ((rc = kv_cache_init_as(&r->cache, on, cf, n_seqs, max_len, r->kv_fmt, e))) return rc;
        r->cache_ready = true;
    } else if (max_len > r->cache.max_len) {
        if ((rc = kv_cache_grow(&r->cache, cf, with_headroom(max_len, cf->max_seq_len), e))) return rc;
    }
    if (rows > (size_t)1 << 30) return gerr_set(e, EX_USAGE, "%zu rows in one forward call", rows);
    if (!r->scratch_ready || (size_t)r->scratch.max_rows < rows || r->scratch.max_len < r->cache.max_len) {
        size_t have = r->scratch_ready ? (size_t)r->scratch.max_rows : 0;
        int want = rows <= have ? (int)have : have ? with_headroom((int)rows, 1 << 30) : (int)rows;
        if (r->scratch_ready) model_scratch_free(&r->scratch);
        r->scratch_ready = false;
        if ((rc = model_scratch_init_for(&r->scratch, &r->m, want, r->cache.max_len, e))) return rc;
        r->scratch_ready = true;
    }
    model_rows_reserve(&r->rows, (size_t)r->scratch.max_rows);
    return 0;
}

void runner_close(model_runner *r) {
    model_rows_free(&r->rows);
    if (r->cache_ready) kv_cache_free(&r->cache);
    if (r->scratch_ready) model_scratch_free(&r->scratch);
    free_model(r);
    memset(r, 0, sizeof *r);
}
