#!/usr/bin/env python3
"""check-docs-links.py — every relative link and #anchor in README.md and
docs/*.md resolves, and every setting of the settings table has its entry in
docs/settings.md (ctest docs_links).

    check-docs-links.py ROOT [BINARY]   check ROOT's README.md and docs/*.md;
                                        with BINARY, also that each setting of
                                        `BINARY --help-config` is a heading of
                                        docs/settings.md
    check-docs-links.py --self-test     run the checker on a good and a broken
                                        fixture: the good one must pass, the
                                        broken one must report each planted fault,
                                        a setting missing from settings.md too

Anchors follow GitHub's rules: a heading's text (markup removed) lowercased,
spaces to '-', punctuation other than '-' and '_' dropped, a repeated anchor
gets -1, -2, ...; an explicit <a id="x"> or <a name="x"> is an anchor too.
Links in code blocks and code spans are not links. External links (http:,
https:, mailto:) are not fetched.
"""
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
HTML_HREF = re.compile(r"<a\s+[^>]*href=\"([^\"]+)\"", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def slug(text):
    """GitHub's anchor for a heading's text."""
    t = CODE_SPAN.sub(lambda m: m.group(2), text)
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", t)  # links: their text
    t = re.sub(r"<[^>]+>", "", t)  # inline HTML
    t = t.strip().lower()
    t = "".join(ch for ch in t if ch.isalnum() or ch in " -_")
    return t.replace(" ", "-")


def scan(path):
    """(anchors, links): the file's anchors and its links as (line, target)."""
    anchors, links, seen = set(), [], {}
    in_fence = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else "%s-%d" % (base, n))
        anchors.update(HTML_ANCHOR.findall(line))
        text = CODE_SPAN.sub("", line)
        for m in INLINE_LINK.finditer(text):
            links.append((no, m.group(2)))
        m = REF_DEF.match(text)
        if m:
            links.append((no, m.group(1)))
        for href in HTML_HREF.findall(text):
            links.append((no, href))
    return anchors, links


def check(root, binary=None):
    """The list of problems, each 'file:line: message'."""
    files = [os.path.join(root, "README.md")]
    ddir = os.path.join(root, "docs")
    if os.path.isdir(ddir):
        files += sorted(os.path.join(ddir, f) for f in os.listdir(ddir) if f.endswith(".md"))
    problems, cache = [], {}

    def anchors_of(p):
        if p not in cache:
            cache[p] = scan(p)[0]
        return cache[p]

    for path in files:
        if not os.path.exists(path):
            problems.append("%s: missing" % os.path.relpath(path, root))
            continue
        rel = os.path.relpath(path, root)
        for no, target in scan(path)[1]:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:, ...
            if target == "":
                problems.append("%s:%d: empty link target" % (rel, no))
                continue
            file_part, _, frag = target.partition("#")
            dest = path if file_part == "" else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append("%s:%d: link to %s: no such file" % (rel, no, file_part))
                continue
            if frag and dest.endswith(".md") and frag not in anchors_of(dest):
                problems.append("%s:%d: link to %s: no anchor #%s in %s" %
                                (rel, no, target, frag, os.path.relpath(dest, root)))
    if binary is not None:
        out = subprocess.run([binary, "--help-config"], check=True, capture_output=True,
                             text=True).stdout
        names = re.findall(r"^([a-z_][a-z0-9_]*) \(default: ", out, re.M)
        if not names:
            problems.append("%s --help-config listed no settings" % binary)
        sp = os.path.join(ddir, "settings.md")
        have = anchors_of(sp) if os.path.exists(sp) else set()
        for n in names:
            if n not in have:
                problems.append("docs/settings.md: setting %s has no entry "
                                "(regenerate: scripts/gen-docs.sh)" % n)
    return problems


def self_test():
    good = {
        "README.md": "# Top\n\n[a](docs/a.md#the-heading-x_y) [b](#top) [c](docs/a.md#it)\n"
                     "[d](#top-1) [e](https://example.com/x#y) `[no](nowhere.md)`\n\n# Top\n",
        "docs/a.md": "## The `heading`: x_y!\n\n<a id=\"it\"></a>text [up](../README.md#top)\n"
                     "```\n[not a link](missing.md)\n```\n[ref]: ../README.md\n",
    }
    broken = dict(good)
    broken["README.md"] += ("[f](docs/gone.md) [g](docs/a.md#no-such) [h](#nowhere)\n"
                            "[i](docs/a.md#the-heading-xy)\n")
    expected = ["no such file", "#no-such", "#nowhere", "#the-heading-xy"]
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for name, files in (("good", good), ("broken", broken)):
            root = os.path.join(d, name)
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w") as f:
                    f.write(text)
            got = check(root)
            if name == "good" and got:
                print("self-test: the good fixture failed:", *got, sep="\n  ")
                ok = False
            if name == "broken":
                for e in expected:
                    if not any(e in p for p in got):
                        print("self-test: the broken fixture's %r was not reported" % e)
                        ok = False
                if len(got) != len(expected):
                    print("self-test: expected %d problems, got:" % len(expected), *got,
                          sep="\n  ")
                    ok = False
        # The settings check: a fake binary whose table has one setting
        # settings.md lacks.
        root = os.path.join(d, "settings")
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("# R\n")
        with open(os.path.join(root, "docs", "settings.md"), "w") as f:
            f.write("# Settings\n\n### `pool_size`\n")
        fake = os.path.join(d, "fake-mongoplex")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nprintf 'pool_size (default: 16)\\n    text\\n"
                    "missing_one (default: 1, reloadable)\\n    text\\n'\n")
        os.chmod(fake, 0o755)
        got = check(root, fake)
        if len(got) != 1 or "setting missing_one has no entry" not in got[0]:
            print("self-test: the missing setting was not reported alone:", *got, sep="\n  ")
            ok = False
    print("self-test: %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    problems = check(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
    for p in problems:
        print(p)
    if problems:
        print("docs links: FAILED: %d problem(s)" % len(problems))
        return 1
    print("docs links: every relative link and anchor in README.md and docs/*.md resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
