/* Status codes shared by every copus library. */
#include <copus/error.h>

const char *copus_strerror(int status)
{
	switch (status) {
	case COPUS_OK:
		return "success";
	case COPUS_EINVAL:
		return "invalid argument";
	case COPUS_ENOMEM:
		return "out of memory";
	case COPUS_ENODATA:
		return "not enough data";
	case COPUS_ERANGE:
		return "request cannot be met within the limits";
	case COPUS_EFIT:
		return "model fitting failed";
	case COPUS_EPARSE:
		return "malformed input";
	case COPUS_EIO:
		return "input/output error";
	case COPUS_EVERSION:
		return "incompatible version";
	case COPUS_ESTATE:
		return "operation not allowed in the current state";
	}
	return "unknown copus status";
}
