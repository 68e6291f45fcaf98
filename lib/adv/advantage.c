/* The grpo-advantage stream: read scored records a group at a time, append
 * `advantage`, write them back with every other field untouched.
 *
 * --scale group|none stream: memory holds one group (plus the set of ids
 * seen, to catch split groups). --scale batch needs the std of the whole
 * input before the first advantage, so pass 1 validates everything, gathers
 * the non-null rewards (8 bytes each) and spills the raw lines of the
 * shard's groups to an unlinked temporary file; pass 2 reads them back.
 * --multi-objective normalize-then-sum --scale group takes the same two
 * passes, gathering the groups' weighted sums instead of the rewards. */
#include "advantage.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/jsonl.h"
#include "../util/progress.h"
#include "../util/idset.h"
#include "adv_multi.h"
#include "adv_stats.h"

void adv_opts_default(adv_opts *o) {
    memset(o, 0, sizeof *o);
    o->scale = ADV_SCALE_GROUP;
    o->baseline = ADV_BASELINE_MEAN;
    o->shard.index = 0;
    o->shard.count = 1;
}

int adv_parse_scale(const char *s, adv_scale *out, gerr *e) {
    if (!strcmp(s, "group")) *out = ADV_SCALE_GROUP;
    else if (!strcmp(s, "batch")) *out = ADV_SCALE_BATCH;
    else if (!strcmp(s, "none")) *out = ADV_SCALE_NONE;
    else return gerr_set(e, EX_USAGE, "--scale: expected group, batch or none, got '%s'", s);
    return 0;
}

int adv_parse_baseline(const char *s, adv_baseline *out, gerr *e) {
    if (!strcmp(s, "mean")) *out = ADV_BASELINE_MEAN;
    else if (!strcmp(s, "loo")) *out = ADV_BASELINE_LOO;
    else return gerr_set(e, EX_USAGE, "--baseline: expected mean or loo, got '%s'", s);
    return 0;
}

/* ---- reading groups ------------------------------------------------------- */

/* One record and the fields this stage reads from it. */
typedef struct {
    record rec;
    strbuf id;     /* decoded */
    double reward; /* when valid */
    bool valid;    /* reward is a number (not null, not missing) */
} member;

typedef struct {
    member *m; /* m[0..n-1]: the group; m[n]: the next group's first record when `ahead` */
    size_t n, cap;
    bool ahead, eof;
    double *r, *a; /* scratch for the math, cap entries */
    bool *valid;
} group_buf;

static void group_buf_reserve(group_buf *g, size_t need) {
    if (need <= g->cap) return;
    size_t cap = g->cap ? g->cap : 16;
    while (cap < need) cap *= 2;
    g->m = xrealloc(g->m, cap * sizeof *g->m);
    for (size_t i = g->cap; i < cap; i++) {
        record_init(&g->m[i].rec);
        memset(&g->m[i].id, 0, sizeof g->m[i].id);
    }
    g->r = xrealloc(g->r, cap * sizeof *g->r);
    g->a = xrealloc(g->a, cap * sizeof *g->a);
    g->valid = xrealloc(g->valid, cap * sizeof *g->valid);
    g->cap = cap;
}

static void group_buf_free(group_buf *g) {
    for (size_t i = 0; i < g->cap; i++) {
        record_free(&g->m[i].rec);
        sb_free(&g->m[i].id);
    }
    free(g->m);
    free(g->r);
    free(g->a);
    free(g->valid);
    memset(g, 0, sizeof *g);
}

/* 1 = a record in *m, 0 = end of input, -1 = error. */
static int read_member(jsonl_reader *rd, member *m, gerr *e) {
    int got = jsonl_next(rd, &m->rec, e);
    if (got <= 0) return got;
    if (record_get_string(&m->rec, "id", true, &m->id, NULL, e)) return -1;
    sb_reserve(&m->id, 0); /* an empty id still gets a buffer: memcmp and hashing never see NULL */
    int present;
    if (record_get_number(&m->rec, "reward", false, &m->reward, &present, e)) return -1;
    m->valid = present == 2;
    return 1;
}

/* The id as the input wrote it (a JSON string, escapes kept), for messages. */
static int id_text_len(const record *r, const char **text) {
    const rec_field *f = record_find(r, "id");
    *text = f ? f->val : "";
    size_t len = f ? f->val_len : 0;
    return (int)(len > 200 ? 200 : len);
}

