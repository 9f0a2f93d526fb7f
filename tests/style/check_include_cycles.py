#!/usr/bin/env python3
"""Dependencies between folders run one way (docs/architecture.md "Dependencies between folders").

Reads every quoted #include of the production folders' *.h, *.cpp, *.cu and *.cuh files and
draws two graphs of folders, an edge A -> B meaning "a file of A includes a file of B":

  top       the top-level folders (core, kernels, comm, models, parallel, analytic, bench);
  sub       each top-level folder's immediate subfolders (models/moe, bench/run, ...), with the
            files directly in a top-level folder forming a node of their own, named after it
            ("bench", "parallel"); a file deeper down belongs to its immediate subfolder.

A cycle in either graph is a failure: each is printed as a chain of folders, every edge with one
include that makes it (file:line). Both graphs are needed: models/a -> parallel/b and
parallel/c -> models/d make no cycle among subfolders but one between models and parallel.
tests/ is not read: its folders share rigs (tests/kernels/grad_check.h, ...) on purpose.

Exits 1 on a cycle, 0 otherwise. Standard library only.
Usage: check_include_cycles.py [ROOT]   (ROOT defaults to two folders above this file)
"""
import pathlib
import re
import sys

FOLDERS = ("core", "kernels", "comm", "models", "parallel", "analytic", "perf", "bench")
SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
CYCLE_LIMIT = 100  # elementary cycles printed per graph; a tangle past that is reported as such


def node(rel, level):
    """The folder a repository-relative path belongs to in graph `level` ("top" or "sub")."""
    parts = rel.split("/")
    if level == "top" or len(parts) == 2:
        return parts[0]
    return parts[0] + "/" + parts[1]


def scan(root):
    """{(from, to): (file, line)} over the sub graph: the first include found for each edge."""
    edges = {}
    for top in FOLDERS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(text)
                if not match:
                    continue
                target = resolve(root, path, match.group(1))
                if target is None:
                    continue
                edge = (node(rel, "sub"), node(target, "sub"))
                if edge[0] != edge[1]:
                    edges.setdefault(edge, (rel, number))
    return edges


def resolve(root, path, name):
    """The repository-relative path an include names, or None outside the production folders."""
    for base in (root, path.parent):
        candidate = (base / name).resolve()
        try:
            rel = candidate.relative_to(root.resolve()).as_posix()
        except ValueError:
            continue
        if candidate.is_file() and rel.split("/")[0] in FOLDERS and "/" in rel:
            return rel
    return None


def lift(edges):
    """The top graph from the sub graph's edges, keeping one example include per edge."""
    top = {}
    for (a, b), where in sorted(edges.items()):
        edge = (a.split("/")[0], b.split("/")[0])
        if edge[0] != edge[1]:
            top.setdefault(edge, where)
    return top


def cycles(edges):
    """The elementary cycles of a graph, each a list of nodes starting at its least node."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
    found = []

    def walk(start, chain, on_chain):
        for nxt in sorted(succ.get(chain[-1], ())):
            if len(found) >= CYCLE_LIMIT:
                return
            if nxt == start:
                found.append(list(chain))
            elif nxt > start and nxt not in on_chain:
                on_chain.add(nxt)
                chain.append(nxt)
                walk(start, chain, on_chain)
                chain.pop()
                on_chain.discard(nxt)

    for start in sorted(succ):
        walk(start, [start], {start})
    return found


def report(name, edges):
    """Prints the graph's cycles; returns how many there are."""
    found = cycles(edges)
    for chain in found:
        print(f"cycle ({name}): " + " -> ".join(chain + [chain[0]]))
        for a, b in zip(chain, chain[1:] + chain[:1]):
            file, line = edges[(a, b)]
            print(f"    {a} -> {b}    {file}:{line}")
    if len(found) >= CYCLE_LIMIT:
        print(f"cycle ({name}): more than {CYCLE_LIMIT} cycles; the first {CYCLE_LIMIT} are above")
    return len(found)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    sub = scan(root)
    failures = report("top", lift(sub)) + report("sub", sub)
    nodes = {n for edge in sub for n in edge}
    if failures:
        print(f"check_include_cycles: FAILED ({failures} cycles; docs/architecture.md \"Dependencies between folders\")")
        return 1
    print(f"check_include_cycles: no cycle among {len(nodes)} folders ({len(sub)} edges)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
