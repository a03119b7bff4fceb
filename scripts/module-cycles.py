#!/usr/bin/env python3
"""Finds circles among the modules of each crate: a module that imports,
directly or through others, a module that imports it back.

Usage: scripts/module-cycles.py [CRATE_DIR ...]   (default: every crate
under services/, plus examples/upstream)

For every crate the module tree is read from its `lib.rs` (`mod x;`
declarations, `#[path]` honoured, `#[cfg(test)]` modules left out), and every
path a file names is resolved to the file that defines it: `crate::`,
`super::`, `self::` and paths through the file's own child modules, in `use`
trees and inline. A name re-exported with `pub use` is followed to the file
that defines it, so a re-export in `lib.rs` is not an edge through `lib.rs`.
Test code is left out: a file's `#[cfg(test)] mod tests` and everything
after it, and `tests/`, `benches/`.

Edges are files, not items; a circle is a strongly connected component of
more than one file. Exit status 1 when any crate has one, with the files and
the names that tie them. It reads text, so it can miss a path built by a
macro; it never runs the code.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ITEM_DEF = r"(?:fn|struct|enum|trait|type|const|static|mod|union|macro_rules!)\s+{name}\b"


def strip_comments_and_strings(text: str) -> str:
    """Blanks comments, string and char literals (keeps line structure)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            hashes = m.group(1)
            end = text.find('"' + hashes, i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or (c == "'" and re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12])):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cut_tests(text: str) -> str:
    """Drops the `#[cfg(test)] mod ...` block at the end of a file and what follows."""
    m = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
    return text[: m.start()] if m else text


class Crate:
    def __init__(self, root_dir: str):
        self.dir = root_dir
        src = os.path.join(root_dir, "src")
        lib = os.path.join(src, "lib.rs")
        self.root = lib if os.path.exists(lib) else os.path.join(src, "main.rs")
        self.modules: dict[tuple, str] = {}  # module path -> file
        self.file_mod: dict[str, tuple] = {}
        self.text: dict[str, str] = {}
        self.children: dict[tuple, set] = defaultdict(set)
        self._load((), self.root, mod_rs=True)

    def _load(self, path: tuple, file: str, mod_rs: bool):
        if not os.path.exists(file) or file in self.file_mod:
            return
        self.modules[path] = file
        self.file_mod[file] = path
        raw = open(file, encoding="utf-8").read()
        clean = cut_tests(strip_comments_and_strings(raw))
        self.text[file] = clean
        base = os.path.dirname(file) if mod_rs else os.path.splitext(file)[0]
        pattern = re.compile(
            r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"
        )
        for m in pattern.finditer(clean):
            attrs, name = m.group(1), m.group(2)
            if "cfg(test)" in attrs:
                continue
            pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]', raw[max(0, raw.find("mod " + name) - 200): raw.find("mod " + name)])
            if pm:
                child = os.path.normpath(os.path.join(os.path.dirname(file), pm.group(1)))
                child_mod_rs = False
            else:
                child = os.path.join(base, name + ".rs")
                child_mod_rs = False
                if not os.path.exists(child):
                    child = os.path.join(base, name, "mod.rs")
                    child_mod_rs = True
            self.children[path].add(name)
            self._load(path + (name,), child, child_mod_rs)

    # --- names ---------------------------------------------------------------

    def reexports(self, file: str) -> tuple[dict, list]:
        """`pub use` names of a file: name -> absolute path, and glob sources."""
        named, globs = {}, []
        mod = self.file_mod[file]
        for stmt in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", self.text[file]):
            for path, alias in expand_use(stmt.group(1)):
                absolute = self.absolute(mod, path)
                if absolute is None:
                    continue
                if path[-1] == "*":
                    globs.append(absolute[:-1])
                else:
                    named[alias] = absolute
        return named, globs

    def defines(self, file: str, name: str) -> bool:
        return re.search(ITEM_DEF.format(name=re.escape(name)), self.text[file]) is not None

    def absolute(self, mod: tuple, path: list) -> tuple | None:
        """A path as written in module `mod`, made absolute within the crate (or None)."""
        if not path:
            return None
        head, rest = path[0], list(path[1:])
        if head == "crate":
            return tuple(rest)
        if head == "self":
            return mod + tuple(rest)
        if head == "super":
            cur = mod
            while True:
                cur = cur[:-1]
                if rest and rest[0] == "super":
                    rest = rest[1:]
                    continue
                return cur + tuple(rest)
        if head in self.children.get(mod, ()):
            return mod + tuple(path)
        return None

    def resolve(self, absolute: tuple, seen=None) -> str | None:
        """The file defining what an absolute path names."""
        seen = seen or set()
        if absolute in seen:
            return None
        seen.add(absolute)
        k = len(absolute)
        while k > 0 and absolute[:k] not in self.modules:
            k -= 1
        file = self.modules.get(absolute[:k])
        if file is None:
            return None
        rest = absolute[k:]
        if not rest or rest[0] in ("*", "self"):
            return file
        name = rest[0]
        if self.defines(file, name):
            return file
        named, globs = self.reexports(file)
        if name in named:
            target = named[name] + tuple(rest[1:])
            return self.resolve(target, seen) or file
        for g in globs:
            target = self.resolve(g + tuple(rest), seen)
            if target is not None and target != self.modules.get(g):
                return target
            gf = self.modules.get(g)
            if gf and self.defines(gf, name):
                return gf
        return file

    # --- inline modules --------------------------------------------------------

    @staticmethod
    def inline_modules(text: str) -> list:
        """(start, end, name) of every inline `mod name { ... }` block."""
        spans = []
        for m in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
            depth, i = 1, m.end()
            while i < len(text) and depth:
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                i += 1
            spans.append((m.end(), i, m.group(1)))
        return spans

    @staticmethod
    def module_at(mod: tuple, spans: list, pos: int) -> tuple:
        """The module a position of a file is in: its inline modules appended."""
        inner = sorted((s for s in spans if s[0] <= pos < s[1]), key=lambda s: s[0])
        return mod + tuple(s[2] for s in inner)

    # --- edges ---------------------------------------------------------------

    def edges(self) -> dict:
        """file -> {file it imports from: set of names}."""
        out: dict = defaultdict(lambda: defaultdict(set))
        for file, text in self.text.items():
            mod = self.file_mod[file]
            spans = self.inline_modules(text)
            paths = []  # (module the path is written in, path)
            for stmt in re.finditer(r"\buse\s+([^;]+);", text):
                at = self.module_at(mod, spans, stmt.start())
                paths.extend((at, p) for p, _ in expand_use(stmt.group(1)))
            no_use = re.sub(r"\buse\s+[^;]+;", lambda m: " " * len(m.group(0)), text)
            children = self.children.get(mod, set())
            for m in re.finditer(r"(?<![\w:])((?:crate|super|self|\w+)(?:\s*::\s*\w+)+)", no_use):
                segs = [s.strip() for s in m.group(1).split("::")]
                at = self.module_at(mod, spans, m.start())
                if segs[0] in ("crate", "super", "self") or (at == mod and segs[0] in children):
                    paths.append((at, segs))
            for at, path in paths:
                if at != mod and path[0] == "super" and len(path) > 1 and at[:-1] == mod:
                    # `super::` inside an inline module of this file is this file.
                    path = ["self"] + path[1:]
                    at = mod
                elif at != mod and path[0] in ("self", "super"):
                    continue  # deeper inline nesting: stays inside this file
                absolute = self.absolute(mod, path)
                if absolute is None:
                    continue
                target = self.resolve(absolute)
                if target and target != file:
                    label = path[-1] if path[-1] not in ("*", "self") else "::".join(path)
                    out[file][target].add(label)
        return out