typedef struct {
    const adv_opts *o;
    jsonl_reader rd;
    bool rd_open;
    group_buf g;
    idset seen; /* ids of finished groups; unused with --allow-partial */
    adv_multi mo; /* --multi-objective normalize-then-sum: the rewards and their weights */
    progress pg;
    long long read;
} stage;

/* A group starts with g->m[0]: its id must not have had a group already. */
static int start_group(stage *s, gerr *e) {
    if (s->o->allow_partial) return 0;
    const member *m = &s->g.m[0];
    long ended = idset_find(&s->seen, m->id.data, m->id.len);
    if (!ended) return 0;
    const char *id;
    int id_len = id_text_len(&m->rec, &id);
    return gerr_at(e, EX_DATAERR, m->rec.file, m->rec.line,
                   "id %.*s appears again after its group ended at line %ld: the records of a group must be "
                   "contiguous (--allow-partial takes each run as a group)",
                   id_len, id, ended);
}

/* A group of one record is an error; the input is read on for the same id
 * first, since a group split by other records (a b a b) would otherwise be
 * reported as "1 record" with no hint of where the rest is. */
static void lone_record_error(stage *s, gerr *e) {
    const member *first = &s->g.m[0];
    const char *id;
    int id_len = id_text_len(&first->rec, &id);
    long again = 0;
    member m = {0};
    record_init(&m.rec);
    int got = 0;
    while (!s->g.eof && (got = read_member(&s->rd, &m, e)) > 0)
        if (m.id.len == first->id.len && !memcmp(m.id.data, first->id.data, m.id.len)) {
            again = m.rec.line;
            break;
        }
    record_free(&m.rec);
    sb_free(&m.id);
    if (got < 0) return; /* the input's own error comes first */
    if (again)
        gerr_at(e, EX_DATAERR, first->rec.file, first->rec.line,
                "group id %.*s is split: its records at lines %ld and %ld have other records between them; "
                "the records of a group must be contiguous (--allow-partial takes each run as a group)",
                id_len, id, first->rec.line, again);
    else
        gerr_at(e, EX_DATAERR, first->rec.file, first->rec.line,
                "group id %.*s has 1 record: a group needs at least 2 (the K completions of a prompt; "
                "--allow-partial gives it advantage 0)",
                id_len, id);
}

/* 1 = a group in s->g.m[0..n-1], 0 = end of input, -1 = error. */
static int next_group(stage *s, gerr *e) {
    group_buf *g = &s->g;
    if (g->ahead) { /* the record that ended the last group starts this one */
        member t = g->m[0];
        g->m[0] = g->m[g->n];
        g->m[g->n] = t;
        g->n = 1;
        g->ahead = false;
        if (start_group(s, e)) return -1;
    } else {
        g->n = 0;
    }
    while (!g->eof) {
        group_buf_reserve(g, g->n + 1);
        member *m = &g->m[g->n];
        int got = read_member(&s->rd, m, e);
        if (got < 0) return -1;
        if (got == 0) {
            g->eof = true;
            break;
        }
        s->read++;
        progress_update(&s->pg, s->read);
        if (g->n == 0) {
            g->n = 1;
            if (start_group(s, e)) return -1;
            continue;
        }
        if (m->id.len == g->m[0].id.len && !memcmp(m->id.data, g->m[0].id.data, m->id.len)) {
            g->n++;
            continue;
        }
        g->ahead = true;
        break;
    }
    if (g->n == 0) return 0;
    const member *first = &g->m[0];
    if (g->n == 1 && !s->o->allow_partial) {
        lone_record_error(s, e);
        return -1;
    }
    if (!s->o->allow_partial) idset_add(&s->seen, first->id.data, first->id.len, g->m[g->n - 1].rec.line);
    return 1;
}

/* ---- per group: statistics and output ------------------------------------- */

static void load_rewards(group_buf *g) {
    for (size_t i = 0; i < g->n; i++) {
        g->r[i] = g->m[i].reward;
        g->valid[i] = g->m[i].valid;
    }
}

/* Checks the `rewards` field of every member (read only for --stats), and
 * adds them to st when st is not NULL. */
