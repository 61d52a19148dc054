/*
 * Runs one fuzz target over files, without libFuzzer, so that the targets
 * build with any compiler and make check replays their seed corpora (and
 * every input that once crashed a parser, kept there). Each file named on
 * the command line, and each file in each directory named, is one input.
 * With no argument the target's own corpus, FUZZ_CORPUS (set by
 * tests/fuzz/local.mk), is replayed.
 *
 * Exit status: 0 when every input ran; 1 when an input could not be read
 * or there was none (a corpus missing from the tarball must not pass as
 * empty). An input that breaks the parser kills the program (abort(), a
 * signal or a sanitizer report) with its name the last one printed.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static long inputs;

/* Read the whole file into a buffer of exactly its size and run it. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;

	if (f == NULL || fstat(fileno(f), &st) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (f != NULL)
			fclose(f);
		return 1;
	}
	/* malloc(0) may return NULL; one spare byte is never read. */
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		fclose(f);
		fprintf(stderr, "replay: %s: out of memory\n", path);
		return 1;
	}
	n = fread(buf, 1, (size_t)st.st_size, f);
	if (ferror(f) || n != (size_t)st.st_size) {
		fprintf(stderr, "replay: %s: short read\n", path);
		fclose(f);
		free(buf);
		return 1;
	}
	fclose(f);
	/* Printed first: a crash leaves the input's name last in the log. */
	printf("  %s (%zu bytes)\n", path, n);
	fflush(stdout);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	inputs++;
	return 0;
}

static int skip_hidden(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

/* Every regular file of dir, in name order so that runs repeat. */
static int replay_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, skip_hidden, alphasort), bad = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			bad |= replay_file(path);
		free(names[i]);
	}
	free(names);
	return bad;
}

int main(int argc, char **argv)
{
	const char *const *paths = (const char *const *)argv + 1;
	int npaths = argc - 1, bad = 0;

	if (npaths == 0) {
#ifdef FUZZ_CORPUS
		static const char *const dflt[] = { FUZZ_CORPUS };

		paths = dflt;
		npaths = 1;
#else
		fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
		return 2;
#endif
	}
	for (int i = 0; i < npaths; i++) {
		struct stat st;

		if (stat(paths[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", paths[i],
				strerror(errno));
			bad = 1;
		} else if (S_ISDIR(st.st_mode)) {
			bad |= replay_dir(paths[i]);
		} else {
			bad |= replay_file(paths[i]);
		}
	}
	if (inputs == 0) {
		fprintf(stderr, "replay: no input found in %s%s\n", paths[0],
			npaths > 1 ? " and the others" : "");
		bad = 1;
	}
	printf("%s: %ld inputs of %s%s ran without a crash%s\n",
	       strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0],
	       inputs, paths[0], npaths > 1 ? " and others" : "",
	       bad ? ", but some could not be read" : "");
	return bad;
}
