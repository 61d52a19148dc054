/* The whole of a text file (file.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "file.h"

int copus__file_read(const char *path, char **text, size_t *len, char *err,
		     size_t errlen)
{
	FILE *f = fopen(path, "rb");
	size_t n = 0, cap = 0, got;
	char *buf = NULL, *nul;

	*text = NULL;
	if (len)
		*len = 0;
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		return COPUS_EIO;
	}
	do {
		if (cap - n < 65536) {
			char *b;

			cap = cap ? 2 * cap : 65536;
			if (cap > COPUS__FILE_MAX + 2)
				cap = COPUS__FILE_MAX + 2;
			if (!(b = realloc(buf, cap))) {
				snprintf(err, errlen, "%s: out of memory",
					 path);
				free(buf);
				fclose(f);
				return COPUS_ENOMEM;
			}
			buf = b;
		}
		got = fread(buf + n, 1, cap - 1 - n, f);
		n += got;
	} while (got > 0 && n <= COPUS__FILE_MAX);
	if (ferror(f) || n > COPUS__FILE_MAX) {
		snprintf(err, errlen, "%s: %s", path,
			 ferror(f) ? "cannot read" : "larger than 64 MiB");
		free(buf);
		fclose(f);
		return COPUS_EIO;
	}
	fclose(f);
	if ((nul = memchr(buf, '\0', n))) {
		snprintf(err, errlen, "%s: a NUL byte at offset %zu: not text",
			 path, (size_t)(nul - buf));
		free(buf);
		return COPUS_EIO;
	}
	buf[n] = '\0';
	*text = buf;
	if (len)
		*len = n;
	return COPUS_OK;
}
