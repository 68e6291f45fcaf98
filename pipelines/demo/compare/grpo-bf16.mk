# make -f pipelines/compare.mk: GRPO as the demo runs it, the update's matrix products on
# bf16 operands with float32 sums (grpo-update --compute bf16; needs AVX-512 BF16, else the
# update stops with 69). Weights, gradients and AdamW state stay float32.
include $(GRPO_ROOT)/pipelines/demo/config.mk
UPDATE_FLAGS += --compute bf16
EXPORT_FORMAT =
