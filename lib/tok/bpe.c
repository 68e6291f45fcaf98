/* The BPE model: vocab map, merges by rank, and the merge loop.
 *
 * Symbols are ids from the start: each byte of a pre-token becomes the id
 * of its mapped character, and a merge maps a pair of ids (a, b) to
 * (rank, id of a+b). The loop is HF's Word::merge_all: a binary heap of
 * candidate pairs ordered by (rank, position), symbols in a linked list,
 * stale heap entries skipped when the pair at that position no longer
 * yields the same new id. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ h >> 29;
}

static uint64_t hash_pair(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

tokenizer *tok_alloc(size_t n_ids) {
    tokenizer *t = xcalloc(1, sizeof *t);
    t->n_ids = n_ids;
    t->model_str = xcalloc(n_ids ? n_ids : 1, sizeof *t->model_str);
    t->unk_id = -1;
    return t;
}

int tok_set_vocab(tokenizer *t, int32_t id, const char *s, size_t len, gerr *e) {
    if (id < 0 || (size_t)id >= t->n_ids) return gerr_set(e, EX_DATAERR, "vocab id %d is out of range", (int)id);
    if (t->model_str[id]) return gerr_set(e, EX_DATAERR, "vocab id %d appears twice", (int)id);
    t->model_str[id] = xstrndup(s, len);
    return 0;
}

void tok_index_vocab(tokenizer *t) {
    size_t cap = 16;
    while (cap < 2 * t->n_ids) cap *= 2;
    t->vocab_cap = cap;
    t->vocab_slot = xmalloc(cap * sizeof *t->vocab_slot);
    for (size_t i = 0; i < cap; i++) t->vocab_slot[i] = -1;
    for (size_t id = 0; id < t->n_ids; id++) {
        const char *s = t->model_str[id];
        if (!s) continue;
        size_t len = strlen(s), h = hash_bytes(s, len) & (cap - 1);
        /* a duplicate string keeps the later id, as a HashMap built in order would */
        while (t->vocab_slot[h] >= 0 && strcmp(t->model_str[t->vocab_slot[h]], s)) h = (h + 1) & (cap - 1);
        t->vocab_slot[h] = (int32_t)id;
    }
    for (int b = 0; b < 256; b++) {
        char *m = t->byte_str[b];
        size_t k = utf8_encode(tok_byte_to_unicode((unsigned char)b), m);
        m[k] = 0;
        t->byte_id[b] = tok_vocab_lookup(t, m, k);
    }
}

int32_t tok_vocab_lookup(const tokenizer *t, const char *s, size_t len) {
    if (!t->vocab_cap) return -1;
    size_t h = hash_bytes(s, len) & (t->vocab_cap - 1);
    for (int32_t id; (id = t->vocab_slot[h]) >= 0; h = (h + 1) & (t->vocab_cap - 1)) {
        const char *v = t->model_str[id];
        if (!strncmp(v, s, len) && v[len] == 0) return id;
    }
    return -1;
}

