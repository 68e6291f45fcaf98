# pipelines/grpo.mk: a whole GRPO run as make targets.
#
#   make -f pipelines/grpo.mk RUN=runs/x            train (the default goal: run)
#   make -f pipelines/grpo.mk RUN=runs/x eval       held-out evaluation (see EVAL_EVERY)
#   make -f pipelines/grpo.mk RUN=runs/x export     the final checkpoint for other tools
#
# RUN/config.mk holds the run's settings (make assignments of the variables
# below); variables on the command line override it. pipelines/README.md says
# the same in more words, with the Slurm recipe.
#
# Files (NNNN: four digits; step N trains checkpoint N into checkpoint N+1):
#   RUN/prompts.jsonl                  the prompt set (PROMPTS decompressed, or grpo-prep PREP_FLAGS)
#   RUN/steps/NNNN/prompts.jsonl       records N*P .. N*P+P-1 of the set, wrapping around
#   RUN/steps/NNNN/rollouts.jsonl.zst  K completions per prompt from checkpoint N
#   RUN/steps/NNNN/scored.jsonl.zst    the reward stage (grpo-reward REWARD_FLAGS, or REWARD)
#   RUN/steps/NNNN/batch.jsonl.zst     grpo-advantage; its --stats in stats.json
#   RUN/steps/NNNN/fill/RR/            FILL_NONFLAT=1: round RR's prompts, rollouts, scored records and
#                                      nonflat.ids (round 0 is the step's own files, its ids in nonflat.ids)
#   RUN/steps/NNNN/filled.jsonl.zst    FILL_NONFLAT=1: the P groups kept (grpo-advantage's input), the counts
#                                      in fill.json (pipelines/fill.sh)
#   RUN/steps/NNNN/metrics.jsonl       grpo-update's metrics line(s) for this step, with the reward
#                                      stage's per-function means from stats.json (rewards/NAME/mean, /std)
#   RUN/steps/NNNN/*.seconds, *.log    each stage's wall time and stderr
#   RUN/ckpt/NNNN/                     checkpoint N (N >= 1; checkpoint 0 is MODEL itself)
#   RUN/server/lora/NNNN/              SERVER_SYNC=lora: checkpoint N's adapter as PEFT (grpo-export --format
#                                      peft --dtype SERVER_DTYPE), which the server loads before a rollout of N
#   RUN/eval/NNNN.json                 $(GRPO_EVAL)'s line for checkpoint N
#   RUN/metrics.jsonl                  every step's metrics and eval line, in step order
#   RUN/settings/*                     each stage's settings; rewritten only when they change,
#                                      so a change re-runs that stage and what follows it
#   RUN/export/                        grpo-export's output (make export)
#   TENSORBOARD/events.out.tfevents.*  the metrics and eval lines as TensorBoard scalars, each step's
#                                      first completions as text (grpo-tensorboard; formats/tensorboard.md)
#
# Variables (default in brackets):
#   RUN               the run directory (required)
#   MODEL             the initial policy: HF directory, checkpoint or .gguf
#                     [$(GRPO_ROOT)/models/SmolLM2-135M-Instruct.Q4_1.gguf]
#   PROMPTS           a prompt file (JSONL, plain or .zst), prepared once, e.g. by grpo-prep [none]
#   TASK              grpo-prep's task when PROMPTS is empty [arith]
#   PREP_N            prompts grpo-prep makes when PROMPTS is empty [1000]
#   PREP_FLAGS        grpo-prep's flags when PROMPTS is empty
#                     [--task $(TASK) --n $(PREP_N) --split train --seed 1]
#   STEPS             GRPO steps [10]
#   PROMPTS_PER_STEP  prompts per step, P (at most the size of the set) [8]
#   K                 completions per prompt [8]
#   MAX_NEW_TOKENS    most tokens per completion [128]
#   TEMPERATURE       sampling temperature [1]
#   TOP_P, TOP_K, MIN_P  sampling filters [1, 0, 0]
#   ROLLOUT_FLAGS     more grpo-rollout flags (--stop, --batch, --threads, ...) [none]
#   ROLLOUT_SERVER    the URL of an inference server that samples instead (grpo-rollout --server;
#                     docs/servers.md); MODEL still gives the tokenizer [none]
#   SERVER_FLAGS      more grpo-rollout --server-* flags (--server-kind, --server-logprobs, ...) [none]
#   SERVER_SYNC       how checkpoint N reaches the server before step N's rollout: restart = SERVER_CMD
#                     is started serving its export in place of the server running (pipelines/server.sh);
#                     lora = a LoRA run's adapter: the rollout has the server (vLLM or SGLang, serving the
#                     base model, started by you; docs/servers.md) load checkpoint N's PEFT export in place
#                     under one name (grpo-rollout --server-lora) and asks for it; checkpoint 0, MODEL
#                     itself, is the server's model, asked for without an adapter (unless MODEL is an
#                     adapter checkpoint: its export); rollouts take turns on the server (a lock), as one
#                     name holds one adapter; none = the server serves what it serves (the records still
#                     say ckpt/N) [none]
#   SERVER_LORA_NAME  SERVER_SYNC=lora: the name the adapter is loaded under and asked for; runs that share
#                     a server need names of their own [grpo-rollout's --server-lora-name, grpo-policy]
#   SERVER_CMD        SERVER_SYNC=restart: the command (sh -c) that serves $$GRPO_SERVER_MODEL, the
#                     export, at ROLLOUT_SERVER [none]
#   SERVER_EXPORT     the export SERVER_CMD is given: gguf (a file) or hf (a directory) [gguf]
#   SERVER_DTYPE      its grpo-export --dtype (SERVER_SYNC=lora: the adapter's; f32, f16 or bf16) [f32]
#   SERVER_WAIT       seconds a started server has to answer GET /v1/models, else 69 [600]
#   SEED              step N samples with seed SHA-256("SEED/N") (56 bits); grpo-update --seed [1]
#   REWARD_FLAGS      grpo-reward's flags, judge settings included [--fn answer,format:0.2]
#   REWARD            a command replacing the whole reward stage: rollout records on stdin,
#                     scored records on stdout (python3 -u examples/my_reward.py; jq -c '...') [none]
#   ADVANTAGE_FLAGS   grpo-advantage's flags (--scale, --baseline, --drop-flat) [none]
#   FILL_NONFLAT      1: DAPO dynamic sampling: while fewer than PROMPTS_PER_STEP groups of the step
#                     have rewards that are not all equal (grpo-advantage ADVANTAGE_FLAGS --drop-flat),
#                     draw another round of PROMPTS_PER_STEP prompts (not yet drawn in this step, from a
#                     position drawn from SHA-256("SEED/NNNN/fill/RR/prompts")), at most FILL_ROUNDS rounds;
#                     the step trains on the first P non-flat groups (made up with flat ones only when
#                     the rounds run out); its metrics get fill/groups_drawn, fill/groups_dropped, ... [0]
#   FILL_ROUNDS       the most rounds of prompts a step draws with FILL_NONFLAT=1, its own included [4]
#   UPDATE_FLAGS      grpo-update's flags (--lr, --loss, --beta, --lora-r, ...) [--lr 1e-5 --beta 0.04]
#   UPDATE_LAUNCH     a launcher before grpo-update for a data-parallel update: mpirun -np 4,
#                     srun --mpi=pmix (pipelines/slurm/); not a setting of the run: the step is the
#                     same up to float rounding [none]
#   EVAL_EVERY        evaluate checkpoint 0, every N-th and the last during the run; 0 = only
#                     with make eval (checkpoint 0 and the last) [0]
#   EVAL_PROMPTS      held-out prompt file; empty: grpo-prep EVAL_PREP_FLAGS [none]
#   EVAL_N            held-out prompts grpo-prep makes [100]
#   EVAL_PREP_FLAGS   [PREP_FLAGS with --split test --n $(EVAL_N) in place of their --split, --n,
#                     --shard and --out: the same task, options and seed, the held-out ids; with
#                     PROMPTS set: --task $(TASK) --n $(EVAL_N) --split test --seed 1]
#   EVAL_TASK_DIFFERS 1: evaluate on another task than the training prompts' (otherwise make
#                     refuses a run whose held-out --task or records' task differs) [none]
#   EVAL_K            samples per held-out prompt [1]
#   EVAL_TEMPERATURE  the samples' temperature; empty: grpo-eval's (0 for one sample, else 1) [none]
#   EVAL_MAX_NEW_TOKENS  [$(MAX_NEW_TOKENS)]
#   EVAL_REWARD_FLAGS the evaluation's grpo-reward flags [$(REWARD_FLAGS)]
#   EVAL_ROLLOUT_FLAGS  more grpo-rollout flags for the evaluation (--stop ...; not --threads) [none]
#   EVAL_FLAGS        more flags of the evaluation script [none]
#   GRPO_EVAL         the evaluation script [$(GRPO_ROOT)/scripts/grpo-eval]
#   KEEP              keep only the last N checkpoints (0 = all) [0]
#   KEEP_RECORDS      0: delete a step's rollouts, scored and batch files once its
#                     checkpoint is written [1]
#   ASYNC             1: an off-policy run: step N samples with checkpoint N - MAX_STALENESS (0 for the
#                     first steps), so with make -j2 the rollout and reward of step N+1 run while the
#                     update of step N does; grpo-update recomputes pi_old and weighs the records by
#                     default for such batches (formats/loss.md) [0]
#   MAX_STALENESS     with ASYNC=1, how many steps older than the checkpoint trained the sampling
#                     one is (1 or more) [1]
#   SHARDS            rollout and reward run as N shards (make -j), merged in prompt order; above 1,
#                     OMP_WAIT_POLICY=passive is exported unless already set [1]
#   STEP              the step of the shard-I-of-N targets (Slurm) [none]
#   EXPORT_FORMAT     grpo-export formats for make export: hf, peft, gguf (several allowed) [hf]
#   EXPORT_DTYPE      grpo-export --dtype [auto]
#   GRPO_BIN          where the grpo tools are [$(GRPO_ROOT)/bin]
#   TENSORBOARD       TensorBoard log directory, brought up to date after each step and by
#                     make metrics; empty: none [$(RUN)/tb]
#   TENSORBOARD_SAMPLES  completions of each step's batch shown as text in TensorBoard [4]
#   WANDB_PROJECT     set (here or in the environment): log the metrics, eval lines and a table of each
#                     step's first WANDB_SAMPLES completions to Weights & Biases (scripts/grpo-wandb), after
#                     each step and by make metrics; WANDB_MODE=offline writes RUN/wandb/ only (wandb sync
#                     uploads it later); WANDB_ENTITY, WANDB_NAME as wandb reads them; WANDB_API_KEY from
#                     the environment only [none]
#   WANDB_SAMPLES     completions per step in the W&B table [4]
#   WANDB_PY          the Python that has the wandb package [$(GRPO_ROOT)/.venv/bin/python]
#   PROGRESS          1: a progress line per step (and per evaluation) on stderr [1]
#   V                 1: echo every command [0]

