# make example-guess: GRPO on SmolLM2-135M-Instruct against a multi-turn
# environment, guess-the-number (scripts/env/guess.py, formats/env.md): the
# model guesses a whole number between 1 and 10, the environment answers
# "higher" or "lower" after each guess, and an episode that finds the number
# within 4 assistant turns gets reward 1, else 0. LoRA on the CPU;
# bench/README.md reports success before and after, over two seeds.
#
# The prompt files were written by the environment itself:
#   python3 scripts/env/guess.py --prompts 1000 --seed 1 --max 10 | zstd -19 -o train.jsonl.zst
#   python3 scripts/env/guess.py --prompts 50 --seed 2 --max 10 | zstd -19 -o heldout.jsonl.zst
EXAMPLE_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
GUESS_ENV = --env 'python3 -u $(GRPO_ROOT)/scripts/env/guess.py' --max-turns 4

PROMPTS = $(EXAMPLE_DIR)train.jsonl.zst
EVAL_PROMPTS = $(EXAMPLE_DIR)heldout.jsonl.zst
STEPS = 16
PROMPTS_PER_STEP = 8
K = 8
# per assistant turn: a guess is a few tokens
MAX_NEW_TOKENS = 16
TEMPERATURE = 0.7
ROLLOUT_FLAGS = $(GUESS_ENV)
REWARD_FLAGS = --fn env
UPDATE_FLAGS = --lora-r 16 --lr 5e-4 --beta 0.04
# success rate on the 50 held-out games, 4 episodes each, sampled as in training
EVAL_EVERY = 16
EVAL_K = 4
EVAL_TEMPERATURE = 0.7
EVAL_ROLLOUT_FLAGS = $(GUESS_ENV)
EVAL_REWARD_FLAGS = --fn env
EVAL_FLAGS = --correct env
EXPORT_FORMAT = hf
EXPORT_DTYPE = auto
