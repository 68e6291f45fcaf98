/* The judge tests' local server (tests/ref/judge_server.py): started on a
 * free port, asked for its counters over HTTP, stopped by its pid. Tests run
 * from the repository root; $GRPO_PY picks the interpreter (python3 else). */
#ifndef GRPO_JUDGE_SERVER_FIXTURE_H
#define GRPO_JUDGE_SERVER_FIXTURE_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/strbuf.h"

typedef struct {
    pid_t pid;
    int port;
    char base[64]; /* http://127.0.0.1:PORT/v1 */
} test_server;

/* argv: extra flags, NULL-terminated. Returns false when it did not start in 10 s. */
static inline bool server_start(test_server *s, const char *const *flags) {
    char port_file[64];
    snprintf(port_file, sizeof port_file, "/tmp/grpo-judge-port-%d-%ld", (int)getpid(), (long)random());
    unlink(port_file);
    const char *py = getenv("GRPO_PY");
    if (!py || access(py, X_OK)) py = "python3";
    const char *argv[32] = {py, "tests/ref/judge_server.py", "--port-file", port_file};
    int n = 4;
    for (int i = 0; flags && flags[i] && n < 31; i++) argv[n++] = flags[i];
    argv[n] = NULL;
    s->pid = fork();
    if (s->pid < 0) return false;
    if (s->pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int tries = 0; tries < 1000; tries++) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &s->port) == 1;
            fclose(f);
            unlink(port_file);
            if (ok) {
                snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d/v1", s->port);
                return true;
            }
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) return false;
        usleep(10000);
    }
    return false;
}

static inline void server_stop(test_server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static inline size_t server_collect(char *data, size_t size, size_t n, void *user) {
    sb_append(user, data, size * n);
    return size * n;
}

/* GET or POST (body not NULL) to a path of the server; the parsed JSON reply or NULL. */
static inline cJSON *server_call(const test_server *s, const char *path, const char *body) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    CURL *c = curl_easy_init();
    strbuf out = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, server_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    cJSON *j = rc == CURLE_OK && out.data ? cJSON_Parse(out.data) : NULL;
    sb_free(&out);
    return j;
}

static inline long long json_int(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

#endif
