/* grpo-update: a policy checkpoint and a batch of advantaged records in, the
 * next checkpoint out. Flags here; the work is in lib/train. */
#include "io/outpath.h"
#include "ops/blas.h"
#include "runner/device.h"
#include "train/update.h"
#include "util/err.h"
#include "util/flags.h"

int main(int argc, char **argv) {
    blas_ensure_fast_kernels(argv);
    update_opts o;
    update_opts_default(&o);
    update_run_opts *r = &o.run;
    /* the choices are the kind tables' that parse them; the ranges are
     * update_plan_resolve's (0, 0 here: a number is only parsed) */
    char losses[64], levels[32], is_levels[40], olds[40], routings[40], is_modes[32], optimizers[32], schedules[32], devices[32], computes[32], bases[32];
    const flag_spec flags[] = {
        {"--model", NULL, FLAG_STRING, &r->model, "M", "policy: HF directory, our checkpoint, or .gguf (required)", 0, 0, NULL},
        {"--out", NULL, FLAG_STRING, &r->out, "DIR",
         "the next checkpoint, written whole or not at all; may be --model, unless that is the KL reference "
         "(required)", 0, 0, NULL},
        {"--in", NULL, FLAG_STRING, &r->in, "F", "advantaged records (JSONL, plain or zstd; - = stdin)", 0, 0, NULL},
        {"--ref", NULL, FLAG_STRING, &r->ref, "M",
         "reference for the KL term (default: the run's initial model; with LoRA the base, adapter off)", 0, 0, NULL},
        {"--loss", NULL, FLAG_CHOICE, &o.choice.loss, "L", "grpo, bnpo, dr_grpo, dapo (the clipped surrogate and its aggregations), cispo or sapo "
         "(formats/loss.md)", 0, 0, FLAGS_CHOICES(losses, loss_kind_names)},
        {"--importance-level", NULL, FLAG_CHOICE, &o.choice.importance_level, "L", "token ratios, or one per sequence (GSPO)", 0,
         0, FLAGS_CHOICES(levels, loss_level_names)},
        {"--epsilon", NULL, FLAG_DOUBLE, &o.loss.epsilon_low, "E", "clip the ratio below at 1 - E (and above, see --epsilon-high)",
         0, 0, NULL},
        {"--epsilon-high", NULL, FLAG_DOUBLE, &o.loss.epsilon_high, "E", "clip above at 1 + E (negative: = --epsilon)", 0, 0,
         NULL},
        {"--beta", NULL, FLAG_DOUBLE, &o.loss.beta, "B", "weight of the k3 KL to the reference, 0 = no reference", 0, 0, NULL},
        {"--delta", NULL, FLAG_DOUBLE, &o.loss.delta, "D",
         "INTELLECT-2's two-sided clip: the ratio bounded by D where A < 0 (> 1 + --epsilon-high; 0 = off)", 0, 0,
         NULL},
        {"--sapo-tau-pos", NULL, FLAG_DOUBLE, &o.loss.tau_pos, "T", "--loss sapo: gate temperature for A > 0", 0, 0,
         NULL},
        {"--sapo-tau-neg", NULL, FLAG_DOUBLE, &o.loss.tau_neg, "T", "--loss sapo: gate temperature for A <= 0", 0, 0,
         NULL},
        {"--entropy-coef", NULL, FLAG_DOUBLE, &o.loss.entropy_coef, "C", "entropy bonus: C * H per loss token, subtracted",
         0, 0, NULL},
        {"--router-aux-coef", NULL, FLAG_DOUBLE, &o.loss.router_aux_coef, "C",
         "a mixture of experts' router load-balancing loss: C * the mean over its layers of E * sum_x f_x P_x "
         "(0 = off)", 0, 0, NULL},
        {"--top-entropy-quantile", NULL, FLAG_DOUBLE, &o.loss.top_entropy_quantile, "Q",
         "policy term only on the batch's top Q fraction of tokens by entropy (1 = all)", 0, 0, NULL},
        {"--off-policy-mask-threshold", NULL, FLAG_DOUBLE, &o.loss.off_policy_threshold, "X",
         "drop completions with A < 0 whose mean log(sampler/policy) exceeds X (negative = off)", 0, 0, NULL},
        {"--is-correction", NULL, FLAG_CHOICE, &o.choice.is_correction, "L",
         "weigh the policy term by pi_old/sampler per token or per completion (recomputes pi_old); auto: token "
         "when a record's sampler is not the float32 CPU engine, else none", 0, 0,
         FLAGS_CHOICES(is_levels, update_is_names)},
        {"--is-mode", NULL, FLAG_CHOICE, &o.choice.is_mode, "M", "weights above --is-cap: cut to it, or set to 0", 0, 0,
         FLAGS_CHOICES(is_modes, is_mode_names)},
        {"--is-cap", NULL, FLAG_DOUBLE, &o.loss.is_cap, "C", "cap of the sampler/trainer importance weight", 0, 0, NULL},
        {"--iterations", NULL, FLAG_INT, &r->iterations, "N", "optimizer steps over the batch (GRPO's mu)", 0, 0, NULL},
        {"--old-logp", NULL, FLAG_CHOICE, &o.choice.old_logp, "S",
         "pi_old: the records' logprobs, or recomputed by the policy before the first step; auto: recomputed when "
         "a record's sampler is not the float32 CPU engine (its \"sampler\" field)", 0, 0,
         FLAGS_CHOICES(olds, update_old_logp_names)},
        {"--routing", NULL, FLAG_CHOICE, &o.choice.routing, "R",
         "a mixture of experts: route each token as the sampler did (replay: the records' routing field) or "
         "by the trainer's own router (recompute); auto: replay when every record has routing, else recompute "
         "(formats/loss.md)", 0, 0, FLAGS_CHOICES(routings, update_routing_names)},
        {"--mask-truncated", NULL, FLAG_BOOL, &r->mask_truncated, NULL,
         "leave completions with finish_reason length out of the loss", 0, 0, NULL},
        {"--temperature", NULL, FLAG_DOUBLE, &r->temperature, "T",
         "log-probs under logits/T; must match the records' (negative: the records', else 1)", 0, 0, NULL},
        {"--max-new-tokens", NULL, FLAG_INT, &r->max_new_tokens, "N",
         "dr_grpo's divisor (0: the longest completion in the batch)", 0, 0, NULL},
        {"--optimizer", NULL, FLAG_CHOICE, &o.choice.optimizer, "O", "optimizer", 0, 0,
         FLAGS_CHOICES(optimizers, optim_kind_names)},
        {"--lr", NULL, FLAG_DOUBLE, &o.optim.lr, "X", "peak learning rate", 0, 0, NULL},
        {"--betas", NULL, FLAG_STRING, &o.betas, "B1,B2", "AdamW moment decays", 0, 0, NULL},
        {"--adam-eps", NULL, FLAG_DOUBLE, &o.optim.eps, "E", "AdamW denominator epsilon", 0, 0, NULL},
        {"--weight-decay", NULL, FLAG_DOUBLE, &o.optim.weight_decay, "W",
         "decoupled weight decay on weight matrices (not norms or biases)", 0, 0, NULL},
        {"--lr-schedule", NULL, FLAG_CHOICE, &o.choice.lr_schedule, "S", "learning-rate schedule over --total-steps", 0, 0,
         FLAGS_CHOICES(schedules, sched_kind_names)},
        {"--warmup-steps", NULL, FLAG_INT, &o.optim.warmup_steps, "N", "linear warmup from 0 over N steps", 0, 0, NULL},
        {"--total-steps", NULL, FLAG_INT, &o.optim.total_steps, "N", "end of the linear/cosine schedule", 0, 0, NULL},
        {"--max-grad-norm", NULL, FLAG_DOUBLE, &o.optim.max_grad_norm, "X", "clip the global gradient norm, 0 = off", 0,
         0, NULL},
        {"--micro-batch", NULL, FLAG_INT, &r->micro_batch, "N",
         "tokens per micro-batch (gradients accumulate; only float summation order depends on it)", 0, 0, NULL},
        {"--group-sums", NULL, FLAG_BOOL, &r->group_sums, NULL,
         "micro-batches within prompt groups, their gradients summed in float64: any number of MPI ranks, and any "
         "--micro-batch of at least a group's tokens, take the same step (on the CPU: auto picks it, cuda is "
         "refused; 8 more bytes per trained parameter)", 0, 0, NULL},
        {"--recompute", NULL, FLAG_BOOL, &r->recompute, NULL,
         "keep only each layer's input, recompute the rest in the backward (less memory, ~1/3 more compute)", 0, 0, NULL},
        {"--lora-r", NULL, FLAG_INT, &r->lora_r, "R", "train a LoRA adapter of rank R (0 = full fine-tuning)", 0, 0,
         NULL},
        {"--lora-alpha", NULL, FLAG_DOUBLE, &r->lora_alpha, "A", "LoRA scale numerator (0: 2 R)", 0, 0, NULL},
        {"--lora-dropout", NULL, FLAG_DOUBLE, &r->lora_dropout, "P",
         "dropout on the adapter's input while training (none on gpt-oss's experts, as in PEFT)", 0, 0, NULL},
        {"--lora-targets", NULL, FLAG_STRING, &o.lora_targets, "LIST",
         "projections that get an adapter (or all; on experts, each its own; gpt-oss's gate and up together, as "
         "PEFT's target_parameters); left out on a mixture of experts: q,k,v,o", 0, 0, NULL},
        {"--rslora", NULL, FLAG_BOOL, &r->rslora, NULL, "scale alpha/sqrt(R) instead of alpha/R", 0, 0, NULL},
        {"--metrics", NULL, FLAG_STRING, &r->metrics, "F", "append one JSON line per optimizer step (formats/metrics.md)",
         0, 0, NULL},
        {"--progress", NULL, FLAG_BOOL, &r->progress, NULL,
         "progress on stderr even when it is not a terminal: loading, the reference and old log-prob passes, "
         "each iteration's tokens/s, saving", 0, 0, NULL},
        {"--seed", NULL, FLAG_INT, &r->seed, "S", "LoRA init and dropout streams (default: the checkpoint's, else 0)", 0,
         0, NULL},
        {"--threads", NULL, FLAG_INT, &r->threads, "N",
         "CPU threads for OpenMP and OpenBLAS, 0 = every core (under MPI: the rank's cores, or its share of an "
         "unbound machine)", 0, 0, NULL},
        {"--zero", NULL, FLAG_INT, &r->zero, "N",
         "under mpirun/srun: 1 = ZeRO-1, each rank keeps 1/N of the AdamW state and updates its slice; 0 = every "
         "rank keeps it all", 0, 0, NULL},
        {"--device", NULL, FLAG_CHOICE, &r->device, "D",
         "where to train: cpu, cuda (an NVIDIA GPU: bf16 products with float32 sums, float32 master "
         "weights, gradients and AdamW state; under mpirun a GPU per rank, gradients summed over NCCL, no --zero; "
         "not yet run on a GPU; a mixture of experts without --router-aux-coef), or auto (the GPU when there is "
         "one)", 0, 0,
         FLAGS_CHOICES(devices, device_names)},
        {"--compute", NULL, FLAG_CHOICE, &r->compute, "C",
         "matrix products' operands: f32, or bf16 with float32 sums (CPUs with AVX-512 BF16; weights, gradients "
         "and AdamW state stay float32); auto: bf16 where the CPU has it, else f32; a checkpoint continues with its "
         "own", 0, 0, FLAGS_CHOICES(computes, update_compute_names)},
        {"--base-weights", NULL, FLAG_CHOICE, &r->base_weights, "F",
         "LoRA: the frozen base's layer matrices, embeddings and LM head (a mixture's experts each "
         "apart; its router stays f32) held in memory as f32, bf16, q8 (8-bit blocks) or q4k (GGUF Q4_K's 4-bit "
         "k-quant blocks), a GGUF's Q8_0 or Q4_K matrices as they are, other weights rounded once from their "
         "float32 values, or mxfp4 (a gpt-oss's MXFP4 experts kept as the file's blocks, never widened; its other "
         "matrices as the file holds them: bf16 as bf16, Q8_0 as its q8 blocks, else f32), their products on those "
         "blocks (the adapter, its gradients and AdamW state stay float32; full fine-tuning takes f32 only); with "
         "--device cuda the same blocks in device memory, each product on them expanded to bf16 (q8's and q4k's "
         "values rounded; not yet run on a GPU); auto: for LoRA the file's format (MXFP4 experts mxfp4, Q8_0 q8, "
         "Q4_K q4k, bf16 bf16, else f32), else f32; a checkpoint continues with its own", 0, 0,
         FLAGS_CHOICES(bases, update_base_weights_names)},
    };
    flag_parser p = {
        .usage = "grpo-update --model M --out DIR [--in F] [--lr X] [--loss L] [--beta B] [--lora-r R] [flags]",
        .summary = "One GRPO update: reads advantaged records (prompt_tokens, completion_tokens, logprobs,\n"
                   "advantage), computes the clipped surrogate loss with an optional k3 KL to a reference, takes\n"
                   "--iterations optimizer steps, and writes the next checkpoint (a Hugging Face directory plus\n"
                   "grpo/optimizer.safetensors and grpo/state.json) under a temporary name, renamed into place.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof *flags),
        .epilog = "Records with a null or missing advantage are skipped and counted. A multi-turn record's\n"
                  "completion_mask (1 = sampled by the policy, 0 = inserted by the environment) picks the tokens\n"
                  "trained on: environment tokens are context only (their logprobs may be null), and every\n"
                  "normaliser and length counts the policy's tokens; a mask of the wrong length or with values\n"
                  "other than 0/1, or a null logprob where it is 1, is an error (65). A batch sampled at another\n"
                  "temperature than --temperature is an error (65). --model may be an HF directory or a GGUF\n"
                  "(step 0, fresh optimizer) or our checkpoint (step, optimizer and RNG continue). The same\n"
                  "command on the same inputs writes the same bytes, so a killed run is simply run again.\n"
                  "Data-parallel: mpirun -np N grpo-update ... (or srun) splits the batch between N ranks by\n"
                  "prompt groups and sums the gradients (MPI_Allreduce): the same step as one process up to float\n"
                  "summation order. Every rank runs the same command; rank 0 writes. Without a launcher MPI is\n"
                  "never started (docs/many-machines.md).\n"
                  "Exit: 0 ok, 64 usage, 65 bad records or model, 66 missing input, 69 --compute bf16 on a CPU\n"
                  "without AVX-512 BF16 (the command is well-formed; this machine cannot run it), 73 cannot create\n"
                  "--out or --metrics (checked before any work), 74 I/O error.\n"
                  "example: grpo-update --model ckpt-0 --in batch.jsonl.zst --out ckpt-1 --lr 1e-5 --lora-r 16 "
                  "--metrics metrics.jsonl",
    };
    flags_parse(&p, argc, argv);
    r->seed_given = flags_given(&p, "--seed");
    r->lora_given = flags_given(&p, "--lora-r");
    r->lora_targets_given = flags_given(&p, "--lora-targets");
    r->compute_given = flags_given(&p, "--compute");
    r->base_weights_given = flags_given(&p, "--base-weights");
    update_plan plan;
    gerr e = {0};
    if (update_plan_resolve(&o, &plan, &e)) die_err(&e);
    const outpath_use uses[] = {{"--in", plan.run.in, OUTPATH_READ}, {"--metrics", plan.run.metrics, OUTPATH_INPLACE}};
    if (outpath_distinct(uses, 2, &e) || outpath_check(plan.run.out, OUTPATH_DIR, &e) ||
        outpath_check(plan.run.metrics, OUTPATH_APPEND, &e))
        die_err(&e);
    if (update_run(&plan, &e)) die_err(&e);
    return 0;
}
