# make demo QUICK=1: the same mechanics in about a minute (65 s measured alone); too short to judge learning.
include $(GRPO_ROOT)/pipelines/demo/config.mk
EVAL_PREP_FLAGS = --task arith --n 16 --split test --seed 7 $(OPS_FLAGS)
STEPS = 3
PROMPTS_PER_STEP = 4
MAX_NEW_TOKENS = 24
EVAL_EVERY = 3
