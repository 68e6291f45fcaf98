/* A checkpoint's recorded paths to other files (ckpt_paths.h). */
#include "ckpt_paths.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/mapped.h"

/* ---- writing -------------------------------------------------------------------------- */

/* The absolute location ckpt will have: its parent's realpath and its own
 * name (a symlink at ckpt is replaced by the checkpoint, so not followed). */
static int ckpt_location(const char *ckpt, char *out, size_t cap, gerr *e) {
    char *copy = xstrdup(ckpt);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;
    char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : copy;
    const char *parent = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash) *slash = 0;
    char real[PATH_MAX];
    int rc = 0;
    if (!strcmp(name, ".") || !strcmp(name, "..") || !*name) {
        if (!realpath(ckpt, real)) rc = gerr_set(e, EX_CANTCREAT, "%s: %s", ckpt, strerror(errno));
        else snprintf(out, cap, "%s", real);
    } else if (!realpath(parent, real)) {
        rc = gerr_set(e, EX_CANTCREAT, "%s: directory %s: %s", ckpt, parent, strerror(errno));
    } else if ((size_t)snprintf(out, cap, "%s/%s", strcmp(real, "/") ? real : "", name) >= cap) {
        rc = gerr_set(e, EX_CANTCREAT, "%s: path too long", ckpt);
    }
    free(copy);
    return rc;
}

/* from and to absolute and canonical: the path of to relative to directory from. */
static void relative_path(const char *from, const char *to, strbuf *out) {
    /* the longest common prefix that ends at a component boundary */
    size_t common = 0;
    for (size_t i = 0;; i++) {
        bool end_f = from[i] == 0 || from[i] == '/', end_t = to[i] == 0 || to[i] == '/';
        if (end_f && end_t) common = i;
        if (from[i] != to[i] || !from[i]) break;
    }
    for (const char *p = from + common; *p; p++)
        if (*p == '/') sb_puts(out, out->len ? "/.." : "..");
    const char *rest = to + common + (to[common] == '/');
    if (*rest) sb_printf(out, "%s%s", out->len ? "/" : "", rest);
    if (!out->len) sb_puts(out, ".");
}

int ckpt_path_json(const char *ckpt, const char *target, strbuf *out, gerr *e) {
    char dir[PATH_MAX], abs[PATH_MAX];
    int rc = ckpt_location(ckpt, dir, sizeof dir, e);
    if (rc) return rc;
    if (!realpath(target, abs)) return gerr_set(e, EX_NOINPUT, "%s: %s", target, strerror(errno));
    strbuf rel = {0};
    relative_path(dir, abs, &rel);
    sb_puts(out, "{\"relative\":");
    sb_json_string(out, rel.data, rel.len);
    sb_puts(out, ",\"absolute\":");
    sb_json_string(out, abs, strlen(abs));
    sb_puts(out, "}");
    sb_free(&rel);
    return 0;
}

/* ---- reading -------------------------------------------------------------------------- */

