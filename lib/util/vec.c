#include "vec.h"

#include <stdint.h>

#include "err.h"

void *vec_reserve(void *data, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return data;
    size_t c = *cap ? *cap : 16;
    while (c < need) c = c > SIZE_MAX / 2 ? need : c * 2;
    /* a size past SIZE_MAX asks for SIZE_MAX bytes, which xrealloc refuses
     * like any allocation that cannot be had */
    data = xrealloc(data, c > SIZE_MAX / size ? SIZE_MAX : c * size);
    *cap = c;
    return data;
}
