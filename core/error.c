/* Status codes shared by every copus library (the list is in error.h). */
#include <copus/error.h>

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
