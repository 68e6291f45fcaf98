#include "progress.h"

#include <stdio.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

void progress_start(progress *p, const char *label, const char *unit, int64_t total, bool force) {
    p->label = label;
    p->unit = unit;
    p->total = total;
    p->done = 0;
    p->enabled = force || isatty(STDERR_FILENO);
    p->started = now_seconds();
    p->last_drawn = 0;
}

static void draw(const progress *p, double now) {
    double elapsed = now - p->started;
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    if (p->total > 0) {
        enum { WIDTH = 30 };
        int filled = (int)(WIDTH * (double)p->done / (double)p->total);
        if (filled > WIDTH) filled = WIDTH;
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[WIDTH] = 0;
        fprintf(stderr, "\r%s [%s] %lld/%lld %s %.0f/s %.1fs ", p->label, bar, (long long)p->done,
                (long long)p->total, p->unit, rate, elapsed);
    } else if (!p->unit) {
        fprintf(stderr, "\r%s %.1fs ", p->label, elapsed);
    } else {
        fprintf(stderr, "\r%s %lld %s %.0f/s %.1fs ", p->label, (long long)p->done, p->unit, rate, elapsed);
    }
    fflush(stderr);
}

void progress_phase(progress *p, const char *label, bool force) {
    progress_start(p, label, NULL, 0, force);
    progress_update(p, 0);
}

void progress_update(progress *p, int64_t done) {
    p->done = done;
    if (!p->enabled) return;
    double now = now_seconds();
    if (now - p->last_drawn < 0.1) return;
    p->last_drawn = now;
    draw(p, now);
}

void progress_finish(progress *p) {
    if (!p->enabled) return;
    draw(p, now_seconds());
    fputc('\n', stderr);
}

void progress_note_empty(const progress *p, long long n, const char *unit) {
    if (n == 0 && !p->enabled) fprintf(stderr, "%s: 0 %s\n", tool_name(), unit);
}
