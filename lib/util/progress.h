/* Progress on stderr: only when stderr is a terminal, or when forced
 * (--progress); redrawn at most ten times a second; never on stdout. */
#ifndef GRPO_PROGRESS_H
#define GRPO_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *label;
    const char *unit; /* "records" */
    int64_t total;    /* <= 0: unknown, no bar */
    int64_t done;
    bool enabled;
    double started, last_drawn; /* seconds, monotonic */
} progress;

void progress_start(progress *p, const char *label, const char *unit, int64_t total, bool force);
void progress_update(progress *p, int64_t done);
/* Draws the final state and ends the line. */
void progress_finish(progress *p);
#endif
