/* The operations a transformer layer is built from, on the CPU: each op's
 * forward beside its backward, one file per family (llm.c style):
 *   norm.c       RMSNorm
 *   matmul.c     y = x W^T (+ b) and general sgemm (packed.c: the packed kernel)
 *   rope.c       rotary embeddings, GGUF's Q/K row order
 *   swiglu.c     silu(gate) * up
 *   softmax.c    softmax and log-sum-exp of rows: attention's and the LM head's
 *   attention.c  causal grouped-query attention over a KV view
 *   rows.c       residual adds, row gathers and scatters, LoRA dropout masks
 *   moe.c        mixture of experts: routing, the experts' weighted sum
 *   optim_step.c the optimizer's elementwise update
 * backend.h puts these behind one table; the layer (lib/model/layer.c) calls
 * them only through it, so another backend implements the same list.
 *
 * Every op reads its inputs and writes a separate output unless it says it
 * works in place; what a backward needs (RMSNorm's 1/rms, attention's
 * log-sum-exp) is kept through an optional pointer. Gradients of weights are
 * accumulated (+=) so micro-batches add up; gradients of activations are
 * written (=) unless a function says it accumulates.
 * Semantics are Hugging Face's (modeling_llama / qwen2 / qwen3) in fp32.
 * Matrices are row-major; a weight W is [out, in] as in HF, so y = x W^T. */
#ifndef GRPO_OPS_H
#define GRPO_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- RMSNorm (norm.c) -------------------------------------------------------- */
/* out[n, d] = x * rsqrt(mean(x^2) + eps) * w, row by row. rstd[n] (optional)
 * receives each row's 1/rms for the backward. out may alias x. */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps);
/* dx = rstd * (w*dy) - rstd^3/d * x * sum(w*dy*x); dw += sum_rows dy*x*rstd.
 * dx may alias dy. dw may be NULL (frozen). */
void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                      int n, int d);

/* ---- matrix products (matmul.c) ---------------------------------------------- */
/* C[M, N] = alpha op(A) op(B) + beta C, row-major, op = transpose when t*. */
void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc);
/* out[n, out_dim] = in[n, in_dim] @ w[out_dim, in_dim]^T (+ bias[out_dim]):
 * one sgemm over all rows, threaded by OpenBLAS (whose sums can change with
 * the thread count on some CPUs: AMD Zen seen). Call blas_setup_threads()
 * first. */
void matmul_forward(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                    int out_dim);
/* How weights packed once for inference are stored (grpo-rollout and the
 * rm reward's --weights): float32 panels (packed.h), bf16 panels
 * (packed_bf16.h), 8-bit blocks (packed_q8.h), MXFP4 blocks
 * (packed_mxfp4.h: taken from a file's blocks only, never rounded from
 * float32) or 4-bit k-quant blocks (packed_q4k.h: GGUF's Q4_K). */
typedef enum { WEIGHTS_F32, WEIGHTS_BF16, WEIGHTS_Q8, WEIGHTS_MXFP4, WEIGHTS_Q4K } weight_format;
/* Bytes of W [n, k] packed in format fmt, and the packing (packed_pack,
 * bf16w_pack, q8w_pack or q4kw_pack; dst must not overlap w). MXFP4 has no
 * packing from float32 (asserted): weights_pack_blocks. */
size_t weights_packed_bytes(weight_format fmt, int n, int k);
void weights_pack(weight_format fmt, void *dst, const float *w, int n, int k);
/* W [n, k] float32 from its q8 or q4k packing (q8w_unpack, q4kw_unpack):
 * the quantized values, exactly. */
void weights_unpack(weight_format fmt, float *dst, const void *src, int n, int k);
/* dst[n, k] = rows idx[0 .. n) of W [*, k] packed in fmt (bf16, q8 or
 * q4k), dequantized: each row the values bf16w_unpack, q8w_unpack or
 * q4kw_unpack give it, bit for bit (bf16w_unpack_row, q8w_unpack_row,
 * q4kw_unpack_row), with no float32 copy of W: a frozen base's embedding
 * lookup. OpenMP over rows. */
