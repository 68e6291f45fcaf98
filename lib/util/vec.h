/* Growable arrays: a pointer and a capacity kept by the caller,
 *     T *v = NULL; size_t cap = 0;
 *     v = vec_reserve(v, &cap, n + 1, sizeof *v);  v[n++] = x;
 * Capacity doubles from 16, so n pushes cost O(n). */
#ifndef GRPO_VEC_H
#define GRPO_VEC_H

#include <stddef.h>

/* Returns data grown (xrealloc) to hold at least `need` elements of `size`
 * bytes, updating *cap; data itself when it already does. */
void *vec_reserve(void *data, size_t *cap, size_t need, size_t size);

#endif
