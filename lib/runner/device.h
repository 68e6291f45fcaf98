/* --device auto|cpu|cuda: the backend a tool's model runs on. */
#ifndef GRPO_RUNNER_DEVICE_H
#define GRPO_RUNNER_DEVICE_H

#include "../ops/backend.h"
#include "../util/err.h"

/* A --device flag's choices, for its flag table (lib/util/flags.h's kind
 * tables). */
enum { DEVICE_N_NAMES = 3 };
extern const char *const device_names[DEVICE_N_NAMES];

/* The default of a --device flag: $GRPO_DEVICE when set and not empty
 * (the test suites set cpu, so that checks held to fp32 references stay on
 * the CPU on a GPU machine), else "auto". */
const char *device_default(void);
/* *be = NULL for the CPU, else the opened device backend. auto: the GPU
 * when the build has CUDA and a device answers, else the CPU. cuda:
 * EX_UNAVAILABLE (69) with "FLAG cuda: ..." when the build lacks CUDA or no
 * device can be opened. Another value: EX_USAGE. flag names the option in
 * messages ("--device"). */
int device_select(const char *flag, const char *device, const backend **be, gerr *e);
/* Closes what device_select opened (after everything on it is freed). */
void device_release(const backend *be);
/* "cuda (NVIDIA H100 ..., sm_90)" or "cpu", for progress lines. */
void device_describe(const backend *be, char *buf, size_t n);

#endif