void gather_rows_packed(float *dst, const void *w_packed, weight_format fmt, const int32_t *idx, int n, int k);
/* Whether format fmt takes blocks of ggml type `type` (quant.h) as they
 * are: q8 takes Q8_0's (packed_q8.h), mxfp4 MXFP4's (packed_mxfp4.h), q4k
 * Q4_K's (packed_q4k.h); no other pair is taken. */
bool weights_takes_blocks(weight_format fmt, uint32_t type);
/* W [n, k] packed in format fmt straight from n rows of such blocks, none
 * rounded; weights_takes_blocks(fmt, the rows' type). scales NULL: GGUF's
 * rows, each block with its scale (q8w_pack_q8_0, mx4w_pack_gguf,
 * q4kw_pack_gguf); not
 * NULL (MXFP4 only): gpt-oss's Hugging Face codes [n, k/32, 16] with their
 * scales [n, k/32] apart (mx4w_pack_hf). For the Q8_0 quantizer's own
 * blocks the bytes are weights_pack's of the dequantized rows. */
void weights_pack_blocks(weight_format fmt, void *dst, const void *rows, const void *scales, int n, int k);
/* The same with w packed by weights_pack. */
void matmul_forward_packed(float *out, const float *in, const void *w_packed, weight_format fmt, const float *bias,
                           int n, int in_dim, int out_dim);
/* For training on a frozen base packed in fmt (bf16, q8, q4k or mxfp4;
 * packed_tile.h): out = in W^T (+ bias) with float32 activations
 * (q8w_matmul_f32, bf16w_matmul_f32, q4kw_matmul, mx4w_matmul), and din =
 * dout W (accumulated when accumulate, else written) on the same packed W
 * (q8w_matmul_t, bf16w_matmul_t, q4kw_matmul_t, mx4w_matmul_t), with no
 * float32 copy of W. */
void matmul_forward_frozen(float *out, const float *in, const void *w_packed, weight_format fmt, const float *bias,
                           int n, int in_dim, int out_dim);
void matmul_backward_frozen(float *din, const float *dout, const void *w_packed, weight_format fmt, int n, int in_dim,
                            int out_dim, bool accumulate);
/* din = dout W (accumulated when accumulate, else written; din NULL: not
 * wanted); dw += dout^T in (NULL: frozen); db += column sums of dout. */
void matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int n,
                     int in_dim, int out_dim, bool accumulate);

/* ---- rotary embeddings (rope.c) ---------------------------------------------- */
/* cos/sin[n, half] for positions pos[n]: the angle is the float32 product
 * pos * inv_freq (as HF computes it; lib/model/config.h's rope_inv_freq
 * makes inv_freq from a model's config), its cos and sin rounded to float. */
void rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos, int n);
/* Rotate-half RoPE in place over x[n, n_heads * head_dim], row r using
 * cos/sin row r: for i < h = head_dim/2,
 *   x'[i] = x[i] cos - x[i+h] sin,   x'[i+h] = x[i+h] cos + x[i] sin. */
void rope_forward(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim);
/* The inverse rotation: the gradient of rope_forward, in place. */
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim);
/* GGUF's llama-arch Q/K row order (llama.cpp's convert_hf_to_gguf.py
 * permute: rows viewed as [n_head, 2, head_dim/2] are swapped to
 * [n_head, head_dim/2, 2], so each rotated pair sits side by side).
 * qk_permute maps HF rows to GGUF rows, qk_unpermute back; each row has
 * n_cols values (1 for a bias). dst and src must not overlap. */
void qk_permute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols);
void qk_unpermute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols);
/* qk_unpermute of rows of row_bytes bytes of any encoding: a quantized row
 * of GGUF blocks moves whole, as its floats would. */
void qk_unpermute_rows(void *dst, const void *src, int n_head, int head_dim, size_t row_bytes);

