# make -f pipelines/compare.mk: GRPO trained only on each batch's top 20% of tokens by entropy
# ("Beyond the 80/20 Rule") on the demo's settings.
include $(GRPO_ROOT)/pipelines/demo/config.mk
UPDATE_FLAGS = --lora-r 16 --lr 5e-4 --beta 0.04 --top-entropy-quantile 0.2
EXPORT_FORMAT =
