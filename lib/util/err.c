#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

const char *tool_name(void) { return program_invocation_short_name; }

int gerr_vset(gerr *e, int code, const char *fmt, va_list ap) {
    if (!e) return code;
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    /* Messages are one line whatever data they quote. */
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return code;
}

int gerr_set(gerr *e, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gerr_vset(e, code, fmt, ap);
    va_end(ap);
    return code;
}

int gerr_at(gerr *e, int code, const char *file, long line, const char *fmt, ...) {
    if (!e) return code;
    char body[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (line > 0)
        gerr_set(e, code, "%s:%ld: %s", file ? file : "-", line, body);
    else
        gerr_set(e, code, "%s: %s", file ? file : "-", body);
    return code;
}

static void vprint(const char *fmt, va_list ap) {
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "%s: %s\n", tool_name(), buf);
}

void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(fmt, ap);
    va_end(ap);
    cleanup_run();
    exit(code);
}

void die_err(const gerr *e) { die(e->code ? e->code : EX_SOFTWARE, "%s", e->msg); }

void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(fmt, ap);
    va_end(ap);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die(EX_SOFTWARE, "out of memory allocating %zu bytes", n);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die(EX_SOFTWARE, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die(EX_SOFTWARE, "out of memory allocating %zu bytes", n);
    return q;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}
