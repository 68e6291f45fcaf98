#include "flags.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "idhash.h"

static _Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void usage_error(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die(EX_USAGE, "%s (see %s --help)", msg, tool_name());
}

static bool in_range(const flag_spec *f, double v) {
    return f->min == f->max || (v >= f->min && v <= f->max);
}

static void format_number(char *buf, size_t n, double v) {
    if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%g", v);
}

/* "[lo, hi]", "(lo, hi]", ...: a range as the errors print it. */
static void format_range(char *buf, size_t n, double lo, double hi, bool lo_open, bool hi_open) {
    char a[32], b[32];
    format_number(a, sizeof a, lo);
    format_number(b, sizeof b, hi);
    snprintf(buf, n, "%c%s, %s%c", lo_open ? '(' : '[', a, b, hi_open ? ')' : ']');
}

static bool choice_ok(const char *choices, const char *v) {
    size_t n = strlen(v);
    const char *p = choices;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static void list_append(string_list *l, const char *v) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4;
        l->items = xrealloc(l->items, (size_t)l->cap * sizeof *l->items);
    }
    l->items[l->n++] = v;
}

static _Noreturn void out_of_range(const flag_spec *f, const char *v) {
    char range[80];
    format_range(range, sizeof range, f->min, f->max, false, false);
    usage_error("%s: %s is out of range %s", f->name, v, range);
}

static void set_value(const flag_spec *f, const char *v) {
    char *end;
    switch (f->kind) {
    case FLAG_BOOL: break;
    case FLAG_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno) usage_error("%s: expected an integer, got '%s'", f->name, v);
        if (!in_range(f, (double)x)) out_of_range(f, v);
        *(long long *)f->dest = x;
        break;
    }
    case FLAG_DOUBLE: {
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x)) usage_error("%s: expected a number, got '%s'", f->name, v);
        if (!in_range(f, x)) out_of_range(f, v);
        *(double *)f->dest = x;
        break;
    }
    case FLAG_STRING: *(const char **)f->dest = v; break;
    case FLAG_CHOICE:
        if (!choice_ok(f->choices, v)) usage_error("%s: expected one of %s, got '%s'", f->name, f->choices, v);
        *(const char **)f->dest = v;
        break;
    case FLAG_SHARD: {
        unsigned long i, n;
        int used = 0;
        if (sscanf(v, "%lu/%lu%n", &i, &n, &used) != 2 || v[used] || n == 0 || i >= n || n > UINT32_MAX)
            usage_error("%s: expected i/n with 0 <= i < n, got '%s'", f->name, v);
        ((shard_spec *)f->dest)->index = (uint32_t)i;
        ((shard_spec *)f->dest)->count = (uint32_t)n;
        break;
    }
    case FLAG_LIST: list_append(f->dest, v); break;
    }
}

/* The default as --help shows it, read from the destination before parsing. */
static void describe_default(const flag_spec *f, char *buf, size_t n) {
    buf[0] = 0;
    switch (f->kind) {
    case FLAG_BOOL: snprintf(buf, n, "%s", *(bool *)f->dest ? "on" : "off"); break;
    case FLAG_INT: snprintf(buf, n, "%lld", *(long long *)f->dest); break;
    case FLAG_DOUBLE: snprintf(buf, n, "%g", *(double *)f->dest); break;
    case FLAG_STRING:
    case FLAG_CHOICE: {
        const char *s = *(const char **)f->dest;
        snprintf(buf, n, "%s", s ? s : "none");
        break;
    }
    case FLAG_SHARD: {
        const shard_spec *s = f->dest;
        if (s->count <= 1) snprintf(buf, n, "all records");
        else snprintf(buf, n, "%u/%u", s->index, s->count);
        break;
    }
    case FLAG_LIST: snprintf(buf, n, "none"); break;
    }
}

