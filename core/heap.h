/*
 * A binary heap over an array that the caller owns and sizes, for elements
 * of any type: the caller passes the element size and a function that says
 * whether one element belongs above another (for a max-heap, a > b). The
 * top is element 0. Header-only so that the compare and the element size
 * inline at each use.
 */
#ifndef COPUS_CORE_HEAP_H
#define COPUS_CORE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Whether element a belongs above element b. */
typedef bool (*copus__heap_above)(const void *a, const void *b);

static inline void *copus__heap_at(void *base, size_t size, size_t i)
{
	return (char *)base + i * size;
}

/*
 * Add *item to the heap of *n elements at base (which has room for one
 * more) and count it in *n.
 */
static inline void copus__heap_push(void *base, size_t *n, size_t size,
				    const void *item, copus__heap_above above)
{
	size_t i = (*n)++;

	/* Move parents down until the item is not above its parent. */
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!above(item, copus__heap_at(base, size, p)))
			break;
		memcpy(copus__heap_at(base, size, i),
		       copus__heap_at(base, size, p), size);
		i = p;
	}
	memcpy(copus__heap_at(base, size, i), item, size);
}

/*
 * Remove the top of the heap of *n > 0 elements at base into *top and
 * count it out of *n.
 */
static inline void copus__heap_pop(void *base, size_t *n, size_t size,
				   void *top, copus__heap_above above)
{
	const void *last;
	size_t i = 0;

	memcpy(top, base, size);
	last = copus__heap_at(base, size, --(*n));
	/* Move the larger child up until the last element fits below. */
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && above(copus__heap_at(base, size, c + 1),
					copus__heap_at(base, size, c)))
			c++;
		if (!above(copus__heap_at(base, size, c), last))
			break;
		memcpy(copus__heap_at(base, size, i),
		       copus__heap_at(base, size, c), size);
		i = c;
	}
	if (*n > 0)
		memcpy(copus__heap_at(base, size, i), last, size);
}

#endif /* COPUS_CORE_HEAP_H */
