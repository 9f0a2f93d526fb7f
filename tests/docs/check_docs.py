#!/usr/bin/env python3
"""The documentation keeps what a reader clones: links that resolve, no machine paths, a short README.

Checks, over the repository at ROOT (default: two folders above this file):

  links     every relative Markdown link and image in README.md, docs/**/*.md and results/**/*.md
            names a file or folder of the tree, and every #anchor names a heading of its target
            Markdown file (GitHub's rule for heading ids, below). Links to other sites are not
            followed; a link that leaves the repository is a failure.
  paths     no file of the tree holds an absolute path of a particular machine: a home or root
            folder (the /home, /root and /work prefixes) anywhere, and the /tmp prefix in
            documentation, recorded results and fuzz seeds (README.md, *.md, docs/, results/,
            tests/fuzz/corpus/) — a script or test that makes a scratch file at run time may use it.
  readme    README.md has at most 200 lines; the rest belongs in docs/.

The files are those git tracks, plus new files it does not ignore, when ROOT is a git checkout;
otherwise every file under ROOT but build folders (build*/) and .git. Binary files are skipped.

Prints one line per failure, as FILE:LINE: what, and exits 1; exits 0 with a summary otherwise.
Standard library only. Usage: check_docs.py [ROOT]
"""
import os
import re
import subprocess
import sys
import unicodedata
import urllib.parse

README_MAX_LINES = 200
DOC_ROOTS = ("docs/", "results/")
# A path of one machine. The character before the slash must not be part of a word, a URL host or a
# relative path, so that a path on a web site or under a folder of the tree does not count.
HOME_RE = re.compile(r"(?<![\w.~$/-])/(?:work|root|home)/")
TMP_RE = re.compile(r"(?<![\w.~$/-])/(?:tmp)/")
TMP_FORBIDDEN_UNDER = ("docs/", "results/", "tests/fuzz/corpus/")


def list_files(root):
    """Relative paths, '/'-separated: git's tracked and unignored files, or a walk of the tree."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True, capture_output=True).stdout
        files = sorted({f for f in out.decode("utf-8", "surrogateescape").split("\0") if f})
        return [f for f in files if os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != ".git" and not x.startswith("build") and x != "__pycache__")
        rel = os.path.relpath(d, root)
        for n in sorted(names):
            files.append(n if rel == "." else f"{rel.replace(os.sep, '/')}/{n}")
    return files


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


# ---- Markdown: code, headings, links ----

FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def prose_lines(text, keep_code=False):
    """(line number, line) outside fenced code blocks; inline code spans blanked unless keep_code
    (a heading's `code` is part of its id; a link inside code is no link)."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE_RE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence = None
            continue
        yield n, line if keep_code else re.sub(r"(`+)(.+?)\1", lambda c: " " * len(c.group(0)), line)


def github_slug(heading):
    """The id GitHub gives a heading: the rendered text lower-cased, characters other than letters,
    marks, digits, '_', '-' and spaces dropped, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    out = []
    for ch in text.strip().lower():
        cat = unicodedata.category(ch)
        if ch in " -" or cat[0] in "LMN" or cat == "Pc":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors(text):
    """Every id a reader can link to in a Markdown file: its headings' slugs (repeats numbered -1,
    -2, … as GitHub does) and explicit HTML ids or names."""
    ids, seen = set(), {}
    prev = ""
    for _, line in prose_lines(text, keep_code=True):
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
        heading = m.group(1) if m else None
        if heading is None and re.match(r"^\s{0,3}(=+|-+)\s*$", line) and prev.strip() and "|" not in prev:
            heading = prev.strip()
        if heading is not None:
            slug = github_slug(heading)
            n = seen.get(slug, 0)
            ids.add(slug if n == 0 else f"{slug}-{n}")
            seen[slug] = n + 1
        for hid in re.findall(r"<[^>]+\s(?:id|name)=[\"']([^\"']+)[\"']", line):
            ids.add(hid)
        prev = line
    return ids


INLINE_LINK_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REF_DEF_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
EXTERNAL_RE = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")


def links(text):
    for n, line in prose_lines(text):
        for m in INLINE_LINK_RE.finditer(line):
            yield n, m.group(1).strip("<>")
        m = REF_DEF_RE.match(line)
        if m:
            yield n, m.group(1).strip("<>")


def check_links(root, md_files, tracked, failures):
    dirs = {d for f in tracked for d in parent_dirs(f)}
    anchor_cache = {}

    def ids_of(rel):
        if rel not in anchor_cache:
            anchor_cache[rel] = anchors(read_text(os.path.join(root, rel)) or "")
        return anchor_cache[rel]

    count = 0
    for md in md_files:
        text = read_text(os.path.join(root, md))
        if text is None:
            continue
        for n, target in links(text):
            if EXTERNAL_RE.match(target):
                continue
            count += 1
            path, _, anchor = target.partition("#")
            path = urllib.parse.unquote(path)
            if path.startswith("/"):
                failures.append(f"{md}:{n}: link '{target}' is absolute; write it relative to {md}")
                continue
            if path:
                rel = os.path.normpath(os.path.join(os.path.dirname(md), path)).replace(os.sep, "/")
                if rel == ".." or rel.startswith("../"):
                    failures.append(f"{md}:{n}: link '{target}' leaves the repository")
                    continue
                if rel not in tracked and rel not in dirs and rel != ".":
                    failures.append(f"{md}:{n}: link '{target}': {rel} is not in the tree")
                    continue
            else:
                rel = md
            if anchor and rel.endswith(".md") and rel in tracked:
                want = urllib.parse.unquote(anchor).lower()
                if want not in ids_of(rel):
                    failures.append(f"{md}:{n}: link '{target}': no heading of {rel} has the id '#{want}'")
    return count


def parent_dirs(path):
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


# ---- machine paths ----

def tmp_forbidden(rel):
    return rel == "README.md" or rel.endswith(".md") or rel.startswith(TMP_FORBIDDEN_UNDER)


def check_paths(root, files, failures):
    count = 0
    for rel in files:
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        count += 1
        no_tmp = tmp_forbidden(rel)
        for n, line in enumerate(text.split("\n"), 1):
            m = HOME_RE.search(line) or (TMP_RE.search(line) if no_tmp else None)
            if m:
                what = line.strip()
                if len(what) > 120:
                    what = what[:117] + "..."
                failures.append(f"{rel}:{n}: a machine path ('{m.group(0)}'): {what}")
    return count


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    files = list_files(root)
    tracked = set(files)
    md_files = [f for f in files if f.endswith(".md") and (f == "README.md" or f.startswith(DOC_ROOTS))]
    failures = []

    n_links = check_links(root, md_files, tracked, failures)
    n_files = check_paths(root, files, failures)
    readme = os.path.join(root, "README.md")
    if not os.path.isfile(readme):
        failures.append("README.md:1: missing")
    else:
        lines = (read_text(readme) or "").rstrip("\n").count("\n") + 1
        if lines > README_MAX_LINES:
            failures.append(f"README.md:{README_MAX_LINES + 1}: {lines} lines, more than {README_MAX_LINES}; "
                            "move the detail into docs/")

    for f in failures:
        print(f)
    if failures:
        print(f"check_docs: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print(f"check_docs: ok ({len(md_files)} Markdown files, {n_links} relative links, "
          f"{n_files} text files free of machine paths, README.md within {README_MAX_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
