/* Status codes shared by every copus library (the list is in error.h). */
#include <stdarg.h>
#include <stdio.h>

#include <copus/error.h>

#include "internal.h"

const char *copus_strerror(int status)
{
	switch (status) {
#define MSG_(name, value, msg)                                                 \
	case COPUS_##name:                                                     \
		return msg;
		COPUS_STATUS_MAP(MSG_)
#undef MSG_
	}
	return "unknown copus status";
}

const char *copus_status_name(int status)
{
	switch (status) {
#define NAME_(name, value, msg)                                                \
	case COPUS_##name:                                                     \
		return "COPUS_" #name;
		COPUS_STATUS_MAP(NAME_)
#undef NAME_
	}
	return "COPUS_UNKNOWN";
}

void copus__err_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