GRPO_ROOT := $(patsubst %/,%,$(dir $(abspath $(dir $(lastword $(MAKEFILE_LIST))))))
GRPO_MK_DIR := $(GRPO_ROOT)/pipelines

ifeq ($(strip $(RUN)),)
$(error RUN is not set: make -f pipelines/grpo.mk RUN=runs/NAME)
endif
override RUN := $(patsubst %/,%,$(RUN))
-include $(RUN)/config.mk

MODEL ?= $(GRPO_ROOT)/models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPTS ?=
TASK ?= arith
PREP_N ?= 1000
PREP_FLAGS ?= --task $(TASK) --n $(PREP_N) --split train --seed 1
STEPS ?= 10
PROMPTS_PER_STEP ?= 8
K ?= 8
MAX_NEW_TOKENS ?= 128
TEMPERATURE ?= 1
TOP_P ?= 1
TOP_K ?= 0
MIN_P ?= 0
ROLLOUT_FLAGS ?=
ROLLOUT_SERVER ?=
SERVER_FLAGS ?=
SERVER_SYNC ?= none
SERVER_LORA_NAME ?=
SERVER_CMD ?=
SERVER_EXPORT ?= gguf
SERVER_DTYPE ?= f32
SERVER_WAIT ?= 600
SEED ?= 1
REWARD_FLAGS ?= --fn answer,format:0.2
REWARD ?=
ADVANTAGE_FLAGS ?=
FILL_NONFLAT ?= 0
FILL_ROUNDS ?= 4
UPDATE_FLAGS ?= --lr 1e-5 --beta 0.04
UPDATE_LAUNCH ?=
EVAL_EVERY ?= 0
EVAL_PROMPTS ?=
EVAL_N ?= 100
EVAL_PREP_DERIVED := $(if $(filter undefined,$(origin EVAL_PREP_FLAGS)),1)
EVAL_PREP_FLAGS ?= $(if $(strip $(PROMPTS)),--task $(TASK) --n $(EVAL_N) --split test --seed 1,$(call held_out_of,$(PREP_FLAGS)))
EVAL_TASK_DIFFERS ?=
EVAL_K ?= 1
EVAL_TEMPERATURE ?=
EVAL_MAX_NEW_TOKENS ?= $(MAX_NEW_TOKENS)
EVAL_REWARD_FLAGS ?= $(REWARD_FLAGS)
EVAL_ROLLOUT_FLAGS ?=
EVAL_FLAGS ?=
GRPO_EVAL ?= $(GRPO_ROOT)/scripts/grpo-eval
KEEP ?= 0
KEEP_RECORDS ?= 1
SHARDS ?= 1
ASYNC ?= 0
MAX_STALENESS ?= 1
STEP ?=
EXPORT_FORMAT ?= hf
EXPORT_DTYPE ?= auto
GRPO_BIN ?= $(GRPO_ROOT)/bin
TENSORBOARD ?= $(RUN)/tb
TENSORBOARD_SAMPLES ?= 4
WANDB_PROJECT ?=
WANDB_SAMPLES ?= 4
WANDB_PY ?= $(GRPO_ROOT)/.venv/bin/python
# wandb reads its settings from the environment: those set in config.mk go there too (the API key
# is read from the environment only, so that it sits in no file)
$(foreach v,WANDB_PROJECT WANDB_MODE WANDB_ENTITY WANDB_NAME,$(if $(strip $($(v))),$(eval export $(v))))
PROGRESS ?= 1
V ?= 0
# Shards run side by side (make -j) on the same cores: OpenMP threads that spin while they wait
# would starve the other shard's (README, "Slow on a busy machine"), so they sleep instead, unless
# the environment or config.mk says otherwise.
ifneq ($(SHARDS),1)
OMP_WAIT_POLICY ?= passive
export OMP_WAIT_POLICY
endif

