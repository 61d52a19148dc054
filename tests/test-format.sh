#!/bin/sh
# The C files listed in .clang-format-files are as clang-format lays them out
# under .clang-format. Layouts differ between clang-format's versions; the
# check runs with version 14, Debian 12's (CI's), and is skipped without it.
# CLANG_FORMAT names another binary of that version.
set -u
top=$(cd "${srcdir:-$(dirname "$0")/..}" && pwd)
list=$top/.clang-format-files

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
	for c in clang-format-14 clang-format; do
		if command -v "$c" >/dev/null 2>&1; then
			cf=$c
			break
		fi
	done
fi
if [ -z "$cf" ]; then
	echo "SKIP: no clang-format (apt-get install clang-format)"
	exit 77
fi
version=$("$cf" --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
	echo "SKIP: $cf is version ${version:-unknown}; the layout is clang-format 14's"
	exit 77
fi

[ -r "$list" ] || { echo "FAIL: no $list"; exit 1; }
# One path a line, relative to the top of the tree; # starts a comment.
files=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$list")
[ -n "$files" ] || { echo "FAIL: $list lists no file"; exit 1; }

fail=0
n=0
for f in $files; do
	if [ ! -f "$top/$f" ]; then
		echo "FAIL: $f is listed in .clang-format-files but not there"
		fail=1
		continue
	fi
	n=$((n + 1))
	# --style=file finds .clang-format above the file, in this tree.
	if ! out=$("$cf" --style=file --dry-run --Werror "$top/$f" 2>&1); then
		echo "FAIL: $f is not laid out as .clang-format says" \
		     "(clang-format -i $f):"
		printf '%s\n' "$out" | head -20
		fail=1
	fi
done
[ $fail = 0 ] && echo "ok: $n files as clang-format $version lays them out"
exit $fail
