/* Large zeroed buffers (the trainer's gradients and activations, the
 * optimizer's moments) on transparent huge pages where the kernel grants them.
 *
 * Why: calloc hands out untouched pages that the first read maps to the
 * shared zero page; the first write then copies it, and with several
 * threads each such fault also flushes the other CPUs' TLBs (an IPI). A
 * grpo-update process takes one optimizer step, so with calloc every step
 * would pay that for each 4 KiB of its gradient and AdamW moments: perf
 * puts about a fifth of a 16 x 192 token full fine-tuning step's samples
 * in those faults (SmolLM2-135M, 2 threads). big_calloc asks for 2 MiB pages (madvise
 * MADV_HUGEPAGE: Debian's default THP mode is "madvise") and writes the
 * zeros itself, so every page faults once, as a write, 512 times fewer
 * faults where huge pages are granted and no copy where they are not. */
#ifndef GRPO_UTIL_BIGMEM_H
#define GRPO_UTIL_BIGMEM_H

#include <stdbool.h>
#include <stddef.h>

/* n * size zero bytes, freed with free(); NULL when out of memory or when
 * n * size overflows. Below 2 MiB it is calloc. */
void *big_calloc(size_t n, size_t size);

/* n zero bytes whose pages take memory only once written (an anonymous
 * mapping without swap reserved for it): the model's parameter buffer, most
 * of whose float32 place a packed matrix never touches. NULL when the
 * mapping fails; nothing is checked against the machine's memory (see
 * big_fits). Freed with big_unreserve(p, n). */
void *big_reserve(size_t n);
void big_unreserve(void *p, size_t n);
/* Advice that [p, p + n) of a big_reserve mapping is about to be written
 * whole: the 2 MiB pages wholly inside it are asked for as huge pages (512
 * times fewer faults), none that reaches past it, so no page takes memory
 * that the range does not fill. Failure only keeps 4 KiB pages. */
void big_will_fill(void *p, size_t n);

/* Whether n bytes fit in the machine's memory and swap: the check calloc's
 * mapping would have made (Linux refuses an allocation beyond them). */
bool big_fits(size_t n);

#endif
