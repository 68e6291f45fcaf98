# make -f pipelines/compare.mk: GRPO as the demo runs it (pipelines/demo/config.mk).
include $(GRPO_ROOT)/pipelines/demo/config.mk
EXPORT_FORMAT =