void flags_print_one(const flag_spec *f) {
    char left[96], def[128];
    /* a flag whose only name is short (-k) is shown once, not as "-k, -k" */
    if (f->short_name && strcmp(f->short_name, f->name) != 0)
        snprintf(left, sizeof left, "%s, %s%s%s", f->short_name, f->name, f->metavar ? " " : "",
                 f->metavar ? f->metavar : "");
    else
        snprintf(left, sizeof left, "%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
    /* a help text that says its own default (one read from the environment)
     * is not given a second one */
    if (strstr(f->help, "(default: ")) {
        printf("  %-28s %s\n", left, f->help);
        return;
    }
    describe_default(f, def, sizeof def);
    printf("  %-28s %s (default: %s)\n", left, f->help, def);
}

static void print_help(const flag_parser *p) {
    printf("usage: %s\n\n%s\n\nflags:\n", p->usage, p->summary);
    for (int i = 0; i < p->n_flags; i++) flags_print_one(&p->flags[i]);
    printf("  %-28s %s\n", "--help", "print this help and exit");
    printf("  %-28s %s\n", "--version", "print the version and exit");
    if (p->epilog) printf("\n%s\n", p->epilog);
    printf("\nexit status: 0 ok, 64 usage, 65 bad input data, 66 input missing, 69 a needed program or\n"
           "service unavailable, 70 internal error, 71 system error, 73 an output cannot be created\n"
           "(checked before any work), 74 I/O error, 75 temporary failure (rerun later).\n");
}

static int find_flag(const flag_parser *p, const char *name, size_t len) {
    for (int i = 0; i < p->n_flags; i++) {
        const flag_spec *f = &p->flags[i];
        if ((strlen(f->name) == len && !strncmp(f->name, name, len)) ||
            (f->short_name && strlen(f->short_name) == len && !strncmp(f->short_name, name, len)))
            return i;
    }
    return -1;
}

void flags_parse(flag_parser *p, int argc, char **argv) {
    if (p->n_flags > FLAGS_MAX) die(EX_SOFTWARE, "too many flags in table");
    memset(p->given, 0, sizeof p->given);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            print_help(p);
            exit(0);
        }
        if (!strcmp(arg, "--version")) {
            printf("%s %s\n", tool_name(), GRPO_VERSION);
            exit(0);
        }
        if (p->positional && !strcmp(arg, "--")) {
            for (i++; i < argc; i++) list_append(p->positional, argv[i]);
            break;
        }
        if (arg[0] != '-' || !arg[1]) {
            if (!p->positional) usage_error("unexpected argument '%s'", arg);
            list_append(p->positional, arg);
            continue;
        }
        const char *eq = !strncmp(arg, "--", 2) ? strchr(arg, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        int idx = find_flag(p, arg, name_len);
        if (idx < 0) usage_error("unknown flag '%.*s'", (int)name_len, arg);
        const flag_spec *f = &p->flags[idx];
        p->given[idx] = true;
        if (f->kind == FLAG_BOOL) {
            if (eq) usage_error("%s takes no value", f->name);
            *(bool *)f->dest = true;
            continue;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc) usage_error("%s needs a value (%s)", f->name, f->metavar ? f->metavar : "VALUE");
            value = argv[++i];
        }
        set_value(f, value);
    }
}

bool flags_given(const flag_parser *p, const char *name) {
    int idx = find_flag(p, name, strlen(name));
    if (idx < 0) die(EX_SOFTWARE, "flags_given: the flag table has no %s", name);
    return p->given[idx];
}

const char *flags_choices(char *buf, size_t size, const char *const *names, int n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(buf + len, size - len, "%s%s", i ? "|" : "", names[i]);
        if (w < 0 || (size_t)w >= size - len) die(EX_SOFTWARE, "flags_choices: %zu bytes are too few for %s", size, names[0]);
        len += (size_t)w;
    }
    return buf;
}

int flags_choice_parse(const char *flag, const char *const *names, int n, const char *s, int *index, gerr *e) {
    for (int i = 0; i < n; i++) {
        if (!strcmp(s, names[i])) {
            *index = i;
            return 0;
        }
    }
    char choices[256];
    return gerr_set(e, EX_USAGE, "%s: expected one of %s, got '%s'", flag, flags_choices(choices, sizeof choices, names, n),
                    s);
}

int flags_range_check(const char *flag, double v, flag_range r, gerr *e) {
    bool above = r.lo_open ? v > r.lo : v >= r.lo, below = r.hi_open ? v < r.hi : v <= r.hi;
    if (above && below) return 0;
    char got[32], range[80];
    format_number(got, sizeof got, v);
    format_range(range, sizeof range, r.lo, r.hi, r.lo_open, r.hi_open);
    return gerr_set(e, EX_USAGE, "%s: %s is out of range %s", flag, got, range);
}

bool shard_contains(const shard_spec *s, const char *id, size_t id_len) {
    if (s->count <= 1) return true;
    return idhash_shard(id, id_len) % s->count == s->index;
}
