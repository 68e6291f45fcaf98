/* Forward and backward of a model over packed training sequences.
 *
 * A batch packs whole sequences (prompt + completion) one after another as
 * rows; each sequence attends only to itself. The model is run to the
 * per-token log-probabilities of the completion tokens under
 * logits / temperature (and their entropies), and the backward takes
 * d(loss)/d(logp) per completion token and accumulates parameter gradients.
 *
 * Memory: every layer's activations are kept for the backward, or with
 * recompute only each layer's input (the rest is recomputed layer by layer
 * during the backward). The LM head runs over the completion rows in chunks
 * of TRAIN_HEAD_CHUNK, so a [tokens x vocab] logits tensor never exists
 * whole; its backward recomputes each chunk's logits and fuses the
 * log-softmax gradient into it. */
#ifndef GRPO_TRAINER_H
#define GRPO_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../model/lora.h"
#include "../model/model.h"
#include "../util/err.h"

enum { TRAIN_HEAD_CHUNK = 256 };

typedef enum {
    TRAINER_FULL,  /* every parameter gets a gradient */
    TRAINER_LORA,  /* only the adapter's A and B */
    TRAINER_INFER, /* forward only (a reference model): no gradients kept */
} trainer_mode;

/* Sequence s is rows start[s] .. start[s+1]-1, tokens at positions 0, 1, ...;
 * its first n_prompt[s] tokens are the prompt (n_prompt >= 1), the rest the
 * completion. Its completion tokens are "targets" numbered in order across
 * the batch: with target NULL all start[s+1]-start[s]-n_prompt[s] of them;
 * else only those whose row r has target[r] = 1 (a multi-turn completion's
 * policy tokens: its environment tokens are context, never predicted).
 * key[s] identifies the completion for LoRA dropout masks (NULL when
 * dropout is 0). routing, when not NULL, routes each row as the sampler did
 * (grpo-update --routing replay): per row of the batch its experts in every
 * layer with a mixture of experts, [rows][Lm][k] in routing_field.h's
 * order; a sequence's last row (never fed to the sampler) routes itself and
 * its ids are not read. Sequences of a group share their prompt's rows only
 * where their prompt's routing is the same too. */
typedef struct {
    int n_seqs;
    const int *start;
    const int *n_prompt;
    const int32_t *tokens;
    const uint64_t *key;
    const uint8_t *target; /* [rows], read at completion rows only; NULL = every completion token */
    const uint16_t *routing; /* NULL: every row its own top k */
    int routing_width;       /* ids per row of routing: Lm * k */
} train_batch;

/* Number of target tokens of a batch. */
int train_batch_targets(const train_batch *b);
/* Rows a forward of the batch computes: all of them, or with share each
 * shared prompt once (the prompt of a sequence equal to that of the last
 * sequence that kept its own, as trainer_forward shares them). */
int train_batch_rows(const train_batch *b, bool share);

typedef struct trainer_acts trainer_acts;

typedef struct {
    const model *m;
    /* the ops it runs on: model_backend(m) after trainer_init; a caller may
     * set another over the same memory (backend_cpu_bf16 for --compute bf16) */
    const backend *be;
    lora *lora; /* the adapter (TRAINER_LORA); NULL otherwise */
    trainer_mode mode;
    bool recompute;
    int max_rows, max_computed, max_len, max_targets;
    /* gradients: full fine-tuning in the model's layout (g.lm_head aliases
     * g.tok_embd when tied), or the adapter's layout in LoRA mode */
    float *grad;
    size_t n_grad;
    model_params g;
    float *grad_a[LORA_N_SETS], *grad_b[LORA_N_SETS];
    /* LoRA dropout masks are keyed by (seed, pass, layer, target, key, position) */
    uint64_t dropout_seed, dropout_pass;
    /* Sequences with the same prompt, one after another (a prompt group),
     * compute the prompt's rows once (layer.h's attn_share), except under
     * LoRA dropout; true turns that off (tests compare the two). */
    bool no_prompt_sharing;
    /* --group-sums: the gradient of each micro-batch folded into float64
     * sums (trainer_fold_grad), so that the step does not depend on how the
     * batch was split across ranks; NULL otherwise. Host memory only. */
    double *grad_sum;
    /* The router's load-balancing loss (grpo-update --router-aux-coef;
     * formats/loss.md), on a mixture of experts, 0 = off: trainer_backward
     * adds the gradient of balance_coef * sum over the batch's micro-batches
     * b and its L MoE layers l of (T_b / balance_tokens) (1/L) balance_{b,l}
     * (ops.h's moe_balance_backward over the micro-batch's T_b tokens, each
     * sequence's prompt counted in it), and adds that sum without the
     * coefficient to balance_sum. balance_tokens: the batch's tokens over
     * every rank, set by the caller. */
    double balance_coef, balance_tokens, balance_sum;
    trainer_acts *acts;
} trainer;

