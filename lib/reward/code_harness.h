/* The Python harness of the code reward (code_harness.c describes its
 * three modes: plan, run and check). */
#ifndef GRPO_REWARD_CODE_HARNESS_H
#define GRPO_REWARD_CODE_HARNESS_H

extern const char code_harness_py[];

#endif
