/*
 * copus: status codes shared by every copus library.
 * Reader: everyone who calls a copus function (ML engineers, contributors).
 *
 * Every public function returns an int: COPUS_OK (0) on success or one of the
 * negative codes below; copus_strerror() turns a code into a sentence and
 * copus_status_name() into its name ("COPUS_EINVAL").
 */
#ifndef COPUS_ERROR_H
#define COPUS_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The one list of status codes: X(name, value, message). The enum, the
 * messages of copus_strerror() and the names of copus_status_name() are all
 * generated from it.
 */
#define COPUS_STATUS_MAP(X)                                                   \
	X(OK, 0, "success")                                                   \
	/* an argument is invalid (NULL, NaN, out of range) */                \
	X(EINVAL, -1, "invalid argument")                                     \
	X(ENOMEM, -2, "out of memory")                                        \
	/* not enough data (no observations, empty table) */                  \
	X(ENODATA, -3, "not enough data")                                     \
	X(ERANGE, -4, "request cannot be met within the limits")              \
	/* the optimiser failed */                                            \
	X(EFIT, -5, "model fitting failed")                                   \
	/* malformed input text */                                            \
	X(EPARSE, -6, "malformed input")                                      \
	/* an operating-system call failed */                                 \
	X(EIO, -7, "input/output error")                                      \
	/* incompatible structure or message version */                       \
	X(EVERSION, -8, "incompatible version")                               \
	X(ESTATE, -9, "operation not allowed in the current state")

enum copus_status {
#define COPUS_STATUS_ENUM_(name, value, msg) COPUS_##name = value,
	COPUS_STATUS_MAP(COPUS_STATUS_ENUM_)
#undef COPUS_STATUS_ENUM_
};

/* A sentence describing a status code; never NULL. */
const char *copus_strerror(int status);

/* The code's name, "COPUS_EINVAL"; "COPUS_UNKNOWN" for any other value. */
const char *copus_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_ERROR_H */