/* The backend of grpo-update --compute C: "f32" the model's, "bf16"
 * cpu_bf16 (backend_cpu_bf16(); NULL where the CPU lacks AVX-512 BF16:
 * EX_UNAVAILABLE, for this machine cannot run what was asked, however
 * well-formed). Anything else is EX_USAGE. A model on a device runs on its
 * device whatever C (its products are bf16 with float32 sums). */
int trainer_compute_backend(const char *compute, const model *m, const backend *cpu_bf16, const backend **be,
                            gerr *e);

/* Activations and gradients are in the memory of the model's backend
 * (model_backend(m): the host, or a device after model_to_backend), where
 * the ops run; logp, entropy and the backward's dlogp/dentropy stay the
 * caller's host arrays, copied to and from the device as needed. With
 * TRAINER_LORA on a device, l's factors (l->memory) must be in the device's
 * memory too. Sizes every buffer for batches of at most max_rows rows (of which at most
 * max_computed are computed, shared prompts counted once: train_batch_rows;
 * 0 = max_rows), max_len per sequence and max_targets completion tokens. l is the adapter for
 * TRAINER_LORA (it may also be given with TRAINER_INFER: then the adapter is
 * applied unless switched off per call). */
int trainer_init(trainer *t, const model *m, lora *l, trainer_mode mode, bool recompute, int max_rows,
                 int max_computed, int max_len, int max_targets, gerr *e);
void trainer_free(trainer *t);
/* Rows the last trainer_forward computed: the batch's, less the prompt rows
 * it shared (trainer.no_prompt_sharing). */
int trainer_rows(const trainer *t);
/* Bytes of activations, scratch and gradients (and grad_sum) the trainer holds. */
size_t trainer_bytes(const trainer *t);
/* Zeroes the gradient (and grad_sum). */
void trainer_zero_grad(trainer *t);
/* Allocates grad_sum (zeroed): on the host only (EX_USAGE on a device),
 * EX_SOFTWARE when the memory is not there. */
int trainer_keep_sums(trainer *t, gerr *e);
/* grad_sum += grad, then grad = 0: after each micro-batch's backward. */
void trainer_fold_grad(trainer *t);

/* The first failure of the passes since the last check: a device op's (its
 * backend's sync) or a copy's; 0 on the CPU, where nothing fails. logp and
 * entropy of a failed trainer_forward are not to be used. */
int trainer_check(trainer *t, gerr *e);

/* logp[targets] (and entropy[targets] when not NULL) of the batch's
 * completion tokens. keep: store what trainer_backward needs (not in
 * TRAINER_INFER). lora_off: run without the adapter (the reference of a LoRA
 * run, at no extra memory). */
void trainer_forward(trainer *t, const train_batch *b, float temperature, bool keep, bool lora_off, float *logp,
                     float *entropy);
/* After trainer_forward(keep) of the same batch: adds d(loss)/d(params) for
 * the given dlogp[targets] into the gradient buffer, and for dentropy[targets]
 * (d(loss)/d(entropy), with the forward's entropy[targets]) when not NULL. */
void trainer_backward(trainer *t, const train_batch *b, float temperature, const float *dlogp, const float *dentropy,
                      const float *entropy);

#endif
