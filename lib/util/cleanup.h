/* Temporary outputs that must not survive a failure.
 *
 * A tool writes each output under a temporary name and renames it into place
 * when complete. Until then the temporary path is registered here; die() and
 * the signal handlers (SIGINT, SIGTERM, SIGHUP, SIGPIPE) remove every
 * registered path, so a failed or interrupted run leaves no partial output.
 * kill -9 cannot be caught: then the temporary (a dot-file next to the
 * output, named ".NAME.tmp-PID") stays, but the output path itself is never
 * half-written.
 *
 * This is the one piece of process-wide mutable state in lib/: a signal
 * handler can reach nothing else. */
#ifndef GRPO_CLEANUP_H
#define GRPO_CLEANUP_H

#include <stdbool.h>

/* Installs the signal handlers (idempotent). */
void cleanup_install_handlers(void);
/* Registers a path; is_dir removes a whole directory tree. Returns false when full. */
bool cleanup_register(const char *path, bool is_dir);
void cleanup_unregister(const char *path);
/* Removes every registered path (called by die and the handlers). */
void cleanup_run(void);

#endif