static int read_rewards(const stage *s, adv_stats *st, gerr *e) {
    if (!s->o->stats) return 0;
    for (size_t i = 0; i < s->g.n; i++)
        if (adv_stats_read_rewards(st, &s->g.m[i].rec, e)) return -1;
    return 0;
}

/* The values the group's advantages come from, into g->r and g->valid: the
 * rewards, or with normalize-then-sum the weighted sums of the per-reward
 * normalised values (which also checks every record's `rewards`).
 * 1 = the group is flat, 0 = it is not, -1 = error. */
static int group_values(stage *s, gerr *e) {
    group_buf *g = &s->g;
    if (s->o->multi == ADV_SUM_THEN_NORMALIZE) {
        load_rewards(g);
        return adv_group_stats_of(g->r, g->valid, g->n).flat;
    }
    adv_multi_begin(&s->mo, g->n);
    for (size_t i = 0; i < g->n; i++)
        if (adv_multi_load(&s->mo, i, &g->m[i].rec, e)) return -1;
    return adv_multi_sums(&s->mo, s->o->baseline, s->o->scale, g->r, g->valid);
}

/* Adds a group of the shard to the statistics. The reward moments are of
 * `reward` in every mode; flatness is the mode's (see group_values). */
static int account_group(stage *s, adv_stats *st, gerr *e) {
    group_buf *g = &s->g;
    load_rewards(g);
    adv_group_stats gs = adv_group_stats_of(g->r, g->valid, g->n);
    st->records += (long long)g->n;
    st->groups++;
    st->null_rewards += (long long)(g->n - gs.n_valid);
    st->group_std_sum += gs.std;
    for (size_t i = 0; i < g->n; i++)
        if (g->valid[i]) welford_push(&st->reward, g->r[i]);
    int flat = group_values(s, e);
    if (flat < 0) return -1;
    if (flat) st->groups_flat++;
    if (flat && s->o->drop_flat) st->groups_dropped++;
    else st->records_written += (long long)g->n;
    return read_rewards(s, st, e);
}

/* What the whole input's values give for --scale batch (the rewards' std) or
 * normalize-then-sum --scale group (the sums' mean and std). */
typedef struct {
    double mean, std;
} batch_norm;

/* normalize-then-sum: the group's sums, normalised over the input (--scale
 * group) or as they are (--scale none), into g->a; a flat group is exactly
 * 0. 1 = the group is flat, 0 = it is not, -1 = error. */
static int multi_advantages(stage *s, batch_norm bn, gerr *e) {
    group_buf *g = &s->g;
    int flat = group_values(s, e);
    if (flat < 0) return -1;
    for (size_t i = 0; i < g->n; i++) {
        if (!g->valid[i]) continue;
        if (flat) g->a[i] = 0;
        else if (s->o->scale == ADV_SCALE_NONE) g->a[i] = g->r[i];
        else g->a[i] = (g->r[i] - bn.mean) / (bn.std + ADV_STD_EPS);
    }
    return flat;
}

static int emit_group(stage *s, jsonl_writer *w, batch_norm bn, gerr *e) {
    group_buf *g = &s->g;
    int flat;
    if (s->o->multi == ADV_NORMALIZE_THEN_SUM) {
        if ((flat = multi_advantages(s, bn, e)) < 0) return -1;
    } else {
        load_rewards(g);
        flat = adv_group_advantages(g->r, g->valid, g->n, s->o->scale, s->o->baseline, bn.std, g->a).flat;
    }
    if (flat && s->o->drop_flat) return 0;
    for (size_t i = 0; i < g->n; i++) {
        record *r = &g->m[i].rec;
        if (g->valid[i]) record_set_number(r, "advantage", g->a[i]);
        else record_set_null(r, "advantage");
        if (jsonl_write(w, r, e)) return -1;
    }
    return 0;
}

static bool in_shard(const stage *s) {
    return shard_contains(&s->o->shard, s->g.m[0].id.data, s->g.m[0].id.len);
}

/* ---- one pass: --scale group|none ----------------------------------------- */

static int run_stream(stage *s, jsonl_writer *w, adv_stats *st, gerr *e) {
    int got;
    while ((got = next_group(s, e)) == 1) {
        if (!in_shard(s)) {
            /* validated like any other group, so every shard fails alike on bad input */
            if (read_rewards(s, NULL, e) || group_values(s, e) < 0) return -1;
            continue;
        }
        batch_norm none = {0, 0};
        if (account_group(s, st, e) || emit_group(s, w, none, e)) return -1;
    }
    return got;
}

