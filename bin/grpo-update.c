/* grpo-update: a policy checkpoint and a batch of advantaged records in, the
 * next checkpoint out. Flags here; the work is in lib/train. */
#include "io/outpath.h"
#include "ops/blas.h"
#include "train/update.h"
#include "util/err.h"
#include "util/flags.h"

int main(int argc, char **argv) {
    blas_ensure_fast_kernels(argv);
    update_opts o;
    update_opts_default(&o);
    const flag_spec flags[] = {
        {"--model", NULL, FLAG_STRING, &o.model, "M", "policy: HF directory, our checkpoint, or .gguf (required)", 0, 0, NULL},
        {"--out", NULL, FLAG_STRING, &o.out, "DIR",
         "the next checkpoint, written whole or not at all; may be --model, unless that is the KL reference "
         "(required)", 0, 0, NULL},
        {"--in", NULL, FLAG_STRING, &o.in, "F", "advantaged records (JSONL, plain or zstd; - = stdin)", 0, 0, NULL},
        {"--ref", NULL, FLAG_STRING, &o.ref, "M",
         "reference for the KL term (default: the run's initial model; with LoRA the base, adapter off)", 0, 0, NULL},
        {"--loss", NULL, FLAG_CHOICE, &o.loss, "L", "grpo, bnpo, dr_grpo, dapo (the clipped surrogate and its aggregations), cispo or sapo "
         "(formats/loss.md)", 0, 0,
         "grpo|bnpo|dr_grpo|dapo|cispo|sapo"},
        {"--importance-level", NULL, FLAG_CHOICE, &o.importance_level, "L", "token ratios, or one per sequence (GSPO)", 0,
         0, "token|sequence"},
        {"--epsilon", NULL, FLAG_DOUBLE, &o.epsilon, "E", "clip the ratio below at 1 - E (and above, see --epsilon-high)",
         0, 1, NULL},
        {"--epsilon-high", NULL, FLAG_DOUBLE, &o.epsilon_high, "E", "clip above at 1 + E (negative: = --epsilon)", -1, 100,
         NULL},
        {"--beta", NULL, FLAG_DOUBLE, &o.beta, "B", "weight of the k3 KL to the reference, 0 = no reference", 0, 1e6, NULL},
        {"--delta", NULL, FLAG_DOUBLE, &o.delta, "D",
         "INTELLECT-2's two-sided clip: the ratio bounded by D where A < 0 (> 1 + --epsilon-high; 0 = off)", 0, 1e6,
         NULL},
        {"--sapo-tau-pos", NULL, FLAG_DOUBLE, &o.sapo_tau_pos, "T", "--loss sapo: gate temperature for A > 0", 0, 1e6,
         NULL},
        {"--sapo-tau-neg", NULL, FLAG_DOUBLE, &o.sapo_tau_neg, "T", "--loss sapo: gate temperature for A <= 0", 0, 1e6,
         NULL},
        {"--entropy-coef", NULL, FLAG_DOUBLE, &o.entropy_coef, "C", "entropy bonus: C * H per loss token, subtracted",
         0, 1e6, NULL},
        {"--top-entropy-quantile", NULL, FLAG_DOUBLE, &o.top_entropy_quantile, "Q",
         "policy term only on the batch's top Q fraction of tokens by entropy (1 = all)", 0, 1, NULL},
        {"--off-policy-mask-threshold", NULL, FLAG_DOUBLE, &o.off_policy_mask_threshold, "X",
         "drop completions with A < 0 whose mean log(sampler/policy) exceeds X (negative = off)", -1, 1e6, NULL},
        {"--is-correction", NULL, FLAG_CHOICE, &o.is_correction, "L",
         "weigh the policy term by pi_old/sampler per token or per completion (recomputes pi_old)", 0, 0,
         "none|token|sequence"},
        {"--is-mode", NULL, FLAG_CHOICE, &o.is_mode, "M", "weights above --is-cap: cut to it, or set to 0", 0, 0,
         "truncate|mask"},
        {"--is-cap", NULL, FLAG_DOUBLE, &o.is_cap, "C", "cap of the sampler/trainer importance weight", 1, 1e6, NULL},
        {"--iterations", NULL, FLAG_INT, &o.iterations, "N", "optimizer steps over the batch (GRPO's mu)", 1, 1000000, NULL},
        {"--recompute-old", NULL, FLAG_BOOL, &o.recompute_old, NULL,
         "pi_old from the policy before the first step instead of the records' logprobs", 0, 0, NULL},
        {"--mask-truncated", NULL, FLAG_BOOL, &o.mask_truncated, NULL,
         "leave completions with finish_reason length out of the loss", 0, 0, NULL},
        {"--temperature", NULL, FLAG_DOUBLE, &o.temperature, "T",
         "log-probs under logits/T; must match the records' (negative: the records', else 1)", -1, 100, NULL},
        {"--max-new-tokens", NULL, FLAG_INT, &o.max_new_tokens, "N",
         "dr_grpo's divisor (0: the longest completion in the batch)", 0, 1 << 24, NULL},
        {"--optimizer", NULL, FLAG_CHOICE, &o.optimizer, "O", "optimizer", 0, 0, "adamw|sgd"},
        {"--lr", NULL, FLAG_DOUBLE, &o.optim.lr, "X", "peak learning rate", 0, 1e6, NULL},
        {"--betas", NULL, FLAG_STRING, &o.betas, "B1,B2", "AdamW moment decays", 0, 0, NULL},
        {"--adam-eps", NULL, FLAG_DOUBLE, &o.optim.eps, "E", "AdamW denominator epsilon", 0, 1, NULL},
        {"--weight-decay", NULL, FLAG_DOUBLE, &o.optim.weight_decay, "W",
         "decoupled weight decay on weight matrices (not norms or biases)", 0, 1e6, NULL},
        {"--lr-schedule", NULL, FLAG_CHOICE, &o.lr_schedule, "S", "learning-rate schedule over --total-steps", 0, 0,
         "constant|linear|cosine"},
        {"--warmup-steps", NULL, FLAG_INT, &o.optim.warmup_steps, "N", "linear warmup from 0 over N steps", 0, 1e12, NULL},
        {"--total-steps", NULL, FLAG_INT, &o.optim.total_steps, "N", "end of the linear/cosine schedule", 0, 1e12, NULL},
        {"--max-grad-norm", NULL, FLAG_DOUBLE, &o.optim.max_grad_norm, "X", "clip the global gradient norm, 0 = off", 0,
         1e12, NULL},
        {"--micro-batch", NULL, FLAG_INT, &o.micro_batch, "N",
         "tokens per micro-batch (gradients accumulate; only float summation order depends on it)", 1, 1 << 30, NULL},
        {"--group-sums", NULL, FLAG_BOOL, &o.group_sums, NULL,
         "micro-batches within prompt groups, their gradients summed in float64: any number of MPI ranks, and any "
         "--micro-batch of at least a group's tokens, take the same step (on the CPU: auto picks it, cuda is "
         "refused; 8 more bytes per trained parameter)", 0, 0, NULL},
        {"--recompute", NULL, FLAG_BOOL, &o.recompute, NULL,
         "keep only each layer's input, recompute the rest in the backward (less memory, ~1/3 more compute)", 0, 0, NULL},
        {"--lora-r", NULL, FLAG_INT, &o.lora_r, "R", "train a LoRA adapter of rank R (0 = full fine-tuning)", 0, 65536,
         NULL},
        {"--lora-alpha", NULL, FLAG_DOUBLE, &o.lora_alpha, "A", "LoRA scale numerator (0: 2 R)", 0, 1e9, NULL},
        {"--lora-dropout", NULL, FLAG_DOUBLE, &o.lora_dropout, "P", "dropout on the adapter's input while training", 0,
         0.99, NULL},
        {"--lora-targets", NULL, FLAG_STRING, &o.lora_targets, "LIST", "projections that get an adapter (or all)", 0, 0,
         NULL},
        {"--rslora", NULL, FLAG_BOOL, &o.rslora, NULL, "scale alpha/sqrt(R) instead of alpha/R", 0, 0, NULL},
        {"--metrics", NULL, FLAG_STRING, &o.metrics, "F", "append one JSON line per optimizer step (formats/metrics.md)",
         0, 0, NULL},
        {"--seed", NULL, FLAG_INT, &o.seed, "S", "LoRA init and dropout streams (default: the checkpoint's, else 0)", 0,
         1e18, NULL},
        {"--threads", NULL, FLAG_INT, &o.threads, "N",
         "CPU threads for OpenMP and OpenBLAS, 0 = every core (under MPI: the rank's cores, or its share of an "
         "unbound machine)", 0, 4096, NULL},
        {"--zero", NULL, FLAG_INT, &o.zero, "N",
         "under mpirun/srun: 1 = ZeRO-1, each rank keeps 1/N of the AdamW state and updates its slice; 0 = every "
         "rank keeps it all", 0, 1, NULL},
        {"--device", NULL, FLAG_CHOICE, &o.device, "D",
         "where to train: cpu, cuda (an NVIDIA GPU: bf16 products with float32 sums, float32 master "
         "weights, gradients and AdamW state; under mpirun a GPU per rank, gradients summed over NCCL, no --zero; "
         "not yet run on a GPU), or auto (the GPU when there is one)", 0, 0, "auto|cpu|cuda"},
        {"--compute", NULL, FLAG_CHOICE, &o.compute, "C",
         "matrix products' operands: f32, or bf16 with float32 sums (CPUs with AVX-512 BF16; weights, gradients "
         "and AdamW state stay float32); auto: bf16 where the CPU has it, else f32; a checkpoint continues with its "
         "own", 0, 0, "f32|bf16|auto"},
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
                  "never started. README \"Many machines\".\n"
                  "Exit: 0 ok, 64 usage, 65 bad records or model, 66 missing input, 69 --compute bf16 on a CPU\n"
                  "without AVX-512 BF16 (the command is well-formed; this machine cannot run it), 73 cannot create\n"
                  "--out or --metrics (checked before any work), 74 I/O error.\n"
                  "example: grpo-update --model ckpt-0 --in batch.jsonl.zst --out ckpt-1 --lr 1e-5 --lora-r 16 "
                  "--metrics metrics.jsonl",
    };
    flags_parse(&p, argc, argv);
    if (!o.model) die(EX_USAGE, "--model is required (see %s --help)", tool_name());
    if (!o.out) die(EX_USAGE, "--out is required (see %s --help)", tool_name());
    o.seed_given = flags_given(&p, "--seed");
    o.lora_given = flags_given(&p, "--lora-r");
    o.compute_given = flags_given(&p, "--compute");
    gerr e = {0};
    const outpath_use uses[] = {{"--in", o.in, OUTPATH_READ}, {"--metrics", o.metrics, OUTPATH_INPLACE}};
    if (outpath_distinct(uses, 2, &e) || outpath_check(o.out, OUTPATH_DIR, &e) ||
        outpath_check(o.metrics, OUTPATH_APPEND, &e))
        die_err(&e);
    if (update_run(&o, &e)) die_err(&e);
    return 0;
}