/* ---- SwiGLU (swiglu.c) ------------------------------------------------------- */
/* out[i] = silu(gate[i]) * up[i]; out may alias gate. */
void swiglu_forward(float *out, const float *gate, const float *up, size_t n);
/* dg = dh * u * silu'(g), du = dh * silu(g). dg may alias dh; du must not. */
void swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n);
/* gpt-oss's clamped SwiGLU: with g' = min(g, limit), u' = clamp(u, -limit, limit),
 * out = g' sigmoid(alpha g') (u' + 1); out may alias gate. Its backward (the
 * clamps pass the gradient where g <= limit, |u| <= limit, as torch.clamp's). */
void swiglu_clamped_forward(float *out, const float *gate, const float *up, size_t n, float alpha, float limit);
void swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                             float alpha, float limit);

/* ---- softmax and log-sum-exp (softmax.c) -------------------------------------
 * One way to sum exponentials everywhere: vec_expf, float sums over blocks of
 * 256 added up in double. */
/* Softmax of x[n] in place (max shift); returns the log-sum-exp of x. */
float softmax_row(float *x, int n);
/* z[V] *= inv_t in place; returns log-sum-exp(z), and in *mean_z (when not
 * NULL) the mean of z under softmax(z), so the entropy is lse - mean_z. */
double logsumexp_row(float *z, int V, float inv_t, double *mean_z);
/* p[n] = exp(s - lse) in place: a softmax row again from its scores and
 * the log-sum-exp softmax_row returned (the attention backward). */
void softmax_recompute(float *p, int n, float lse);
/* The LM head's log-softmax over n rows of logits z[n, V] (scaled by inv_t
 * in place): logp[j] = z[j][tok[j]] - lse, entropy[j], lse_out[j], each
 * when not NULL. */
void head_logsoftmax(float *z, int n, int V, float inv_t, const int32_t *tok, float *logp, float *entropy,
                     float *lse_out);
/* Its backward: z[j] (the scaled logits of the forward, with lse[j]) becomes
 * d(loss)/d(logits) for d(loss)/d(logp[j]) = dlogp[j]:
 * (onehot(tok) - softmax) * dlogp / T. With dentropy (and the forward's
 * entropy[j]) not NULL, d(loss)/d(H_j) = dentropy[j] adds
 * -p (log p + H) * dentropy / T. */
void head_logsoftmax_backward(float *z, int n, int V, float inv_t, const int32_t *tok, const float *dlogp,
                              const float *lse, const float *dentropy, const float *entropy);

/* ---- attention (attention.c) -------------------------------------------------- */
/* Rows of one sequence at consecutive positions are attended to in tiles of
 * this many rows (two sgemm per tile and KV head) when there are at least
 * ATT_MIN_ROWS of them; other rows go one by one. */
enum { ATT_TILE = 64, ATT_MIN_ROWS = 8 };

/* The heads attention runs over: n_heads query heads of head_dim values,
 * in groups over n_kv_heads key/value heads (a model's: lib/model/model.h's
 * model_attn_shape), and gpt-oss's options (zero: none):
 *   window: a row at position P attends to keys P - window + 1 .. P only
 *     (HF's sliding_window: kv_idx > q_idx - window);
 *   sinks[n_heads]: a logit per head that joins each row's softmax and
 *     takes its share of the probability but has no value:
 *     p_t = exp(s_t - L), L = log(exp(sink) + sum_t exp(s_t)), out = sum_t p_t v_t;
 *     lse is then L. In the backend's memory, as the weights are;
 *   scale: the scores' factor in place of 1/sqrt(head_dim) (YaRN's). */
typedef struct {
    int n_heads, n_kv_heads, head_dim;
    int window;
    const float *sinks;
    float scale; /* each score's factor; 0: 1/sqrt(head_dim) */
} attn_shape;

/* The key/value head a query head reads under grouped-query attention (HF's
 * repeat_kv): query heads g*G .. g*G+G-1, G = n_heads / n_kv_heads, share
 * KV head g, and the attention ops run them together. */
static inline int gqa_kv_head(int h, int n_heads, int n_kv_heads) { return h / (n_heads / n_kv_heads); }

