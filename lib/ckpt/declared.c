/* Declared model sizes against the weights there are (declared.h). */
#include "declared.h"

#include <stdio.h>
#include <string.h>

double model_declared_values(const model_config *c) {
    double L = c->n_layers, d = c->dim, hd = c->head_dim, h = c->hidden_dim, V = c->vocab_size;
    double qd = (double)c->n_heads * hd, kvd = (double)c->n_kv_heads * hd, E = c->n_experts, I = c->moe_hidden_dim;
    double per_layer = 2 * d                                   /* attention and MLP norms */
                       + 2 * qd * d + 2 * kvd * d              /* wq, wo; wk, wv */
                       + (c->qkv_bias ? qd + 2 * kvd : 0)      /* biases */
                       + (c->qk_norm ? 2 * hd : 0);            /* per-head norms */
    double dense = 3 * h * d, moe = E * d + 3 * E * I * d;     /* gate, up, down; the router and experts' */
    double head = c->seq_cls ? (double)c->num_labels * d : c->tied_embeddings ? 0 : V * d;
    return V * d + L * per_layer + config_ffn_layers(c, false) * dense + config_ffn_layers(c, true) * moe + d + head;
}

int model_check_declared(const model_config *c, double held, const char *cfg_file, bool gguf, const char *weights,
                         gerr *e) {
    /* beyond twice what is there, a size is wrong; less, tensors are missing
     * and the loader names the first (after an allocation of a sane size) */
    double want = model_declared_values(c);
    if (want <= 2 * held) return 0;
    const char *a = model_arch_gguf(c->arch);
    char f[7][80];
    if (gguf) {
        snprintf(f[0], sizeof f[0], "%s.block_count %d", a, c->n_layers);
        snprintf(f[1], sizeof f[1], "%s.embedding_length %d", a, c->dim);
        snprintf(f[2], sizeof f[2], "%s.feed_forward_length %d", a, c->hidden_dim);
        snprintf(f[3], sizeof f[3], "%s.attention.head_count %d", a, c->n_heads);
        snprintf(f[4], sizeof f[4], "%s.attention.head_count_kv %d", a, c->n_kv_heads);
        snprintf(f[5], sizeof f[5], "%s.attention.key_length %d", a, c->head_dim);
        snprintf(f[6], sizeof f[6], "tokenizer.ggml.tokens %d", c->vocab_size);
    } else {
        snprintf(f[0], sizeof f[0], "num_hidden_layers %d", c->n_layers);
        snprintf(f[1], sizeof f[1], "hidden_size %d", c->dim);
        snprintf(f[2], sizeof f[2], "intermediate_size %d", c->hidden_dim);
        snprintf(f[3], sizeof f[3], "num_attention_heads %d", c->n_heads);
        snprintf(f[4], sizeof f[4], "num_key_value_heads %d", c->n_kv_heads);
        snprintf(f[5], sizeof f[5], "head_dim %d", c->head_dim);
        snprintf(f[6], sizeof f[6], "vocab_size %d", c->vocab_size);
    }
    return gerr_set(e, EX_DATAERR,
                    "%s: the sizes it declares (%s, %s, %s, %s, %s, %s, %s) need %.4g weights, and the tensors "
                    "of %s hold %.4g: a size field is wrong",
                    cfg_file, f[0], f[1], f[2], f[3], f[4], f[5], f[6], want, weights, held);
}

/* The weights tensor t holds: MXFP4 blocks (gpt-oss's NAME_blocks, uint8)
 * two a byte. */
static double st_values(const st_tensor *t) {
    size_t len = strlen(t->name);
    bool blocks = t->dtype == ST_U8 && len > 7 && !strcmp(t->name + len - 7, "_blocks");
    return (double)t->numel * (blocks ? 2 : 1);
}

int model_check_declared_st(const model_config *c, const st_file *files, int n, const char *dir, gerr *e) {
    double held = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < files[i].n_tensors; j++) held += st_values(&files[i].tensors[j]);
    char cfg[4200], weights[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    if (n == 1) snprintf(weights, sizeof weights, "%s", files[0].name);
    else snprintf(weights, sizeof weights, "the %d shards of %s/model.safetensors.index.json", n, dir);
    return model_check_declared(c, held, cfg, false, weights, e);
}

int model_check_declared_gguf(const model_config *c, const gguf_file *f, gerr *e) {
    double held = 0;
    for (size_t j = 0; j < f->n_tensors; j++) held += (double)f->tensors[j].numel;
    return model_check_declared(c, held, f->name, true, f->name, e);
}
