# make -f pipelines/compare.mk: CISPO (MiniMax-M1) on the demo's settings, the weight capped at
# 1 + 4 (TRL's recommended epsilon_high 5.0; formats/loss.md says why the numbers differ).
include $(GRPO_ROOT)/pipelines/demo/config.mk
UPDATE_FLAGS = --lora-r 16 --lr 5e-4 --beta 0.04 --loss cispo --epsilon-high 4
EXPORT_FORMAT =
