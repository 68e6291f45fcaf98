/* Command-line flags from one table: parsing with typed values and ranges,
 * and the --help text (every flag with its default) from the same table, so
 * the help can never drift from what is parsed.
 *
 * Accepted forms: --name VALUE, --name=VALUE, -k VALUE for short names, and
 * bare --name for booleans. --help and --version are always there. Anything
 * wrong is a one-line error and exit 64 (EX_USAGE). */
#ifndef GRPO_FLAGS_H
#define GRPO_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef enum {
    FLAG_BOOL,   /* bool*: present = true */
    FLAG_INT,    /* long long*, within [min, max] */
    FLAG_DOUBLE, /* double*, within [min, max] */
    FLAG_STRING, /* const char**: points into argv */
    FLAG_CHOICE, /* const char**: one of `choices` ("a|b|c") */
    FLAG_SHARD,  /* shard_spec*: "i/n" with 0 <= i < n */
    FLAG_LIST,   /* string_list*: repeatable, every value kept in order */
} flag_kind;

typedef struct {
    uint32_t index, count; /* count 1 = everything */
} shard_spec;

typedef struct {
    const char **items;
    int n, cap;
} string_list;

typedef struct {
    const char *name;       /* "--temperature" */
    const char *short_name; /* "-k" or NULL */
    flag_kind kind;
    void *dest;
    const char *metavar; /* "T" */
    const char *help;    /* one line */
    double min, max;     /* FLAG_INT / FLAG_DOUBLE; min == max means no range */
    const char *choices; /* FLAG_CHOICE: "group|batch|none" */
} flag_spec;

enum { FLAGS_MAX = 96 };

typedef struct {
    const char *usage;   /* "grpo-advantage [flags]" */
    const char *summary; /* one paragraph: what the tool does */
    const flag_spec *flags;
    int n_flags;
    const char *epilog; /* exit codes, examples; may be NULL */
    string_list *positional; /* when set, arguments that are not flags (all of them after "--") go
                                here in order; when NULL they are a usage error */
    bool given[FLAGS_MAX]; /* filled by flags_parse: which flags were on the command line */
} flag_parser;

/* Parses argv into the dests (which hold the defaults beforehand). Handles
 * --help and --version (print, exit 0). Exits 64 on a usage error. */
void flags_parse(flag_parser *p, int argc, char **argv);
/* Prints one flag's --help line (name, value, help, default) on stdout. */
void flags_print_one(const flag_spec *f);
/* Whether a flag was given on the command line (after flags_parse). A name
 * the table lacks is a bug in the caller: exit 70 (EX_SOFTWARE) naming it. */
bool flags_given(const flag_parser *p, const char *name);

/* Kind tables: a library names the values of an enum in an array, in enum
 * order, and a tool's FLAG_CHOICE takes its choices from that array, so the
 * flag accepts exactly what the library parses. */

/* The names joined as a FLAG_CHOICE's choices ("a|b|c") into buf. A buf
 * too small is a bug in the caller: exit 70 (EX_SOFTWARE). */
const char *flags_choices(char *buf, size_t size, const char *const *names, int n);
/* flags_choices of a whole array of names into a char array buf. */
#define FLAGS_CHOICES(buf, names) flags_choices(buf, sizeof(buf), names, (int)(sizeof(names) / sizeof *(names)))
/* *index = the position of s among the n names; EX_USAGE "FLAG: expected
 * one of a|b|c, got 's'" when it is none of them. */
int flags_choice_parse(const char *flag, const char *const *names, int n, const char *s, int *index, gerr *e);

/* A number's bounds, each closed or open, checked where an option is
 * resolved (the flag table's min/max are closed only). */
typedef struct {
    double lo, hi;
    bool lo_open, hi_open;
} flag_range;

#define FLAG_RANGE(lo, hi) ((flag_range){(lo), (hi), false, false})         /* [lo, hi] */
#define FLAG_RANGE_OPEN_LO(lo, hi) ((flag_range){(lo), (hi), true, false})  /* (lo, hi] */
#define FLAG_RANGE_OPEN_HI(lo, hi) ((flag_range){(lo), (hi), false, true})  /* [lo, hi) */

/* EX_USAGE "FLAG: V is out of range [LO, HI)" unless v is within r (NaN never is). */
int flags_range_check(const char *flag, double v, flag_range r, gerr *e);

/* Shards select records by a stable hash of their id, so that shards of the
 * same input are disjoint and together hold every record, in any order. */
bool shard_contains(const shard_spec *s, const char *id, size_t id_len);

#endif