/* The element type of cached keys and values: fp32, or bf16 (half the bytes
 * a decode step reads; rounded to nearest even when written, widened
 * exactly when read, so attention over it is attention over K and V
 * rounded to bf16). */
typedef enum { KV_F32 = 0, KV_BF16 = 1 } kv_format;
/* Whether this CPU runs attention's SIMD kernels over a bf16 cache (AVX-512
 * F/BW/VL, or AVX2 with FMA). Without them the portable kernels give the
 * same bits several times slower than the fp32 cache: choose KV_BF16 only
 * where true. */
bool attn_bf16_simd_supported(void);

/* Where row r's keys and values are: position t of its sequence is at
 * k + row_kv[r] + t * kv_dim (and likewise v), in elements of fmt (k when
 * KV_F32, k_bf16 when KV_BF16). A KV cache and a training batch's own K/V
 * (KV_F32) both read this way. */
typedef struct {
    union { float *k; uint16_t *k_bf16; };
    union { float *v; uint16_t *v_bf16; };
    const size_t *row_kv;
    int kv_dim;
    kv_format fmt;
} kv_view;

/* Per-thread scratch of the attention ops; n_threads is the pool they run on
 * (the regions ask for exactly that many threads, so a larger pool later
 * cannot outrun the buffers). */
typedef struct {
    float *buf;
    size_t stride; /* floats per thread */
    int n_threads;
    int *tasks; /* [max_rows * n_kv_heads * 3] */
    bool portable_kernels; /* tests: a decode row runs the portable kernels even where SIMD ones run */
} attn_workspace;

/* Floats per thread for sequences up to max_len positions. */
size_t attn_workspace_floats(attn_shape sh, int max_len);

/* out[n, n_heads*hd]: row r (query q[r], position pos[r]) attends over
 * positions 0..pos[r] of its sequence in kv. lse[n, n_heads] (optional)
 * receives each row's log-sum-exp for the backward. A KV_BF16 view: tiles
 * widen their keys and values to fp32 and run as over fp32; single rows
 * read bf16 directly (AVX-512 when the CPU has it, else portable code with
 * the same bits: fmaf in 16 lanes and one fixed order of sums). */
void attention_forward(float *out, float *lse, const float *q, const kv_view *kv, const int *pos, int n,
                       attn_shape sh, attn_workspace *ws);
/* The backward over a training batch: sequence s is rows start[s] ..
 * start[s+1]-1 at positions 0, 1, ..., k/v [R, kv_dim] the batch's own.
 * Writes dq, dk, dv from dout and the forward's q, k, v, out and lse,
 * recomputing the scores tile by tile (flash-attention's scheme). */
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                        const float *q, const float *k, const float *v, int n_seqs, const int *start,
                        attn_shape sh, attn_workspace *ws);
/* The sinks' gradient: dsinks[h] += -sum_r exp(sinks[h] - lse[r,h]) (out[r,h] . dout[r,h])
 * over n rows ([n, n_heads*hd] out and dout, [n, n_heads] lse): the sink's
 * probability times its score's gradient, its value being zero. */
void attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse, const float *sinks,
                              int n, int n_heads, int hd);
/* Writes rows' K and V into the cache view (row r at position pos[r]),
 * rounded to nearest even when the view is KV_BF16. */
void kv_write(const kv_view *kv, const float *k, const float *v, const int *pos, int n);

/* ---- rows (rows.c) ----------------------------------------------------------- */
/* x[n] += y[n]. */
void add_inplace(float *x, const float *y, size_t n);
/* dst[i] = src[idx[i]] for n rows of d (embedding lookup, picking rows). */
void gather_rows(float *dst, const float *src, const int32_t *idx, int n, int d);
/* dst[idx[i]] += src[i] (their backward). Rows of idx may repeat. */
void scatter_add_rows(float *dst, const float *src, const int32_t *idx, int n, int d);
/* Inverted dropout of x[n_rows, n] in place: element (r, c) is zeroed when
 * Philox(counter {c/4, key[r] low, key[r] high, pos[r]}, stream_key) word
 * c%4 is below p * 2^32, else scaled by 1/(1-p). The mask depends only on
 * the keys, so a backward regenerates it. */