/* ---- two passes: --scale batch -------------------------------------------- */

typedef struct {
    int fd;
    strbuf buf; /* staged bytes, written out in large blocks */
} spill;

static int spill_flush(spill *sp, gerr *e) {
    const char *p = sp->buf.data;
    size_t left = sp->buf.len;
    while (left) {
        ssize_t n = write(sp->fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            return gerr_set(e, EX_IOERR, "temporary file of the two-pass mode: write failed: %s", strerror(errno));
        }
        p += n;
        left -= (size_t)n;
    }
    sb_clear(&sp->buf);
    return 0;
}

/* Creates the spill file in $TMPDIR and unlinks it at once: the descriptor
 * keeps the data, and no failure, not even kill -9, can leave it behind. */
static int spill_open(spill *sp, gerr *e) {
    memset(sp, 0, sizeof *sp);
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    strbuf path = {0};
    sb_printf(&path, "%s/grpo-advantage.XXXXXX", dir);
    sp->fd = mkstemp(path.data);
    if (sp->fd < 0) {
        gerr_set(e, EX_IOERR, "%s: cannot create a temporary file for the two-pass mode: %s", dir, strerror(errno));
        sb_free(&path);
        return EX_IOERR;
    }
    if (unlink(path.data) != 0) {
        gerr_set(e, EX_IOERR, "%s: cannot unlink temporary file: %s", path.data, strerror(errno));
        close(sp->fd);
        sb_free(&path);
        return EX_IOERR;
    }
    sb_free(&path);
    return 0;
}

static void spill_close(spill *sp) {
    if (sp->fd >= 0) close(sp->fd);
    sp->fd = -1;
    sb_free(&sp->buf);
}

static int spill_group(spill *sp, const group_buf *g, gerr *e) {
    for (size_t i = 0; i < g->n; i++) {
        /* rec.text is the line as read; fields set later live elsewhere */
        sb_append(&sp->buf, g->m[i].rec.text.data, g->m[i].rec.text.len);
        sb_putc(&sp->buf, '\n');
    }
    return sp->buf.len >= (1u << 20) ? spill_flush(sp, e) : 0;
}

typedef struct {
    double *v;
    size_t n, cap;
} dvec;

static void dvec_push(dvec *d, double x) {
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 1024;
        d->v = xrealloc(d->v, d->cap * sizeof *d->v);
    }
    d->v[d->n++] = x;
}

typedef struct {
    size_t *v;
    size_t n, cap;
} zvec;

static void zvec_push(zvec *z, size_t x) {
    if (z->n == z->cap) {
        z->cap = z->cap ? z->cap * 2 : 1024;
        z->v = xrealloc(z->v, z->cap * sizeof *z->v);
    }
    z->v[z->n++] = x;
}

static int run_batch(stage *s, jsonl_writer *w, adv_stats *st, gerr *e) {
    spill sp;
    if (spill_open(&sp, e)) return -1;
    dvec values = {0}; /* every value normalised over the input (rewards or sums), all shards */
    zvec sizes = {0};   /* sizes of the shard's groups, in spill order */
    int rc = -1, got;
    jsonl_reader back;
    bool back_open = false;

    /* Pass 1: validate, gather, spill. */
    while ((got = next_group(s, e)) == 1) {
        if (group_values(s, e) < 0) goto out;
        for (size_t i = 0; i < s->g.n; i++)
            if (s->g.valid[i]) dvec_push(&values, s->g.r[i]);
        if (!in_shard(s)) {
            if (read_rewards(s, NULL, e)) goto out;
            continue;
        }
        /* Sizes, not ids, mark the groups in the spill: with other shards
         * left out, two runs of one id (--allow-partial) may become adjacent. */
        zvec_push(&sizes, s->g.n);
        if (account_group(s, st, e) || spill_group(&sp, &s->g, e)) goto out;
    }
    if (got < 0 || spill_flush(&sp, e)) goto out;
    /* The whole input's, so that shards of one input agree with an unsharded run. */
    batch_norm bn = {0, adv_std(values.v, values.n)};
    for (size_t i = 0; i < values.n; i++) bn.mean += values.v[i];
    if (values.n) bn.mean /= (double)values.n;
    free(values.v);
    values.v = NULL;

    /* Pass 2: read the spill back through a fresh descriptor. */
    char fd_path[64];
    snprintf(fd_path, sizeof fd_path, "/dev/fd/%d", sp.fd);
    if (jsonl_open(&back, fd_path, e)) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        gerr_set(e, EX_IOERR, "cannot read back the temporary file of the two-pass mode: %s", why);
        goto out;
    }
    back_open = true;
    progress_finish(&s->pg);
    progress_start(&s->pg, "grpo-advantage (pass 2)", "records", st->records, s->o->progress);
    long long done = 0;
    for (size_t k = 0; k < sizes.n; k++) {
        group_buf_reserve(&s->g, sizes.v[k]);
        s->g.n = sizes.v[k];
        for (size_t i = 0; i < sizes.v[k]; i++) {
            got = read_member(&back, &s->g.m[i], e);
            if (got == 0) gerr_set(e, EX_SOFTWARE, "temporary file of the two-pass mode ended early");
            if (got <= 0) goto out;
        }
        if (emit_group(s, w, bn, e)) goto out;
        done += (long long)sizes.v[k];
        progress_update(&s->pg, done);
    }
    rc = 0;
