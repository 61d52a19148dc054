/*
 * copus: status codes shared by every copus library.
 *
 * Every public function returns an int: COPUS_OK (0) on success or one of the
 * negative codes below; copus_strerror() turns a code into a sentence.
 */
#ifndef COPUS_ERROR_H
#define COPUS_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum copus_status {
	COPUS_OK = 0,
	COPUS_EINVAL = -1,   /* an argument is invalid (NULL, NaN, out of range) */
	COPUS_ENOMEM = -2,   /* out of memory */
	COPUS_ENODATA = -3,  /* not enough data (no observations, empty table) */
	COPUS_ERANGE = -4,   /* the request cannot be met within the limits */
	COPUS_EFIT = -5,     /* the optimiser failed */
	COPUS_EPARSE = -6,   /* malformed input text */
	COPUS_EIO = -7,      /* an operating-system call failed */
	COPUS_EVERSION = -8, /* incompatible structure or message version */
	COPUS_ESTATE = -9,   /* the call is not allowed in the current state */
};

/* A sentence describing a status code; never NULL. */
const char *copus_strerror(int status);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_ERROR_H */
