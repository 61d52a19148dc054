#!/bin/sh
# The layering of the sources: no two files of the product call each other in
# a loop (directly or through others), and nothing under core/ includes the
# runtime's header or a Slurm header. A file "calls" another when it names a
# function that the other defines (comments and strings left out).
set -u
top=$(cd "${srcdir:-$(dirname "$0")/..}" && pwd)
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
exec python3 - "$top" <<'PY'
import os, re, sys

top = sys.argv[1]
parts = ["core", "runtime", "plugin", "sim", "contrib"]
# Entry points that several programs or plugins define by contract.
contract = {"main", "init", "fini"}

def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)

files = {}
for part in parts:
    for root, _, names in os.walk(os.path.join(top, part)):
        for n in names:
            if n.endswith(".c"):
                p = os.path.join(root, n)
                files[os.path.relpath(p, top)] = strip(open(p).read())

# Functions with external linkage: a definition that starts a line.
defn = re.compile(r"^(?!static\b)(?:extern\s+)?[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{",
                  re.M)
defines = {}
for f, text in files.items():
    for name in defn.findall(text):
        if name not in contract:
            defines.setdefault(name, set()).add(f)

word = re.compile(r"\b[A-Za-z_]\w*\b")
graph = {f: set() for f in files}
for f, text in files.items():
    for w in set(word.findall(text)):
        # A file that defines the name itself holds another build's version
        # of it (a stub when NCCL is absent), not a call.
        if f in defines.get(w, ()):
            continue
        for g in defines.get(w, ()):
            graph[f].add(g)

# Strongly connected components (Tarjan), iteratively.
index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]
def visit(v):
    work = [(v, iter(sorted(graph[v])))]
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    while work:
        u, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1
                stack.append(w); on.add(w)
                work.append((w, iter(sorted(graph[w]))))
                break
            if w in on:
                low[u] = min(low[u], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[u])
            if low[u] == index[u]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == u:
                        break
                if len(comp) > 1:
                    cycles.append(sorted(comp))
for v in sorted(graph):
    if v not in index:
        visit(v)

bad = 0
for comp in cycles:
    bad += 1
    print("FAIL: these files call each other in a loop:")
    for f in comp:
        print("  %s -> %s" % (f, ", ".join(sorted(g for g in graph[f] if g in comp))))

inc = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
for root, _, names in os.walk(os.path.join(top, "core")):
    for n in names:
        if not n.endswith((".c", ".h")):
            continue
        p = os.path.join(root, n)
        for h in inc.findall(open(p).read()):
            if h == "copus/copus.h" or h.startswith(("slurm/", "src/")) or \
               h in ("nccl.h", "cuda_runtime.h", "pmix.h"):
                bad += 1
                print("FAIL: %s includes %s (the core stays pure)" %
                      (os.path.relpath(p, top), h))

# README.md's "## Layout" table names every source file of these folders:
# the row of the folder (the longest path of the table above the file)
# names it, as `name` or `sub/name`. The files are git's tracked ones in a
# checkout, the tree's in a tarball.
folders = ["core", "core/policy", "plugin", "runtime", "sim", "include/copus",
           "contrib/trainer", "contrib/pytorch"]
source = (".c", ".h", ".py")
readme = open(os.path.join(top, "README.md")).read()
m = re.search(r"^## Layout\n(.*?)^## ", readme, re.S | re.M)
rows = {}
for line in (m.group(1) if m else "").split("\n"):
    r = re.match(r"^\|\s*`([^`]+)/`\s*\|(.*)\|\s*$", line)
    if r:
        rows[r.group(1)] = r.group(2)
if not rows:
    bad += 1
    print("FAIL: README.md has no '## Layout' table of | `folder/` | ... | rows")
try:
    import subprocess
    if not os.path.exists(os.path.join(top, ".git")):
        raise OSError("not a checkout")
    out = subprocess.run(["git", "-C", top, "ls-files", "--"] + folders,
                         capture_output=True, text=True, check=True).stdout
    tracked = out.split()
except (OSError, subprocess.CalledProcessError):
    tracked = []
    for d in folders:
        for n in os.listdir(os.path.join(top, d)):
            if os.path.isfile(os.path.join(top, d, n)):
                tracked.append(d + "/" + n)
named = 0
for f in sorted(set(tracked)):
    d, n = os.path.split(f)
    if d not in folders or not n.endswith(source):
        continue
    row = max((r for r in rows if d == r or d.startswith(r + "/")),
              key=len, default=None)
    if row is None:
        bad += 1
        print("FAIL: README.md's layout table has no row for %s/" % d)
        continue
    if not re.search(r"`(?:[\w.-]+/)*%s`" % re.escape(n), rows[row]):
        bad += 1
        print("FAIL: %s is not named in the row `%s/` of README.md's "
              "layout table" % (f, row))
        continue
    named += 1
print("%d source files named in README.md's layout table" % named)

edges = sum(len(v) for v in graph.values())
print("%d files, %d calls between files, %d problems" % (len(files), edges, bad))
sys.exit(1 if bad else 0)
PY
