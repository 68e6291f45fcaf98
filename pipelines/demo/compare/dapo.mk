# make -f pipelines/compare.mk: DAPO (Yu et al. 2025) on the demo's settings: the token-level
# loss, clip-higher (epsilon-high 0.28), no KL term, and dynamic sampling (FILL_NONFLAT: further
# rounds of prompts until the step has 8 groups whose rewards are not all equal, at most 3 rounds).
include $(GRPO_ROOT)/pipelines/demo/config.mk
UPDATE_FLAGS = --lora-r 16 --lr 5e-4 --beta 0 --loss dapo --epsilon-high 0.28
FILL_NONFLAT = 1
FILL_ROUNDS = 3
EXPORT_FORMAT =
