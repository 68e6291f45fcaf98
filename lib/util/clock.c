#include "clock.h"

#include <time.h>

/* clock_gettime fails only for a clock the system lacks; every clock here is
 * in POSIX and Linux, so a failure reads as 0 rather than as garbage. */
static double seconds_of(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double now_seconds(void) { return seconds_of(CLOCK_MONOTONIC); }
double wall_seconds(void) { return seconds_of(CLOCK_REALTIME); }
double cpu_seconds(void) { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }
double thread_cpu_seconds(void) { return seconds_of(CLOCK_THREAD_CPUTIME_ID); }
