/* One clock for the whole tree: seconds as a double. Monotonic time for
 * durations, timeouts and rates; wall time where a value is stored (unix
 * seconds); CPU time for benchmarks. */
#ifndef GRPO_CLOCK_H
#define GRPO_CLOCK_H

/* Seconds on a monotonic clock (arbitrary origin, never goes back). */
double now_seconds(void);
/* Unix time in seconds, with its fraction. */
double wall_seconds(void);
/* CPU seconds used by this process, and by the calling thread. */
double cpu_seconds(void);
double thread_cpu_seconds(void);

#endif
