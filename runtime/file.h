/*
 * The whole of a text file, as every reader of copus's own files takes it:
 * the planner's GPU constants (libcopus, sched/copus) and the simulator's
 * JSON and text inputs. One size cap and one rule for NUL bytes, so that a
 * file one of them accepts, the others accept too.
 */
#ifndef COPUS_RUNTIME_FILE_H
#define COPUS_RUNTIME_FILE_H

#include <stddef.h>

/* The largest file read whole: 64 MiB. */
#define COPUS__FILE_MAX ((size_t)64 << 20)

/*
 * Reads path into *text (malloc'd, NUL-terminated, *len bytes before the
 * NUL; len may be NULL). A file of more than COPUS__FILE_MAX bytes, or one
 * that holds a NUL byte, is refused. Returns COPUS_OK, or COPUS_EIO /
 * COPUS_ENOMEM with err saying why, starting with the path ("PATH: cannot
 * open: No such file or directory", "PATH: larger than 64 MiB", "PATH: a
 * NUL byte at offset N: not text"); *text is then NULL.
 */
int copus__file_read(const char *path, char **text, size_t *len, char *err,
		     size_t errlen);

#endif /* COPUS_RUNTIME_FILE_H */
