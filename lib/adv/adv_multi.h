/* Multi-objective advantages (grpo-advantage --multi-objective).
 *
 * sum-then-normalize (the default, GRPO as TRL): the advantage is computed
 * from `reward`, the weighted sum that grpo-reward wrote.
 *
 * normalize-then-sum (GDPO, "Group reward-Decoupled Normalization Policy
 * Optimization for Multi-reward RL Optimization", 2026): each entry k of `rewards` is
 * normalised within the group on its own,
 *     A_k,i = (r_k,i - b_k,i) / (s_k + 1e-4)      (b, s as --baseline, --scale)
 * the record's sum is S_i = sum_k w_k A_k,i over its non-null entries, and
 * with --scale group the sums are normalised over the whole input:
 *     A_i = (S_i - mean(S)) / (std(S) + 1e-4).
 * A reward that is flat within a group adds 0 for that group, so one
 * function's spread cannot be hidden by another's (the "reward collapse"
 * GDPO is about). formats/advantaged.md is the user-facing specification. */
#ifndef GRPO_ADV_MULTI_H
#define GRPO_ADV_MULTI_H

#include <stdbool.h>
#include <stddef.h>

#include "../io/record.h"
#include "advantage.h"

typedef struct {
    char *name; /* decoded, as in the records' `rewards` */
    size_t len;
    double weight;
    bool from_flag; /* named by --weights */
    bool seen;      /* some record's `rewards` has this key */
} adv_objective;

typedef struct {
    adv_objective *obj; /* every name of --weights, then every other name met, in order */
    size_t n_obj, cap_obj;
    bool weights_given; /* --weights: every name met must be one of its names */
    /* one group's values: row i, column k = record i, objective k */
    double *val;
    bool *has;   /* the cell holds a number */
    bool *taken; /* the record has the key (a number or null): a second one is an error */
    size_t rows, cap_cells;
    double *col, *col_a; /* one column and its advantages */
    bool *col_valid;
    size_t cap_col;
} adv_multi;

void adv_multi_init(adv_multi *m);
void adv_multi_free(adv_multi *m);

/* "sum-then-normalize|normalize-then-sum"; EX_USAGE on anything else. */
int adv_parse_multi(const char *s, adv_multi_mode *out, gerr *e);

/* --weights NAME[:W][,NAME[:W]...] (grpo-reward's --fn list can be given as
 * is; W defaults to 1). EX_USAGE when malformed or a name comes twice. */
int adv_multi_set_weights(adv_multi *m, const char *spec, gerr *e);

/* Starts a group of n records (row i belongs to the group's i-th record). */
void adv_multi_begin(adv_multi *m, size_t n);
/* Reads record r's `rewards` into row i. EX_DATAERR (FILE:LINE) when
 * `rewards` is malformed or names a reward --weights does not. */
int adv_multi_load(adv_multi *m, size_t i, const record *r, gerr *e);
/* The group's weighted sums of per-reward normalised values: S[i] for each
 * record with at least one numeric entry (valid[i]). Returns true when the
 * group is flat: every reward flat within it, so every S[i] is exactly 0. */
bool adv_multi_sums(adv_multi *m, adv_baseline baseline, adv_scale scale, double *S, bool *valid);
/* After the whole input: EX_DATAERR when a name of --weights was never met. */
int adv_multi_check_unused(const adv_multi *m, const char *file, gerr *e);

/* The pure arithmetic of adv_multi_sums, for unit tests: val/has are n x f
 * row-major, w[k] the weights; col, col_a (n doubles) and col_valid (n) are
 * scratch. */
bool adv_normalize_then_sum(const double *val, const bool *has, size_t n, size_t f, const double *w,
                            adv_baseline baseline, adv_scale scale, double *col, double *col_a, bool *col_valid,
                            double *S, bool *valid);

#endif