out:
    if (back_open) jsonl_close(&back);
    spill_close(&sp);
    free(values.v);
    free(sizes.v);
    return rc;
}

/* ---- the stage ------------------------------------------------------------ */

int adv_run(const adv_opts *o, gerr *e) {
    stage s;
    memset(&s, 0, sizeof s);
    s.o = o;
    idset_init(&s.seen);
    adv_multi_init(&s.mo);
    adv_stats st;
    adv_stats_init(&st);
    jsonl_writer w;
    outstream stats_out;
    bool w_open = false, stats_open = false;
    int rc = -1;

    if (o->multi == ADV_SUM_THEN_NORMALIZE && o->weights) {
        gerr_set(e, EX_USAGE, "--weights: only with --multi-objective normalize-then-sum (`reward` already holds "
                              "the weighted sum)");
        goto out;
    }
    if (o->multi == ADV_NORMALIZE_THEN_SUM && o->scale == ADV_SCALE_BATCH) {
        gerr_set(e, EX_USAGE, "--scale batch: not with --multi-objective normalize-then-sum (--scale group already "
                              "normalises the sums over the whole input)");
        goto out;
    }
    if (o->weights && adv_multi_set_weights(&s.mo, o->weights, e)) goto out;
    if (jsonl_open(&s.rd, o->in, e)) goto out;
    s.rd_open = true;
    /* Outputs are opened before any work, so a bad path fails at once. */
    if (jsonl_writer_open(&w, o->out, e)) goto out;
    w_open = true;
    if (o->stats) {
        if (outstream_open(&stats_out, o->stats, 0, e)) goto out;
        stats_open = true;
    }
    progress_start(&s.pg, "grpo-advantage", "records", 0, o->progress);
    /* two passes when advantages need a statistic of the whole input */
    bool whole_input = o->scale == ADV_SCALE_BATCH || (o->multi == ADV_NORMALIZE_THEN_SUM && o->scale == ADV_SCALE_GROUP);
    if ((whole_input ? run_batch(&s, &w, &st, e) : run_stream(&s, &w, &st, e)) != 0) goto out;
    if (adv_multi_check_unused(&s.mo, o->in && strcmp(o->in, "-") ? o->in : "<stdin>", e)) goto out;
    progress_finish(&s.pg);
    progress_note_empty(&s.pg, s.read, "records");

    w_open = false;
    if (jsonl_writer_commit(&w, e)) goto out;
    if (stats_open) {
        strbuf text = {0};
        adv_stats_to_json(&st, &text);
        int wrc = outstream_write(&stats_out, text.data, text.len, e);
        sb_free(&text);
        if (wrc) goto out;
        stats_open = false;
        if (outstream_commit(&stats_out, e)) goto out;
    }
    rc = 0;
out:
    if (w_open) jsonl_writer_abort(&w);
    if (stats_open) outstream_abort(&stats_out);
    if (s.rd_open) jsonl_close(&s.rd);
    group_buf_free(&s.g);
    idset_free(&s.seen);
    adv_multi_free(&s.mo);
    adv_stats_free(&st);
    return rc ? (e->code ? e->code : EX_SOFTWARE) : 0;
}
