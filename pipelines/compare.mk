# pipelines/compare.mk: the algorithms side by side on the arithmetic demo's settings.
#
#   make -f pipelines/compare.mk [OUT=runs/compare] [SEEDS='1 2'] [ALGOS='grpo dapo cispo grpo-topent']
#                                [CONFIGS=pipelines/demo/compare]
#
# Each ALGO x SEED is a pipelines/grpo.mk run OUT/ALGO-seedS whose config.mk includes
# CONFIGS/ALGO.mk (pipelines/demo/compare/: the demo's pipelines/demo/config.mk with that
# algorithm's flags) and sets SEED; the runs go one after another, seed by seed (each uses every core),
# and resume like any grpo.mk run. Then pipelines/compare-report.sh writes OUT/compare.md (held-out
# greedy accuracy of checkpoint 0 and of the last, the training's wall time: the sum of its
# stages' seconds, so an interrupted run counts only the work it did) and OUT/reward.png (the mean
# reward per step of every run, gnuplot). About 8 minutes a run on 2 cores, 4 x 2 runs.
GRPO_ROOT := $(patsubst %/,%,$(dir $(abspath $(dir $(lastword $(MAKEFILE_LIST))))))
OUT ?= runs/compare
SEEDS ?= 1 2
ALGOS ?= grpo dapo cispo grpo-topent
CONFIGS ?= $(GRPO_ROOT)/pipelines/demo/compare
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
RUNS := $(foreach s,$(SEEDS),$(foreach a,$(ALGOS),$(a)-seed$(s)))

.PHONY: all runs report $(addprefix run-,$(RUNS))
all: report
runs: $(addprefix run-,$(RUNS))
report: runs
	$(GRPO_ROOT)/pipelines/compare-report.sh $(OUT) $(RUNS)

# run-ALGO-seedS: its config.mk (rewritten only when it differs, so make keeps what is done),
# then the run and its evaluations
$(addprefix run-,$(RUNS)): run-%:
	mkdir -p $(OUT)/$*; \
	printf 'include %s\nSEED = %s\n' $(abspath $(CONFIGS))/$(word 1,$(subst -seed, ,$*)).mk \
	    $(word 2,$(subst -seed, ,$*)) > $(OUT)/$*/config.mk.tmp; \
	if cmp -s $(OUT)/$*/config.mk.tmp $(OUT)/$*/config.mk; then rm $(OUT)/$*/config.mk.tmp; \
	else mv $(OUT)/$*/config.mk.tmp $(OUT)/$*/config.mk; fi; \
	$(MAKE) --no-print-directory -f $(GRPO_ROOT)/pipelines/grpo.mk RUN=$(OUT)/$* GRPO_ROOT=$(GRPO_ROOT) run eval; \
	$(MAKE) --no-print-directory -f $(GRPO_ROOT)/pipelines/grpo.mk RUN=$(OUT)/$* GRPO_ROOT=$(GRPO_ROOT) metrics > /dev/null
