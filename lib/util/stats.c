#include "stats.h"

#include <math.h>

void welford_push(welford *w, double x) {
    w->n++;
    double d = x - w->mean;
    w->mean += d / (double)w->n;
    w->m2 += d * (x - w->mean);
}

double welford_mean(const welford *w) { return w->n ? w->mean : NAN; }

double welford_std(const welford *w) { return w->n > 1 ? sqrt(w->m2 / (double)(w->n - 1)) : NAN; }

double welford_std_pop(const welford *w) { return w->n ? sqrt(w->m2 / (double)w->n) : NAN; }