void tok_merges_reserve(tokenizer *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    t->merge_cap = cap;
    t->merges = xmalloc(cap * sizeof *t->merges);
    for (size_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
}

int tok_add_merge(tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, uint32_t rank, gerr *e) {
    int32_t ia = tok_vocab_lookup(t, a, alen), ib = tok_vocab_lookup(t, b, blen);
    char *ab = xmalloc(alen + blen + 1);
    memcpy(ab, a, alen);
    memcpy(ab + alen, b, blen);
    int32_t iab = tok_vocab_lookup(t, ab, alen + blen);
    free(ab);
    if (ia < 0 || ib < 0 || iab < 0)
        return gerr_set(e, EX_DATAERR, "merge %u (\"%.*s\" \"%.*s\") names a token missing from the vocab",
                        (unsigned)rank, (int)alen, a, (int)blen, b);
    uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
    size_t h = hash_pair(key) & (t->merge_cap - 1);
    while (t->merges[h].key != UINT64_MAX && t->merges[h].key != key) h = (h + 1) & (t->merge_cap - 1);
    t->merges[h] = (merge_slot){key, rank, iab};
    return 0;
}

static const merge_slot *merge_find(const tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t h = hash_pair(key) & (t->merge_cap - 1);
    for (;; h = (h + 1) & (t->merge_cap - 1)) {
        const merge_slot *m = &t->merges[h];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

/* ---- the merge loop ---- */

typedef struct {
    int32_t id, prev, next;
    bool dead;
} sym;

typedef struct {
    uint32_t rank;
    int32_t pos, id;
} cand;

struct bpe_work {
    sym *s;
    cand *heap;
    size_t cap, hn;
    strbuf mapped;
};

bpe_work *bpe_work_new(void) { return xcalloc(1, sizeof(bpe_work)); }

void bpe_work_free(bpe_work *w) {
    if (!w) return;
    free(w->s);
    free(w->heap);
    sb_free(&w->mapped);
    free(w);
}

static bool cand_less(cand a, cand b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void heap_push(bpe_work *w, cand c) {
    size_t i = w->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(c, w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static cand heap_pop(bpe_work *w) {
    cand top = w->heap[0], last = w->heap[--w->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->hn) break;
        if (c + 1 < w->hn && cand_less(w->heap[c + 1], w->heap[c])) c++;
        if (!cand_less(w->heap[c], last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->hn) w->heap[i] = last;
    return top;
}

static void push_pair(const tokenizer *t, bpe_work *w, int32_t pos) {
    int32_t nx = w->s[pos].next;
    if (nx < 0) return;
    const merge_slot *m = merge_find(t, w->s[pos].id, w->s[nx].id);
    if (m) heap_push(w, (cand){m->rank, pos, m->id});
}

static void push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *ids = xrealloc(*ids, *cap * sizeof **ids);
    }
    (*ids)[(*n)++] = id;
}

void bpe_encode_word(const tokenizer *t, bpe_work *w, const char *p, size_t len, int32_t **ids, size_t *n,
                     size_t *cap) {
    if (t->ignore_merges) {
        sb_clear(&w->mapped);
        for (size_t i = 0; i < len; i++) sb_puts(&w->mapped, t->byte_str[(unsigned char)p[i]]);
        int32_t id = tok_vocab_lookup(t, w->mapped.data, w->mapped.len);
        if (id >= 0) {
            push_id(ids, n, cap, id);
            return;
        }
    }
    if (len == 1 && t->byte_id[(unsigned char)p[0]] >= 0) { /* the common one-byte word */
        push_id(ids, n, cap, t->byte_id[(unsigned char)p[0]]);
        return;
    }
    if (len > w->cap) {
        w->cap = len;
        w->s = xrealloc(w->s, len * sizeof *w->s);
        w->heap = xrealloc(w->heap, 2 * len * sizeof *w->heap); /* pops >= merges, so <= 2 len live */
    }
    /* initial symbols; a byte without a token is the unk token or is dropped, as HF */
    int32_t ns = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_id[(unsigned char)p[i]];
        if (id < 0) {
            if (t->unk_id < 0) continue;
            if (t->fuse_unk && ns > 0 && w->s[ns - 1].id == t->unk_id) continue;
            id = t->unk_id;
        }
        w->s[ns] = (sym){id, ns - 1, -1, false};
        if (ns > 0) w->s[ns - 1].next = ns;
        ns++;
    }
    w->hn = 0;
    for (int32_t i = 0; i + 1 < ns; i++) push_pair(t, w, i);
    while (w->hn) {
        cand c = heap_pop(w);
        sym *a = &w->s[c.pos];
        if (a->dead || a->next < 0) continue;
        sym *b = &w->s[a->next];
        const merge_slot *m = merge_find(t, a->id, b->id);
        if (!m || m->id != c.id) continue; /* stale: the pair changed since */
        a->id = c.id;
        b->dead = true;
        a->next = b->next;
        if (b->next >= 0) w->s[b->next].prev = c.pos;
        if (a->prev >= 0) push_pair(t, w, a->prev);
        push_pair(t, w, c.pos);
    }
    for (int32_t i = 0; i < ns && i >= 0; i = w->s[i].next) push_id(ids, n, cap, w->s[i].id);
}
