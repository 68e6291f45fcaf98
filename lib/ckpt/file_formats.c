/* The formats a model file holds its matrices in (file_formats.h). */
#include "file_formats.h"

#include <stdlib.h>

void model_note_file_formats(model *m, tensor_format_fn of, const void *src) {
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    bool seen[MODEL_N_PARAMS] = {0};
    for (int i = 0; i < MODEL_N_PARAMS; i++) m->file_as[i] = WEIGHTS_F32;
    for (size_t i = 0; i < n; i++) {
        const model_tensor_ref *r = &refs[i];
        if (!r->cols || r->expert > 0) continue; /* a vector; an expert's layer is its first expert's */
        weight_format f = of(r, src);
        m->file_as[r->param] = !seen[r->param] || m->file_as[r->param] == f ? f : WEIGHTS_F32;
        seen[r->param] = true;
    }
    if (m->w.lm_head && m->w.lm_head == m->w.tok_embd) m->file_as[P_LM_HEAD] = m->file_as[P_TOK_EMBD];
    m->experts_mxfp4 = m->cfg.n_experts > 0;
    for (int p = P_EXP_GATE; p <= P_EXP_DOWN; p++) m->experts_mxfp4 &= m->file_as[p] == WEIGHTS_MXFP4;
    free(refs);
}
