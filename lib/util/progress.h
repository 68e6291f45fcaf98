/* Progress on stderr: only when stderr is a terminal, or when forced
 * (--progress); redrawn at most ten times a second; never on stdout. */
#ifndef GRPO_PROGRESS_H
#define GRPO_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *label;
    const char *unit; /* "records"; NULL: no count, the time alone */
    int64_t total;    /* <= 0: unknown, no bar */
    int64_t done;
    bool enabled;
    double started, last_drawn; /* seconds, monotonic */
} progress;

void progress_start(progress *p, const char *label, const char *unit, int64_t total, bool force);
void progress_update(progress *p, int64_t done);
/* A phase without counts (unit NULL): "LABEL 0.0s" drawn at once, its time
 * when it ends (progress_finish). */
void progress_phase(progress *p, const char *label, bool force);
/* Draws the final state and ends the line. */
void progress_finish(progress *p);
/* With n == 0 and no progress shown, says "TOOL: 0 UNIT" on stderr anyway, as
 * the progress line would have: an empty input, exit 0 and an empty output
 * with no word look like a tool that did nothing by mistake. */
void progress_note_empty(const progress *p, long long n, const char *unit);
#endif