void dropout_rows(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                  const uint32_t stream_key[2], double p);

/* ---- mixture of experts (moe.c) -----------------------------------------------
 * Each of n tokens goes to k of E experts (lib/model/layer.h has the block).
 * A token's k choices are its "assignments" a = r*k + j; the experts run
 * over the assignments grouped by expert ("slots", moe_group). */
/* probs[n, E] = softmax(logits[n, E]) row by row (kept for the backward;
 * probs may be logits);
 * sel[n, k] the k most probable experts, most probable first (the lower
 * index among equals); w[n, k] their probabilities, divided by their sum
 * when norm (Qwen3-MoE's norm_topk_prob; gpt-oss's softmax over the k
 * selected logits is the same function, exp(z_j) / sum_{i in sel} exp(z_i)). */
void moe_route_forward(float *probs, int32_t *sel, float *w, const float *logits, int n, int n_experts, int k,
                       bool norm);
/* The same with the experts given: row r goes to replay[r*k .. r*k+k-1]
 * (a host array; the sampler's choice, grpo-update --routing replay) in
 * that order, with their probabilities as weights, renormalised when norm,
 * copied into sel; a row whose replay[r*k] is negative chooses its own k
 * as moe_route_forward does. The same numbers as moe_route_forward where
 * replay holds the experts it would choose; moe_route_backward is the
 * backward of both. */
void moe_route_replay_forward(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay, int n,
                              int n_experts, int k, bool norm);
/* dlogits[n, E] (written) from dw[n, k] = d(loss)/d(w), through the
 * renormalisation and the softmax; the choice of sel is not differentiated. */
void moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel, const float *w, int n,
                        int n_experts, int k, bool norm);
/* The router's load-balancing loss of one layer over n tokens, token r
 * counted mult[r] times (NULL: once each; T = sum mult):
 *   f_x = (1/T) sum_r mult_r [x in sel_r],  P_x = (1/T) sum_r mult_r probs_r[x],
 *   balance = E sum_x f_x P_x  (k when the routing is uniform),
 * returned; d(scale * T * balance)/d(probs_r[x]) = scale * E f_x mult_r is
 * taken back through each row's softmax and added to dlogits[n, E]. f is
 * not differentiated (the choice is not). */
double moe_balance_backward(float *dlogits, const float *probs, const int32_t *sel, const float *mult, int n,
                            int n_experts, int k, double scale);
/* out[r] = sum_j w[r*k+j] * ye[slot[r*k+j]] over d columns (written):
 * ye holds the experts' outputs by slot. */
void moe_combine_forward(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d);
/* Its backward: dye[slot[a]] = w[a] * dout[r] (written, every slot once)
 * and dw[a] = dout[r] . ye[slot[a]] (written; dw NULL: not wanted). */
void moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                          const int32_t *slot, int n, int k, int d);
/* Host bookkeeping (no backend op; the index arrays the ops take): the
 * assignments sel[n*k] grouped by expert, in assignment order within one:
 * slot_of[a] the slot of assignment a, row_of[slot] its token,
 * offsets[E+1] where each expert's slots start. */
void moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, const int32_t *sel, int n, int k, int n_experts);

/* ---- the optimizer's update (optim_step.c) ------------------------------------ */
/* torch.optim.AdamW's single-tensor step in float32 with the step constants
 * computed by the caller in double and rounded once (optim.c). keep is
 * 1 - lr * weight_decay, or 1 without decay. */
typedef struct {
    float keep, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step, bias2_sqrt, eps;
} adamw_consts;
void adamw_update(const adamw_consts *k, float *param, const float *grad, float *m, float *v, size_t n);
/* p = p * keep - lr * g. */
void sgd_update(float keep, float neg_lr, float *param, const float *grad, size_t n);

#endif
