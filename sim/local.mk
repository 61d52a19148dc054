# Build rules of sim/ (included by the top-level Makefile.am).