int ckpt_paths_get(const char *paths_json, const char *name, const char *where, char **rel, char **abs, gerr *e) {
    *rel = *abs = NULL;
    if (!paths_json) return 0;
    cJSON *root = cJSON_Parse(paths_json);
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(root, name);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(entry, "relative");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(entry, "absolute");
    int rc = 0;
    if (!cJSON_IsObject(root) || (entry && !cJSON_IsNull(entry) && !cJSON_IsObject(entry)) ||
        (r && !cJSON_IsString(r)) || (a && !cJSON_IsString(a)))
        rc = gerr_set(e, EX_DATAERR, "%s: field \"paths.%s\": expected {\"relative\": string, \"absolute\": string}",
                      where, name);
    else {
        if (r && *r->valuestring) *rel = xstrdup(r->valuestring);
        if (a && *a->valuestring) *abs = xstrdup(a->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

/* CKPT/grpo/state.json parsed into *root (NULL when there is no such file);
 * *path names it. */
static int state_json(const char *ckpt, strbuf *path, cJSON **root, gerr *e) {
    *root = NULL;
    sb_printf(path, "%s/grpo/state.json", ckpt);
    bool present;
    int rc = regular_file_probe(path->data, &present, e);
    if (rc || !present) return rc;
    size_t len;
    char *text = read_regular_file(path->data, &len, e);
    if (!text) return e->code;
    *root = cJSON_ParseWithLength(text, len);
    free(text);
    return *root ? 0 : gerr_set(e, EX_DATAERR, "%s: not valid JSON", path->data);
}

int ckpt_paths_read(const char *ckpt, const char *name, char **rel, char **abs, gerr *e) {
    *rel = *abs = NULL;
    strbuf path = {0};
    cJSON *root;
    int rc = state_json(ckpt, &path, &root, e);
    if (!rc && root) {
        const cJSON *paths = cJSON_GetObjectItemCaseSensitive(root, "paths");
        char *paths_text = paths ? cJSON_PrintUnformatted(paths) : NULL;
        rc = ckpt_paths_get(paths_text, name, path.data, rel, abs, e);
        free(paths_text);
    }
    cJSON_Delete(root);
    sb_free(&path);
    return rc;
}

int ckpt_step_read(const char *ckpt, long long *step, gerr *e) {
    *step = 0;
    strbuf path = {0};
    cJSON *root;
    int rc = state_json(ckpt, &path, &root, e);
    if (!rc && root) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "step");
        if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble > 1e15 || s->valuedouble != (long long)s->valuedouble)
            rc = gerr_set(e, EX_DATAERR, "%s: field \"step\": expected an integer >= 0", path.data);
        else *step = (long long)s->valuedouble;
    }
    cJSON_Delete(root);
    sb_free(&path);
    return rc;
}

int ckpt_base_weights_read(const char *ckpt, weight_format *fmt, gerr *e) {
    *fmt = WEIGHTS_F32;
    strbuf path = {0};
    cJSON *root;
    int rc = state_json(ckpt, &path, &root, e);
    const cJSON *f = root ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "flags"),
                                                             "base_weights")
                          : NULL;
    if (!rc && f) {
        const char *v = cJSON_IsString(f) ? f->valuestring : "";
        if (!strcmp(v, "bf16")) *fmt = WEIGHTS_BF16;
        else if (!strcmp(v, "q8")) *fmt = WEIGHTS_Q8;
        else if (!strcmp(v, "q4k")) *fmt = WEIGHTS_Q4K;
        else if (!strcmp(v, "mxfp4")) *fmt = WEIGHTS_MXFP4;
        else if (strcmp(v, "f32"))
            rc = gerr_set(e, EX_DATAERR,
                          "%s: field \"flags.base_weights\": expected \"f32\", \"bf16\", \"q8\", \"q4k\" or \"mxfp4\"",
                          path.data);
    }
    cJSON_Delete(root);
    sb_free(&path);
    return rc;
}

/* Adds candidate path to the tried list, once; true when it exists. */
static bool try_path(strbuf *tried, const char *path) {
    if (access(path, F_OK) == 0) return true;
    sb_printf(tried, "%s%s", tried->len ? ", " : "", path);
    return false;
}

int ckpt_path_resolve(const char *ckpt, const ckpt_ref *r, char **out, gerr *e) {
    *out = NULL;
    const char *given = r->given && *r->given ? r->given : NULL;
    bool given_abs = given && given[0] == '/';
    /* the order of ckpt_paths.h: relative to the checkpoint, absolute, as given */
    const char *rel = r->rel ? r->rel : given && !given_abs ? given : NULL;
    const char *abs = r->abs ? r->abs : given_abs ? given : NULL;
    strbuf cand = {0}, tried = {0};
    const char *found = NULL;
    if (rel) {
        sb_printf(&cand, "%s/%s", ckpt, rel);
        if (try_path(&tried, cand.data)) found = cand.data;
    }
    if (!found && abs && try_path(&tried, abs)) found = abs;
    if (!found && given && !given_abs && strcmp(given, abs ? abs : "") && try_path(&tried, given)) found = given;
    if (!found && given_abs && strcmp(given, abs) && try_path(&tried, given)) found = given;
    int rc = 0;
    if (found) *out = xstrdup(found);
    else
        rc = gerr_set(e, EX_NOINPUT, "%s: %s \"%s\" not found (%s); tried %s", ckpt, r->what,
                      given ? given : abs ? abs : rel ? rel : "", r->fields, tried.len ? tried.data : "nothing");
    sb_free(&cand);
    sb_free(&tried);
    return rc;
}
