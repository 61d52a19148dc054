#!/bin/sh
# libcopus's COPUS_* environment variables: the table in runtime/internal.h
# (COPUS__ENV_VARS) is the only way the runtime reads one, and the list in
# include/copus/copus.h, which users read, names exactly the table's. The
# man page's ENVIRONMENT section names none that the table lacks (except the
# Python adapter's own).
set -u
top=$(cd "${srcdir:-$(dirname "$0")/..}" && pwd)
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
exec python3 - "$top" <<'PY'
import glob, os, re, sys

top = sys.argv[1]
bad = []

def read(rel):
    with open(os.path.join(top, rel)) as f:
        return f.read()

# The table: one X(NAME, ...) row per variable inside COPUS__ENV_VARS.
internal = read("runtime/internal.h")
body, inside = "", False
for line in internal.split("\n"):
    if line.startswith("#define COPUS__ENV_VARS(X)"):
        inside = True
    if inside:
        body += line + "\n"
        if not line.rstrip().endswith("\\"):
            break
table = re.findall(r"\bX\(([A-Z][A-Z0-9_]*),", body)
table = {"COPUS_" + n for n in table}
if len(table) < 5:
    print("FAIL: COPUS__ENV_VARS has %d rows; the pattern no longer reads "
          "it" % len(table))
    sys.exit(1)

# Nothing in runtime/ reads a COPUS_ variable but the table's accessors in
# common.c: no getenv("COPUS_...") anywhere, no getenv() outside common.c
# but of another program's variable by its literal name, and no literal
# that is just a COPUS_ variable's name (handed to some other reader), nor
# "COPUS_" to build one, outside common.c.
for path in sorted(glob.glob(os.path.join(top, "runtime", "*.[ch]"))):
    rel = os.path.relpath(path, top)
    for no, line in enumerate(open(path), 1):
        where = "%s:%d: %s" % (rel, no, line.strip())
        if re.search(r'getenv\s*\(\s*"COPUS_', line):
            bad.append(where + "  (getenv of a COPUS_ variable)")
        if rel == "runtime/common.c":
            continue
        for call in re.finditer(r"\bgetenv\s*\(\s*(\S)", line):
            if call.group(1) != '"':
                bad.append(where + "  (getenv of a name not written out)")
        if re.search(r'"COPUS_[A-Z0-9_]*"', line):
            bad.append(where + "  (a COPUS_ variable's name as a literal)")

# In common.c getenv() is called only by the two accessors.
common = read("runtime/common.c")
funcs = re.split(r"\n(?=[a-z][^\n]*\(.*\)?\n\{)", common)
for f in funcs:
    if "getenv" not in f:
        continue
    head = f.split("\n", 1)[0]
    if not re.search(r"\b(copus__env_text|copus__env_foreign_int)\s*\(",
                     head):
        bad.append("runtime/common.c: getenv in %s" % head.strip())

# The users' list: include/copus/copus.h's "Environment" comment.
header = read("include/copus/copus.h")
m = re.search(r"\* Environment \(read once.*?\n(.*?)\n \* A malformed", header,
              re.S)
if m is None:
    bad.append("include/copus/copus.h: no 'Environment (read once' list")
else:
    listed = set(re.findall(r"^ \*   (COPUS_[A-Z0-9_]+)", m.group(1), re.M))
    for n in sorted(table - listed):
        bad.append("%s is in the table, not in include/copus/copus.h's list"
                   % n)
    for n in sorted(listed - table):
        bad.append("%s is in include/copus/copus.h's list, not in the table"
                   % n)

# The man page lists some of them; any it names is the table's, or the
# Python adapter's (read in contrib/pytorch).
man = read("etc/copus-pytorch.7")
m = re.search(r"^\.SH ENVIRONMENT\n(.*?)^\.SH ", man, re.S | re.M)
if m is None:
    bad.append("etc/copus-pytorch.7: no ENVIRONMENT section")
else:
    py = "".join(read(os.path.relpath(p, top)) for p in
                 glob.glob(os.path.join(top, "contrib", "pytorch", "*.py")))
    for n in sorted(set(re.findall(r"COPUS_[A-Z0-9_]+", m.group(1)))):
        if n not in table and n not in py:
            bad.append("etc/copus-pytorch.7 names %s, which nothing reads" % n)

for b in bad:
    print("FAIL: " + b)
if bad:
    sys.exit(1)
print("ok: %d COPUS_ variables, read only through the table, listed in "
      "include/copus/copus.h" % len(table))
PY