ifeq ($(filter 0 1,$(ASYNC)),)
$(error ASYNC=$(ASYNC): expected 0 or 1)
endif
ifeq ($(ASYNC),1)
ifeq ($(shell echo '$(MAX_STALENESS)' | grep -Ex '[1-9][0-9]{0,5}'),)
$(error MAX_STALENESS=$(MAX_STALENESS): expected a whole number of steps, 1 or more)
endif
endif

# ---- grpo-prep flags, read by make: "--name VALUE" and "--name=VALUE" alike
space := $(subst ,, )
# $(call joined,NAMES,FLAGS): FLAGS as words, each "NAME VALUE" of NAMES written NAME=VALUE
joined = $(strip $(if $(1),$(call joined,$(wordlist 2,$(words $(1)),$(1)),$(subst \
    $(space)$(firstword $(1))$(space),$(space)$(firstword $(1))=,$(space)$(strip $(2))$(space))),$(2)))
# $(call flag_value,NAME,FLAGS): the value of the last NAME in FLAGS
flag_value = $(patsubst $(1)=%,%,$(lastword $(filter $(1)=%,$(call joined,$(1),$(2)))))
# The held-out set of a training prep: its task, options and seed, the test split
# (disjoint from --split train: the split is a hash of each id), EVAL_N records.
HELD_OUT_DROP := --split --n -n --shard --out -o
held_out_of = $(filter-out $(addsuffix =%,$(HELD_OUT_DROP)),$(call joined,$(HELD_OUT_DROP),$(1))) \
    --split test --n $(EVAL_N)
# the task of a prompt file: its first record's
file_task = $(if $(wildcard $(1)),$(shell zstd -dcf $(call sq,$(1)) 2> /dev/null | head -n 1 | jq -r '.task // empty' 2> /dev/null))

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := run
endif
Q := $(if $(filter 1,$(V)),,@)

S := $(RUN)/settings
# A checkpoint prune.sh renamed to .NNNN.del and was killed before removing: the
# step that pruned is finished, so no recipe would run again to remove it.
$(if $(wildcard $(RUN)/ckpt/.[0-9]*.del),$(shell rm -rf $(RUN)/ckpt/.[0-9]*.del))
STEP_IDS := $(shell awk 'BEGIN { for (i = 0; i < $(STEPS) + 0; i++) printf "%04d ", i }')
LAST := $(shell awk 'BEGIN { printf "%04d", $(STEPS) + 0 }')
# checkpoints evaluated: 0, every EVAL_EVERY-th, the last
EVAL_IDS := $(sort $(shell awk 'BEGIN { e = $(EVAL_EVERY) + 0; printf "0000 %04d ", $(STEPS) + 0; \
    if (e > 0) for (i = e; i < $(STEPS) + 0; i += e) printf "%04d ", i }'))
SHARD_IDS := $(shell awk 'BEGIN { for (i = 0; i < $(SHARDS) + 0; i++) printf "%d ", i }')
SHARD_OF = $(1)-of-$(SHARDS)

# sq: one shell word, single-quoted
sq = '$(subst ','\'',$(1))'

