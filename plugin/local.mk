# Build rules of plugin/ (included by the top-level Makefile.am).
