# Build rules of runtime/ (included by the top-level Makefile.am).