# ---- the held-out set evaluates the task trained on: checked when an evaluation is
# wanted (EVAL_EVERY, make eval, or a file of one), before any work
EVAL_WANTED := $(or $(filter-out 0,$(EVAL_EVERY)),$(filter eval %/heldout.jsonl $(RUN)/eval/%,$(MAKECMDGOALS)))
ifneq ($(EVAL_WANTED),)
TRAIN_TASK := $(if $(strip $(PROMPTS)),$(call file_task,$(PROMPTS)),$(call flag_value,--task,$(PREP_FLAGS)))
EVAL_TASK := $(if $(strip $(EVAL_PROMPTS)),$(call file_task,$(EVAL_PROMPTS)),$(call flag_value,--task,$(EVAL_PREP_FLAGS)))
ifneq ($(and $(TRAIN_TASK),$(filter-out $(TRAIN_TASK),$(EVAL_TASK)),$(if $(filter 1,$(EVAL_TASK_DIFFERS)),,x)),)
$(error the held-out set is task $(EVAL_TASK) but training's is $(TRAIN_TASK): set EVAL_TASK_DIFFERS=1 if that is meant, else EVAL_PREP_FLAGS or EVAL_PROMPTS)
endif
ifneq ($(and $(EVAL_PREP_DERIVED),$(if $(strip $(PROMPTS) $(EVAL_PROMPTS)),,x),$(if $(filter train,$(call flag_value,--split,$(PREP_FLAGS))),,x)),)
$(error PREP_FLAGS has no --split train, so the held-out set made from them (--split test) would hold training prompts: add --split train, or set EVAL_PREP_FLAGS or EVAL_PROMPTS)
endif
endif

# ---- settings stamps: each file holds a stage's settings and is rewritten only
# when they change, so its mtime re-runs that stage and everything after it.
$(shell mkdir -p $(RUN)/settings)
streq = $(and $(findstring x$(1),x$(2)),$(findstring x$(2),x$(1)))
# $(call setting,NAME,VALUE): RUN/settings/NAME holds VALUE. Written only when it
# differs; a write cut short by a kill differs from every value, so it is
# written again at the next run (which re-runs the stage, as it had to anyway).
setting = $(if $(and $(wildcard $(S)/$(1)),$(call streq,$(file <$(S)/$(1)),$(2))),,$(file >$(S)/$(1),$(2)))
ROLLOUT_ARGS = -k $(K) --max-new-tokens $(MAX_NEW_TOKENS) --temperature $(TEMPERATURE) \
    --top-p $(TOP_P) --top-k $(TOP_K) --min-p $(MIN_P) $(ROLLOUT_FLAGS)
EVAL_ARGS = --k $(EVAL_K) $(if $(strip $(EVAL_TEMPERATURE)),--temperature $(EVAL_TEMPERATURE)) \
    --max-new-tokens $(EVAL_MAX_NEW_TOKENS) --reward $(call sq,$(EVAL_REWARD_FLAGS)) \
    $(if $(strip $(EVAL_ROLLOUT_FLAGS)),--rollout $(call sq,$(EVAL_ROLLOUT_FLAGS))) --seed $(SEED) $(EVAL_FLAGS)
REWARD_STAGE = $(if $(strip $(REWARD)),REWARD $(REWARD),grpo-reward $(REWARD_FLAGS))
$(call setting,model,$(MODEL))
$(call setting,prompts,$(if $(strip $(PROMPTS)),$(abspath $(PROMPTS)),grpo-prep $(PREP_FLAGS)))
$(call setting,slice,$(PROMPTS_PER_STEP))
# a run with a server adds it to the rollout's settings (so a run without one resumes untouched)
SERVER_SETTING := $(if $(strip $(ROLLOUT_SERVER)), server $(ROLLOUT_SERVER) $(SERVER_FLAGS) sync $(SERVER_SYNC) \
    $(if $(filter restart,$(SERVER_SYNC)),$(SERVER_EXPORT) $(SERVER_DTYPE))$(if $(filter lora,$(SERVER_SYNC)),$(SERVER_DTYPE) $(SERVER_LORA_NAME)))
$(call setting,rollout,$(ROLLOUT_ARGS) seed $(SEED)$(SERVER_SETTING)$(if $(filter 1,$(ASYNC)), async $(MAX_STALENESS)))
ifneq ($(filter-out none restart lora,$(SERVER_SYNC)),)
$(error SERVER_SYNC: expected none, restart or lora, got '$(SERVER_SYNC)')
endif
ifneq ($(and $(filter restart,$(SERVER_SYNC)),$(if $(strip $(ROLLOUT_SERVER)),,x)),)
$(error SERVER_SYNC=restart needs ROLLOUT_SERVER (the URL SERVER_CMD serves at))
endif
# SERVER_SYNC=lora: MODEL's own adapter (a LoRA checkpoint continued) is checkpoint 0's
MODEL_ADAPTER := $(wildcard $(MODEL)/adapter_config.json)
ifeq ($(SERVER_SYNC),lora)
ifeq ($(strip $(ROLLOUT_SERVER)),)
$(error SERVER_SYNC=lora needs ROLLOUT_SERVER (the URL of the vLLM or SGLang server that loads the adapters))
endif
ifeq ($(or $(filter-out 0,$(call flag_value,--lora-r,$(UPDATE_FLAGS))),$(MODEL_ADAPTER)),)
$(error SERVER_SYNC=lora loads the run's LoRA adapter, and this run trains none (full fine-tuning): add --lora-r R to UPDATE_FLAGS, or use SERVER_SYNC=restart, which serves each checkpoint's whole export)
endif
endif
$(call setting,reward,$(REWARD_STAGE))
$(call setting,advantage,$(ADVANTAGE_FLAGS))
FILL := $(filter 1,$(FILL_NONFLAT))
# only in runs that used FILL_NONFLAT, so that the runs of an older grpo.mk resume untouched
FILL_STAMP := $(if $(or $(FILL),$(wildcard $(S)/fill)),$(S)/fill)
$(if $(FILL_STAMP),$(call setting,fill,$(if $(FILL),$(FILL_ROUNDS))))
$(call setting,update,--seed $(SEED) $(UPDATE_FLAGS))
$(call setting,eval-prompts,$(if $(strip $(EVAL_PROMPTS)),$(abspath $(EVAL_PROMPTS)),grpo-prep $(EVAL_PREP_FLAGS)))
$(call setting,eval,$(GRPO_EVAL) $(EVAL_ARGS))
$(call setting,export,$(EXPORT_DTYPE))

# ---- recipe pieces -------------------------------------------------------------
# $(call logged,LOG): stderr to LOG, shown when the command fails; the tools always
# say why they fail, so an empty LOG is a stage silent by itself (a REWARD) or
# whose stderr could not be written there (a full disk)
logged = 2> $(1) || { s=$$?; cat $(1) >&2; [ -s $(1) ] || \
    echo "grpo.mk: $(1) is empty: the stage failed (exit $$s) without a message, or its stderr could not be written there (a full disk?)" >&2; exit $$s; }
# $(call seconds,FILE): the wall time since t0 into FILE (a log, as the stage's stderr)
seconds = awk -v a="$$t0" -v b="$$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }' > $(1)
# a recipe that writes $@.tmp and renames it: the .tmp goes when the recipe fails
discard_tmp = trap 'rm -f $@.tmp' EXIT;
# step N's rollout seed
step_seed = $$(( 0x$$(printf '%s/%s' $(call sq,$(SEED)) $(1) | sha256sum | cut -c1-14) ))
# the model of step N: MODEL for step 0, else checkpoint N
model_of = $(if $(filter 0000,$(1)),$(MODEL),$(RUN)/ckpt/$(1))
model_dep = $(if $(filter 0000,$(1)),$(S)/model,$(RUN)/ckpt/$(1)/grpo/state.json)
# the checkpoint step N samples with: N, or with ASYNC=1 N - MAX_STALENESS (at least 0)
STALENESS := $(if $(filter 1,$(ASYNC)),$(MAX_STALENESS),0)
SAMPLE_PAIRS := $(shell awk 'BEGIN { for (i = 0; i < $(STEPS) + 0; i++) printf "%04d:%04d ", i, (i > $(STALENESS) ? i - $(STALENESS) : 0) }')
sample_of = $(patsubst $(1):%,%,$(filter $(1):%,$(SAMPLE_PAIRS)))
# retention keeps the checkpoints later steps still sample with
KEEP_CKPTS := $(shell awk 'BEGIN { k = $(KEEP) + 0; s = $(STALENESS) + 1; print (k > 0 && k < s) ? s : k }')
PRUNE = $(GRPO_MK_DIR)/prune.sh $(RUN) $(KEEP_CKPTS) $(KEEP_RECORDS) '$(EVAL_RUN_IDS)'
# checkpoints whose evaluation the run makes (prune keeps them until it is done)
EVAL_RUN_IDS := $(if $(filter-out 0,$(EVAL_EVERY)),$(EVAL_IDS))

# pipelines/server.sh with the run's server settings
server_sh = ROLLOUT_SERVER=$(call sq,$(ROLLOUT_SERVER)) SERVER_CMD=$(call sq,$(SERVER_CMD)) SERVER_EXPORT=$(SERVER_EXPORT) \
    SERVER_DTYPE=$(SERVER_DTYPE) SERVER_WAIT=$(SERVER_WAIT) GRPO_BIN=$(GRPO_BIN) $(GRPO_MK_DIR)/server.sh
# SERVER_SYNC=lora: the PEFT export checkpoint N's rollouts have the server load (none for checkpoint 0
# when MODEL has no adapter: the server's model itself), and that file as a prerequisite
lora_export = $(if $(filter lora,$(SERVER_SYNC)),$(if $(or $(filter-out 0000,$(1)),$(MODEL_ADAPTER)),$(RUN)/server/lora/$(1)))
lora_dep = $(if $(call lora_export,$(1)),$(call lora_export,$(1))/adapter_config.json)
# grpo-rollout's model: the policy, or with ROLLOUT_SERVER the server (MODEL gives the tokenizer),
# which SERVER_SYNC=restart first makes serve checkpoint N, or SERVER_SYNC=lora has load its adapter
rollout_model = $(if $(strip $(ROLLOUT_SERVER)),--model $(MODEL) --server $(ROLLOUT_SERVER) $(SERVER_FLAGS) \
    $(if $(call lora_export,$(1)),--server-lora $(abspath $(call lora_export,$(1))) \
        $(if $(strip $(SERVER_LORA_NAME)),--server-lora-name $(call sq,$(SERVER_LORA_NAME)))) \
    $(if $(filter restart lora,$(SERVER_SYNC)),--policy-step $$(( 10#$(1) ))),--model $(call model_of,$(1)))
rollout_sync = $(if $(filter restart,$(SERVER_SYNC)),$(server_sh) ensure $(RUN) $(1) $(call model_of,$(1)) $(call logged,$(2).server.log);)\
    $(if $(filter lora,$(SERVER_SYNC)),mkdir -p $(RUN)/server;)
# SERVER_SYNC=lora: one rollout at a time loads and asks for the adapter of its name
rollout_lock = $(if $(filter lora,$(SERVER_SYNC)),flock $(RUN)/server/lora.lock)

# $(call rollout_cmd,STEP,SHARD-ARGS,LOG[,/fill/RR]): grpo-rollout of step N (or of its fill round RR) into $@
define rollout_cmd
rm -f $$(@D)/.$$(@F).tmp-*; t0=$$$$EPOCHREALTIME; $$(call rollout_sync,$(call sample_of,$(1)),$(3)) \
$$(rollout_lock) $$(GRPO_BIN)/grpo-rollout $$(call rollout_model,$(call sample_of,$(1))) --in $(RUN)/steps/$(1)$(4)/prompts.jsonl \
    --out $$@ $$(ROLLOUT_ARGS) --seed $$(call step_seed,$(1)$(4)) --policy ckpt/$(call sample_of,$(1)) $(2) \
    $$(call logged,$(3).log); \
$$(call seconds,$(3).seconds)
endef

# $(call reward_cmd,IN,LOG): the reward stage from IN into $@: REWARD, else grpo-reward
ifneq ($(strip $(REWARD)),)
define reward_cmd
$$(discard_tmp) t0=$$$$EPOCHREALTIME; \
{ zstd -dc $(1) | { $$(REWARD); } | zstd -q -c > $$@.tmp; } $$(call logged,$(2).log); mv $$@.tmp $$@; \
$$(call seconds,$(2).seconds)
endef
else
define reward_cmd
rm -f $$(@D)/.$$(@F).tmp-*; t0=$$$$EPOCHREALTIME; \
$$(GRPO_BIN)/grpo-reward $$(REWARD_FLAGS) --in $(1) --out $$@ $$(call logged,$(2).log); \
$$(call seconds,$(2).seconds)
endef
endif

# ---- one step's rules: $(1) step N, $(2) checkpoint N+1 -----------------------------
define step_rules
$(RUN)/steps/$(1)/prompts.jsonl: $(RUN)/prompts.jsonl $(S)/slice
	$$(Q)$$(discard_tmp) mkdir -p $$(@D); n=$$$$(awk 'END { print NR }' $$<); \
	[ "$$(PROMPTS_PER_STEP)" -le "$$$$n" ] || { echo "grpo.mk: PROMPTS_PER_STEP=$$(PROMPTS_PER_STEP) is more than the $$$$n prompts of $$<" >&2; exit 64; }; \
	awk -v s=$$$$(( 10#$(1) * $$(PROMPTS_PER_STEP) % n )) -v p=$$(PROMPTS_PER_STEP) -v n=$$$$n \
	    '{ i = (NR - 1 - s + n) % n; if (i < p) line[i] = $$$$0 } END { for (i = 0; i < p; i++) print line[i] }' \
	    $$< > $$@.tmp && mv $$@.tmp $$@

ifeq ($(SHARDS),1)
$(RUN)/steps/$(1)/rollouts.jsonl.zst: $(call model_dep,$(call sample_of,$(1))) $(call lora_dep,$(call sample_of,$(1))) \
        $(RUN)/steps/$(1)/prompts.jsonl $(S)/rollout
	$$(Q)$(call rollout_cmd,$(1),,$(RUN)/steps/$(1)/rollout)

$(RUN)/steps/$(1)/scored.jsonl.zst: $(RUN)/steps/$(1)/rollouts.jsonl.zst $(S)/reward
	$$(Q)$(call reward_cmd,$$<,$(RUN)/steps/$(1)/reward)
else
$(RUN)/steps/$(1)/rollouts.jsonl.zst: $(foreach i,$(SHARD_IDS),$(RUN)/steps/$(1)/rollouts.$(call SHARD_OF,$(i)).jsonl.zst)
	$$(Q)$(GRPO_MK_DIR)/merge.sh $(RUN)/steps/$(1)/prompts.jsonl $$@ $$^

$(RUN)/steps/$(1)/scored.jsonl.zst: $(foreach i,$(SHARD_IDS),$(RUN)/steps/$(1)/scored.$(call SHARD_OF,$(i)).jsonl.zst) \
        $(RUN)/steps/$(1)/rollouts.jsonl.zst
	$$(Q)$(GRPO_MK_DIR)/merge.sh $(RUN)/steps/$(1)/prompts.jsonl $$@ $$(filter %-of-$(SHARDS).jsonl.zst,$$^)
endif

$(RUN)/steps/$(1)/batch.jsonl.zst $(RUN)/steps/$(1)/stats.json &: $(RUN)/steps/$(1)/$(if $(FILL),filled,scored).jsonl.zst \
        $(S)/advantage $(FILL_STAMP)
	$$(Q)rm -f $$(@D)/.batch.jsonl.zst.tmp-* $$(@D)/.stats.json.tmp-*; t0=$$$$EPOCHREALTIME; \
	$$(GRPO_BIN)/grpo-advantage $$(ADVANTAGE_FLAGS) --in $$< --out $(RUN)/steps/$(1)/batch.jsonl.zst \
	    --stats $(RUN)/steps/$(1)/stats.json $$(call logged,$(RUN)/steps/$(1)/advantage.log); \
	$$(call seconds,$(RUN)/steps/$(1)/advantage.seconds)

$(RUN)/ckpt/$(2)/grpo/state.json $(RUN)/steps/$(1)/metrics.jsonl &: $(RUN)/steps/$(1)/batch.jsonl.zst \
        $(RUN)/steps/$(1)/stats.json $(if $(FILL),$(RUN)/steps/$(1)/fill.json) $(call model_dep,$(1)) $(S)/update \
        | $(if $(filter $(1),$(EVAL_RUN_IDS)),$(RUN)/eval/$(1).json)
	$$(Q)trap 'rm -f $(RUN)/steps/$(1)/metrics.jsonl.tmp' EXIT; \
	mkdir -p $(RUN)/ckpt; rm -rf $(RUN)/ckpt/.$(2).tmp-* $(RUN)/ckpt/.$(2).old-* $(RUN)/ckpt/.$(2).new \
	    $(RUN)/ckpt/..$(2).new.*; \
	rm -f $(RUN)/steps/$(1)/metrics.part; t0=$$$$EPOCHREALTIME; \
	$$(UPDATE_LAUNCH) $$(GRPO_BIN)/grpo-update --model $$(call model_of,$(1)) --in $(RUN)/steps/$(1)/batch.jsonl.zst \
	    --out $(RUN)/ckpt/.$(2).new --metrics $(RUN)/steps/$(1)/metrics.part --seed $$(SEED) $$(UPDATE_FLAGS) \
	    $$(call logged,$(RUN)/steps/$(1)/update.log); \
	$$(call seconds,$(RUN)/steps/$(1)/update.seconds); \
	jq -c --slurpfile s $(RUN)/steps/$(1)/stats.json $(if $(FILL),--slurpfile f $(RUN)/steps/$(1)/fill.json) \
	    '. + ($$$$s[0] | with_entries(select(.key | startswith("rewards/"))))$(if $(FILL), + $$$$f[0])' \
	    $(RUN)/steps/$(1)/metrics.part > $(RUN)/steps/$(1)/metrics.jsonl.tmp; \
	rm -f $(RUN)/steps/$(1)/metrics.part; mv $(RUN)/steps/$(1)/metrics.jsonl.tmp $(RUN)/steps/$(1)/metrics.jsonl; \
	rm -rf $(RUN)/ckpt/$(2); mv $(RUN)/ckpt/.$(2).new $(RUN)/ckpt/$(2); \
	$$(if $$(strip $$(TENSORBOARD)),{ $$(call tb_step,$(1)) $$(tb_warn); };) \
	$$(if $$(strip $$(WANDB_PROJECT)),{ $$(call wandb_step,$(1)) $$(wandb_warn); };) \
	$$(if $$(filter 1,$$(PROGRESS)),{ $$(call progress_line,$(1)) || true; } >&2;) \
	$$(PRUNE)

.PHONY: step-$(1)
step-$(1): $(RUN)/ckpt/$(2)/grpo/state.json $(RUN)/steps/$(1)/metrics.jsonl

ifneq ($(FILL),)
# the step's own round: the ids of its non-flat groups
$(RUN)/steps/$(1)/nonflat.ids: $(RUN)/steps/$(1)/scored.jsonl.zst $(S)/advantage
	$$(Q)$(GRPO_MK_DIR)/fill.sh ids $$< $$@ $$(GRPO_BIN)/grpo-advantage $$(ADVANTAGE_FLAGS)

# further rounds, as many as the groups need: each made by a make of this file, so
# every round's files are cached and resumed like the step's own (make -n shows the command:
# the $(MAKE) in it would otherwise have make run it)
$(RUN)/steps/$(1)/filled.jsonl.zst $(RUN)/steps/$(1)/fill.json &: $(RUN)/steps/$(1)/nonflat.ids $(S)/fill \
        $(S)/advantage $(S)/rollout $(S)/reward $(call model_dep,$(call sample_of,$(1)))
	$$(Q)$$(if $$(findstring n,$$(firstword -$$(MAKEFLAGS))),echo )$(GRPO_MK_DIR)/fill.sh run $(RUN)/steps/$(1) $$(PROMPTS_PER_STEP) $$(FILL_ROUNDS) \
	    $$(MAKE) --no-print-directory -f $(GRPO_MK_DIR)/grpo.mk RUN=$(RUN)
endif
endef

# ---- round RR of step N's dynamic sampling (FILL_NONFLAT=1): $(1) step, $(2) round --------
FILL_ROUND_IDS := $(if $(FILL),$(shell awk 'BEGIN { for (i = 1; i < $(FILL_ROUNDS) + 0; i++) printf "%02d ", i }'))
# the prompt files drawn before round R of step N: the step's own and rounds 1 .. R-1
fill_used = $(RUN)/steps/$(1)/prompts.jsonl $(foreach r,$(filter-out x,$(wordlist 1,$(patsubst 0%,%,$(2)),x $(FILL_ROUND_IDS))),$(RUN)/steps/$(1)/fill/$(r)/prompts.jsonl)
define fill_round_rules
$(RUN)/steps/$(1)/fill/$(2)/prompts.jsonl: $(RUN)/prompts.jsonl $(call fill_used,$(1),$(2)) $(S)/slice
	$$(Q)mkdir -p $$(@D); $(GRPO_MK_DIR)/fill.sh prompts $(RUN)/prompts.jsonl $$@ $$(PROMPTS_PER_STEP) \
	    $$(call sq,$$(SEED))/$(1)/fill/$(2)/prompts $(call fill_used,$(1),$(2))

$(RUN)/steps/$(1)/fill/$(2)/rollouts.jsonl.zst: $(call model_dep,$(call sample_of,$(1))) $(call lora_dep,$(call sample_of,$(1))) \
        $(RUN)/steps/$(1)/fill/$(2)/prompts.jsonl $(S)/rollout
	$$(Q)$(call rollout_cmd,$(1),,$(RUN)/steps/$(1)/fill/$(2)/rollout,/fill/$(2))

$(RUN)/steps/$(1)/fill/$(2)/scored.jsonl.zst: $(RUN)/steps/$(1)/fill/$(2)/rollouts.jsonl.zst $(S)/reward
	$$(Q)$(call reward_cmd,$$<,$(RUN)/steps/$(1)/fill/$(2)/reward)

$(RUN)/steps/$(1)/fill/$(2)/nonflat.ids: $(RUN)/steps/$(1)/fill/$(2)/scored.jsonl.zst $(S)/advantage
	$$(Q)$(GRPO_MK_DIR)/fill.sh ids $$< $$@ $$(GRPO_BIN)/grpo-advantage $$(ADVANTAGE_FLAGS)
endef

# ---- shard I of step N (SHARDS > 1): $(1) step, $(2) shard ---------------------------
define shard_rules
$(RUN)/steps/$(1)/rollouts.$(call SHARD_OF,$(2)).jsonl.zst: $(call model_dep,$(call sample_of,$(1))) \
        $(call lora_dep,$(call sample_of,$(1))) $(RUN)/steps/$(1)/prompts.jsonl $(S)/rollout
	$$(Q)$(call rollout_cmd,$(1),--shard $(2)/$(SHARDS),$(RUN)/steps/$(1)/rollout.$(call SHARD_OF,$(2)))

$(RUN)/steps/$(1)/scored.$(call SHARD_OF,$(2)).jsonl.zst: $(RUN)/steps/$(1)/rollouts.$(call SHARD_OF,$(2)).jsonl.zst $(S)/reward
	$$(Q)$(call reward_cmd,$$<,$(RUN)/steps/$(1)/reward.$(call SHARD_OF,$(2)))
endef

# the progress line of step N (scripts/progress.jq)
progress_line = jq -n -r -L $(GRPO_ROOT)/scripts/lib -f $(GRPO_ROOT)/scripts/progress.jq --argjson step $$(( 10\#$(1) + 1 )) --argjson total $(STEPS) \
    --slurpfile m $(RUN)/steps/$(1)/metrics.jsonl --slurpfile s $(RUN)/steps/$(1)/stats.json \
    --argjson seconds "$$(cat $(RUN)/steps/$(1)/*.seconds | awk '{ s += $$1 } END { printf "%.3f", s }')"

# TensorBoard after step N: the metrics of steps 0..N and the evaluations of checkpoints
# 0..N, of which grpo-tensorboard appends only the steps its event file lacks (so a step
# whose update was cut short is caught up by the next), and step N's first completions.
# Monitoring does not stop a run: a failure is one line on stderr.
tb_warn = || echo "grpo.mk: TensorBoard ($(TENSORBOARD)) not updated; the next step or make metrics catches up" >&2
tb_step = $(GRPO_BIN)/grpo-tensorboard --logdir $(TENSORBOARD) --samples-n $(TENSORBOARD_SAMPLES) \
    --samples $$(( 10\#$(1) + 1 )):$(RUN)/steps/$(1)/batch.jsonl.zst \
    $$(for i in $$(seq 0 $$(( 10\#$(1) ))); do n=$$(printf %04d "$$i"); echo $(RUN)/steps/$$n/metrics.jsonl; \
        [ ! -e $(RUN)/eval/$$n.json ] || echo $(RUN)/eval/$$n.json; done)

# Weights & Biases after step N: the same lines, of which grpo-wandb logs only those the W&B run
# lacks (it reads them back from the run's own logs), and a table of step N's first completions.
wandb_warn = || echo "grpo.mk: Weights & Biases not updated; the next step or make metrics catches up" >&2
wandb_step = $(WANDB_PY) $(GRPO_ROOT)/scripts/grpo-wandb --run $(RUN) --samples-n $(WANDB_SAMPLES) \
    --samples $$(( 10\#$(1) + 1 )):$(RUN)/steps/$(1)/batch.jsonl.zst \
    $$(for i in $$(seq 0 $$(( 10\#$(1) ))); do n=$$(printf %04d "$$i"); echo $(RUN)/steps/$$n/metrics.jsonl; \
        [ ! -e $(RUN)/eval/$$n.json ] || echo $(RUN)/eval/$$n.json; done)

STEP_PAIRS := $(shell awk 'BEGIN { for (i = 0; i < $(STEPS) + 0; i++) printf "%04d:%04d ", i, i + 1 }')
$(foreach p,$(STEP_PAIRS),$(eval $(call step_rules,$(word 1,$(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))))))
ifneq ($(SHARDS),1)
$(foreach n,$(STEP_IDS),$(foreach i,$(SHARD_IDS),$(eval $(call shard_rules,$(n),$(i)))))
endif
$(foreach n,$(STEP_IDS),$(foreach r,$(FILL_ROUND_IDS),$(eval $(call fill_round_rules,$(n),$(r)))))

# ---- the prompt sets ---------------------------------------------------------------
$(RUN)/prompts.jsonl: $(S)/prompts $(if $(strip $(PROMPTS)),$(PROMPTS))
	$(Q)$(if $(strip $(PROMPTS)),$(discard_tmp) zstd -dcf $(PROMPTS) > $@.tmp && mv $@.tmp $@, \
	    rm -f $(@D)/.$(@F).tmp-*; $(GRPO_BIN)/grpo-prep $(PREP_FLAGS) --out $@)

$(RUN)/heldout.jsonl: $(S)/eval-prompts $(if $(strip $(EVAL_PROMPTS)),$(EVAL_PROMPTS))
	$(Q)$(if $(strip $(EVAL_PROMPTS)),$(discard_tmp) zstd -dcf $(EVAL_PROMPTS) > $@.tmp && mv $@.tmp $@, \
	    rm -f $(@D)/.$(@F).tmp-*; $(GRPO_BIN)/grpo-prep $(EVAL_PREP_FLAGS) --out $@)

# ---- evaluation ------------------------------------------------------------------
define eval_rule
$(RUN)/eval/$(1).json: $(call model_dep,$(1)) $(RUN)/heldout.jsonl $(S)/eval
	$$(Q)mkdir -p $$(@D); rm -f $$(@D)/.$$(@F).tmp-*; \
	$$(GRPO_EVAL) --model $$(call model_of,$(1)) --in $(RUN)/heldout.jsonl --out $$@ --step $$$$(( 10#$(1) )) \
	    $$(EVAL_ARGS) $$(call logged,$(RUN)/eval/$(1).log); \
	$$(if $$(filter 1,$$(PROGRESS)),{ jq -r -L $(GRPO_ROOT)/scripts/lib -f $(GRPO_ROOT)/scripts/progress.jq --argjson total $$(STEPS) $$@ || true; } >&2;) \
	$$(PRUNE)
endef
$(foreach n,$(EVAL_IDS),$(eval $(call eval_rule,$(n))))

# ---- metrics.jsonl: for N = 0 .. STEPS: the metrics of the step that made checkpoint
# N, then checkpoint N's evaluation (those of the run, and any made by make eval)
EVAL_IN_METRICS := $(sort $(EVAL_RUN_IDS) $(filter $(EVAL_IDS),$(patsubst $(RUN)/eval/%.json,%,$(wildcard $(RUN)/eval/*.json))))
METRICS_PARTS := $(foreach p,$(STEP_PAIRS),$(RUN)/steps/$(word 1,$(subst :, ,$(p)))/metrics.jsonl \
    $(if $(filter $(word 2,$(subst :, ,$(p))),$(EVAL_IN_METRICS)),$(RUN)/eval/$(word 2,$(subst :, ,$(p))).json))
METRICS_PARTS := $(if $(filter 0000,$(EVAL_IN_METRICS)),$(RUN)/eval/0000.json) $(METRICS_PARTS)

$(call setting,metrics,$(METRICS_PARTS))
$(RUN)/metrics.jsonl: $(METRICS_PARTS) $(S)/metrics
	$(Q)$(discard_tmp) cat $(METRICS_PARTS) < /dev/null > $@.tmp; mv $@.tmp $@; \
	$(if $(strip $(TENSORBOARD)),{ $(GRPO_BIN)/grpo-tensorboard --logdir $(TENSORBOARD) $@ $(tb_warn); };) \
	$(if $(strip $(WANDB_PROJECT)),{ $(WANDB_PY) $(GRPO_ROOT)/scripts/grpo-wandb --run $(RUN) $@ $(wandb_warn); };)

# ---- SERVER_SYNC=lora: each sampling checkpoint's adapter as PEFT, for the server to load ----
define lora_export_rule
$(call lora_dep,$(1)): $(call model_dep,$(1)) $(S)/rollout
	$$(Q)mkdir -p $(RUN)/server/lora; rm -rf $(RUN)/server/lora/.$(1).tmp-*; \
	$$(GRPO_BIN)/grpo-export --model $$(call model_of,$(1)) --format peft --dtype $$(SERVER_DTYPE) \
	    --out $(RUN)/server/lora/$(1) $$(call logged,$(RUN)/server/lora/$(1).log)
endef
LORA_IDS := $(sort $(foreach p,$(SAMPLE_PAIRS),$(if $(call lora_export,$(word 2,$(subst :, ,$(p)))),$(word 2,$(subst :, ,$(p))))))
$(foreach n,$(LORA_IDS),$(eval $(call lora_export_rule,$(n))))

# ---- export --------------------------------------------------------------------
export_out = $(RUN)/export/$(if $(filter gguf,$(1)),model.gguf,$(1))
export_file = $(if $(filter gguf,$(1)),$(RUN)/export/model.gguf,$(RUN)/export/$(1)/$(if $(filter peft,$(1)),adapter_config.json,config.json))
define export_rule
$(call export_file,$(1)): $(RUN)/ckpt/$(LAST)/grpo/state.json $(S)/export
	$$(Q)mkdir -p $(RUN)/export; rm -rf $(RUN)/export/.$(notdir $(call export_out,$(1))).tmp-*; \
	$$(GRPO_BIN)/grpo-export --model $(RUN)/ckpt/$(LAST) --format $(1) --dtype $$(EXPORT_DTYPE) --out $(call export_out,$(1))
endef
$(foreach f,$(EXPORT_FORMAT),$(eval $(call export_rule,$(f))))
EXPORTS := $(foreach f,$(EXPORT_FORMAT),$(call export_file,$(f)))

# ---- goals -----------------------------------------------------------------------
.PHONY: run prompts eval metrics export prune server-stop
run: $(if $(STEP_IDS),$(RUN)/ckpt/$(LAST)/grpo/state.json) $(RUN)/metrics.jsonl \
    $(foreach n,$(EVAL_RUN_IDS),$(RUN)/eval/$(n).json)
ifeq ($(SERVER_SYNC),restart)
	$(Q)$(server_sh) stop $(RUN)
endif
# SERVER_SYNC=restart: the server the run started goes (make run stops it at the end)
server-stop:
	$(Q)$(server_sh) stop $(RUN)
prompts: $(foreach n,$(STEP_IDS),$(RUN)/steps/$(n)/prompts.jsonl)
eval: $(foreach n,$(if $(EVAL_RUN_IDS),$(EVAL_RUN_IDS),0000 $(LAST)),$(RUN)/eval/$(n).json)
metrics: $(RUN)/metrics.jsonl
export: $(EXPORTS)
prune:
	$(Q)$(PRUNE)

# Slurm: shard-I-of-N makes shard I of step STEP (its rollouts and scored records)
ifneq ($(strip $(STEP)),)
STEP_ID := $(shell awk 'BEGIN { printf "%04d", $(STEP) + 0 }')
.PHONY: $(foreach i,$(SHARD_IDS),shard-$(call SHARD_OF,$(i)))
$(foreach i,$(SHARD_IDS),$(eval shard-$(call SHARD_OF,$(i)): $(RUN)/steps/$(STEP_ID)/scored.$(call SHARD_OF,$(i)).jsonl.zst))
endif

# records, checkpoints and their adapters' exports may be deleted (KEEP, KEEP_RECORDS) without being remade
.SECONDARY: $(foreach n,$(STEP_IDS),$(foreach f,rollouts scored batch $(if $(FILL),filled),$(RUN)/steps/$(n)/$(f).jsonl.zst) \
    $(foreach i,$(if $(filter-out 1,$(SHARDS)),$(SHARD_IDS)),$(foreach f,rollouts scored,$(RUN)/steps/$(n)/$(f).$(call SHARD_OF,$(i)).jsonl.zst))) \
    $(foreach p,$(STEP_PAIRS),$(RUN)/ckpt/$(word 2,$(subst :, ,$(p)))/grpo/state.json) \
    $(foreach n,$(LORA_IDS),$(call lora_dep,$(n)))
