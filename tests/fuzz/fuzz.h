/*
 * What the fuzz targets of tests/fuzz/ share. Reader: whoever adds a target.
 *
 * A target is one file, fuzz-<name>.c, that defines LLVMFuzzerTestOneInput()
 * and feeds its input to one parser of untrusted input. The same file links
 * with libFuzzer (tests/fuzz/run.sh, clang) to search for crashes, and with
 * replay.c (make check, any compiler) to run the seed corpus
 * tests/fuzz/corpus/<name>/ as an ordinary test. A target aborts when an
 * invariant of the parser's output breaks, so that both report it as a
 * crash with the input that caused it.
 */
#ifndef COPUS_FUZZ_H
#define COPUS_FUZZ_H

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The entry point libFuzzer and replay.c call once per input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort, naming the broken invariant: the fuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: invariant broken: %s\n",      \
				__FILE__, __LINE__, #cond);                   \
			abort();                                              \
		}                                                             \
	} while (0)

/*
 * The input as a C string in a buffer of its own, exactly size + 1 bytes,
 * so that the address sanitizer catches a read past the terminating NUL.
 * An embedded NUL ends the string early, as it would for the parser's
 * real caller. The caller frees it.
 */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	FUZZ_CHECK(s != NULL);
	if (size > 0)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* The scratch directory of this process ("" until made). */
static inline char *fuzz_scratch_dir(void)
{
	static char dir[256];

	return dir;
}

/* Remove dir and what it holds (the scratch directory holds no links). */
static inline void fuzz_remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[1024];

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(path))
			continue;
		if (e->d_type == DT_DIR)
			fuzz_remove_tree(path);
		else
			unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static inline void fuzz_scratch_remove(void)
{
	if (fuzz_scratch_dir()[0] != '\0')
		fuzz_remove_tree(fuzz_scratch_dir());
}

/*
 * A directory of this process's own, made on the first call and removed at
 * exit. It is made once, not per input: the fuzzer runs millions of inputs,
 * and each input overwrites the files the previous one wrote.
 */
static inline const char *fuzz_scratch(void)
{
	char *dir = fuzz_scratch_dir();

	if (dir[0] == '\0') {
		const char *tmp = getenv("TMPDIR");

		snprintf(dir, 256, "%s/copus-fuzz.XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		FUZZ_CHECK(mkdtemp(dir) != NULL);
		atexit(fuzz_scratch_remove);
	}
	return dir;
}

/* Replace the file at path with size bytes of data. */
static inline void fuzz_write_file(const char *path, const uint8_t *data,
				   size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t done = 0;

	FUZZ_CHECK(fd >= 0);
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		FUZZ_CHECK(n > 0);
		done += (size_t)n;
	}
	FUZZ_CHECK(close(fd) == 0);
}

/* The lines of size bytes of a file, the last one perhaps without '\n'. */
static inline long fuzz_lines(const uint8_t *data, size_t size)
{
	long n = 0;

	for (size_t i = 0; i < size; i++)
		n += data[i] == '\n' || i + 1 == size;
	return n;
}

/*
 * Whether an error that names the file at path ("PATH:N: ...") names a
 * line 1..lines of it; an error that names no line of that file passes.
 */
static inline int fuzz_error_line_ok(const char *err, const char *path,
				     long lines)
{
	size_t n = strlen(path);
	long line;

	if (strncmp(err, path, n) != 0 || err[n] != ':' || err[n + 1] < '0' ||
	    err[n + 1] > '9')
		return 1;
	line = strtol(err + n + 1, NULL, 10);
	return line >= 1 && line <= lines;
}

#endif /* COPUS_FUZZ_H */
