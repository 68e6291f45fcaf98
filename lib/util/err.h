/* Errors: library code fills a gerr and returns; tools print it and exit.
 * Every message is one line. Where a record is at fault the message starts
 * with "FILE:LINE: " so the user can jump to it. Exit codes are sysexits.h. */
#ifndef GRPO_ERR_H
#define GRPO_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <sysexits.h>

typedef struct {
    int code;       /* 0 = no error, else a sysexits.h value */
    char msg[1024]; /* one line, no tool prefix, no newline */
} gerr;

/* Records an error and returns its code, so callers can `return gerr_set(...)`. */
int gerr_set(gerr *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, with "FILE:LINE: " in front. line <= 0 leaves the line out. */
int gerr_at(gerr *e, int code, const char *file, long line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int gerr_vset(gerr *e, int code, const char *fmt, va_list ap);

/* Prints "TOOL: message" on stderr, removes pending temporary outputs, exits. */
_Noreturn void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void die_err(const gerr *e);
/* Prints "TOOL: message" on stderr and goes on. */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The tool's name as errors print it (basename of argv[0]). */
const char *tool_name(void);

/* Allocation that dies (exit 70) instead of returning NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#endif