def expand_use(tree: str) -> list:
    """`a::{b, c::d as e, f::*}` -> [(['a','b'],'b'), (['a','c','d'],'e'), (['a','f','*'],'*')]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    out = []

    def segments(s: str) -> list:
        return [x.strip() for x in s.split("::") if x.strip()]

    def walk(prefix: list, s: str):
        depth, start, parts = 0, 0, []
        for i, c in enumerate(s):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in parts:
            part = part.strip()
            if not part:
                continue
            if "{" in part:
                head, inner = part.split("{", 1)
                walk(prefix + segments(head), inner[: inner.rfind("}")])
                continue
            m = re.match(r"^(.*?)\s+as\s+(\w+)$", part)
            path, alias = (m.group(1), m.group(2)) if m else (part, None)
            segs = prefix + segments(path)
            if segs:
                out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


def circles(edges: dict) -> list:
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]
    nodes = set(edges) | {t for ts in edges.values() for t in ts}

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return comps


def main(argv: list) -> int:
    crates = argv or sorted(
        [os.path.join(ROOT, "services", d) for d in os.listdir(os.path.join(ROOT, "services"))]
        + [os.path.join(ROOT, "examples", "upstream")]
    )
    found = 0
    for d in crates:
        if not os.path.exists(os.path.join(d, "src")):
            continue
        crate = Crate(d)
        edges = crate.edges()
        rel = lambda f: os.path.relpath(f, ROOT)
        comps = circles(edges)
        for comp in comps:
            found += 1
            print(f"circle in {rel(d)}: {len(comp)} files")
            members = set(comp)
            for f in comp:
                for t, names in sorted(edges[f].items()):
                    if t in members:
                        print(f"  {rel(f)} -> {rel(t)}: {', '.join(sorted(names))}")
        print(f"{rel(d)}: {len(crate.modules)} modules, {'no circle' if not comps else f'{len(comps)} circle(s)'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
