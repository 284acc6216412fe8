#!/usr/bin/env python3
"""hakmem_man.py: builds the man pages hakmem(1) and hakmem(3).

Owns: turning docs/options.md and docs/stats.md into roff and filling
them into the hand-written skeletons packaging/man/hakmem.{1,3}.in.
Promises: the option list is read from the table rows of docs/options.md
(which is itself generated from src/options.c), never written down here, so
a renamed or added option reaches the man pages on the next build; the
output is plain man(7) that groff -ww and mandoc -T lint accept; the build
fails if the table yields no option (a format change must be noticed, not
shipped as an empty section). Output is reproducible: the date comes from
SOURCE_DATE_EPOCH, else from the newest input, and the .gz has no mtime.
May call: the Python standard library only.

Placeholders in a skeleton (each on a line of its own, right after a .SH
or .SS line, because the generated text opens without a paragraph macro):
  @OPTIONS@        every option, with default, values and meaning
  @OPTIONS_BRIEF@  every option with its default (for the launcher's page)
  @STATS@          docs/stats.md without its title
and, inline, @VERSION@ and @DATE@.
"""
import argparse
import gzip
import os
import re
import sys
import time

WIDTH = 78

# groff reads its input as Latin-1 unless told otherwise, so anything
# outside ASCII becomes a named glyph or a \[uXXXX] escape (mandoc knows
# both) rather than bytes groff would warn about. An ellipsis ends with \&
# so that neither roff nor fill() takes it for the end of a sentence.
GLYPHS = {
    "\u2014": r"\(em", "\u2013": r"\(en", "\u2026": r"...\&", "\u2192": r"\(->",
    "\u2190": r"\(<-", "\u2265": r"\(>=", "\u2264": r"\(<=", "\u00d7": r"\(mu",
    "\u2018": r"\(oq", "\u2019": r"\(cq", "\u201c": r"\(lq", "\u201d": r"\(rq",
    "\u00a0": r"\~",
}


def glyphs(s):
    out = []
    for ch in s:
        if ord(ch) < 128:
            out.append(ch)
        else:
            out.append(GLYPHS.get(ch, r"\[u%04X]" % ord(ch)))
    return "".join(out)


def esc_code(s):
    # Literal text: a backslash is a backslash and a hyphen is a minus sign
    # (so options copy and paste from the rendered page).
    return glyphs(s.replace("\\", r"\e").replace("-", r"\-"))


def inline(s):
    """Markdown inline markup of one paragraph to roff escapes."""
    parts = re.split(r"(`[^`]*`)", s)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(r"\fB" + esc_code(part[1:-1]) + r"\fR")
            continue
        t = part.replace("\\|", "|").replace("\\", r"\e")
        t = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", t)          # links: text only
        t = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", t)        # bold
        t = re.sub(r"(?<![\w*])\*(?!\s)([^*]+?)\*(?![\w*])", r"\\fI\1\\fR", t)
        out.append(glyphs(t))
    return "".join(out)


def fill(text):
    """Roff text lines of at most WIDTH bytes, one sentence starting each
    line where possible (roff then spaces sentences properly)."""
    words = text.split()
    lines, cur = [], ""
    for i, w in enumerate(words):
        if cur and len(cur) + 1 + len(w) > WIDTH:
            lines.append(cur)
            cur = w
        else:
            cur = cur + " " + w if cur else w
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if re.search(r"[.?!][)\"']?$", w) and re.match(r"[A-Z`(\\]", nxt) \
                and not re.search(r"(^|\W)(e\.g|i\.e|etc|vs)\.$", w):
            lines.append(cur)
            cur = ""
    if cur:
        lines.append(cur)
    # A text line must not open with a control character.
    return [r"\&" + l if l[:1] in (".", "'") else l for l in lines]


def split_row(line, ncols):
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    # Cells are separated by " | "; a bare | inside a cell (a|b|c) stays.
    cells = re.split(r"(?<!\\)\s\|\s", " " + body + " ", maxsplit=ncols - 1)
    return [c.strip() for c in cells]


class Md2Man:
    """A small Markdown reader: the subset docs/*.md uses (headings,
    paragraphs, fenced code, lists, pipe tables)."""

    def __init__(self):
        self.out = []
        self.first = True  # right after .SH/.SS: no paragraph macro needed
        self.options = []  # (first cell, {header: cell}) of every table row

    def para(self):
        if not self.first:
            self.out.append(".PP")
        self.first = False

    def emit_paragraph(self, lines):
        self.para()
        self.out += fill(inline(" ".join(l.strip() for l in lines)))

    def emit_list(self, items):
        for marker, lines in items:
            tag = r"\(bu" if marker in ("-", "*", "+") else marker
            self.out.append('.IP "%s" 4' % tag)
            self.out += fill(inline(" ".join(l.strip() for l in lines)))
        self.first = False

    def emit_code(self, lines):
        self.para()
        self.out += [".RS 4", ".EX"]
        for l in lines:
            t = esc_code(l.rstrip())
            self.out.append(r"\&" + t if t[:1] in (".", "'") else t)
        self.out += [".EE", ".RE"]

    def emit_table(self, rows):
        if len(rows) < 2:
            return self.emit_paragraph(rows)
        head = [c.strip("` ").lower() for c in split_row(rows[0], rows[0].count(" | ") + 1)]
        n = len(head)
        for row in rows[2:]:
            cells = split_row(row, n)
            cells += [""] * (n - len(cells))
            # "`HAKMEM_X`<br>`opt.x`": the variable, then its hak_ctl name
            parts = [x.strip().strip("`") for x in cells[0].split("<br>")]
            name = parts[0]
            self.options.append((name, dict(zip(head, cells))))
            self.out += [".TP", r"\fB" + esc_code(name) + r"\fR"]
            if len(parts) > 1:
                cells[-1] = cells[-1] + " (hak_ctl: `" + "`, `".join(parts[1:]) + "`)"
            extra = ["%s: %s" % (h.capitalize(), inline(c)) for h, c in zip(head[1:-1], cells[1:-1]) if c]
            text = "; ".join(extra)
            if text:
                text += ". "
            self.out += fill(text + inline(cells[-1]))
        self.first = False

    def convert(self, md, skip_para=None):
        """md: the page's text. skip_para: paragraphs matching this regular
        expression are left out (e.g. notes about how the page is made)."""
        block, kind, items, code = [], None, [], None

        def flush():
            nonlocal block, kind, items
            if kind == "p":
                if not (skip_para and re.search(skip_para, " ".join(block))):
                    self.emit_paragraph(block)
            elif kind == "table":
                self.emit_table(block)
            elif kind == "list":
                self.emit_list(items)
            block, kind, items = [], None, []

        for line in md.splitlines():
            if code is not None:
                if line.startswith("```"):
                    self.emit_code(code)
                    code = None
                else:
                    code.append(line)
                continue
            if line.startswith("```"):
                flush()
                code = []
                continue
            if not line.strip():
                flush()
                continue
            m = re.match(r"(#+)\s+(.*)", line)
            if m:
                flush()
                if len(m.group(1)) > 1:  # the page title is the skeleton's
                    self.out.append(".SS " + inline(m.group(2)))
                    self.first = True
                continue
            if line.startswith("|"):
                if kind != "table":
                    flush()
                    kind = "table"
                block.append(line)
                continue
            m = re.match(r"(\d+\.|[-*+])\s+(.*)", line)
            if m:
                if kind != "list":
                    flush()
                    kind = "list"
                items.append((m.group(1), [m.group(2)]))
                continue
            if kind == "list":
                items[-1][1].append(line)
                continue
            if kind != "p":
                flush()
                kind = "p"
            block.append(line)
        if code is not None:
            sys.exit("hakmem_man: unterminated code block")
        flush()
        return self.out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--options", required=True, help="docs/options.md")
    ap.add_argument("--stats", required=True, help="docs/stats.md")
    ap.add_argument("--version", required=True)
    ap.add_argument("--gzip", action="store_true", help="also write OUT.gz")
    ap.add_argument("pairs", nargs="+", metavar="SKELETON=OUT")
    a = ap.parse_args()

    with open(a.options, encoding="utf-8") as f:
        options_md = f.read()
    with open(a.stats, encoding="utf-8") as f:
        stats_md = f.read()

    conv = Md2Man()
    options_roff = conv.convert(options_md, skip_para=r"^Generated from")
    # Rows of other tables the page may grow are rendered, not listed.
    opts = [(n, c) for n, c in conv.options if re.fullmatch(r"HAKMEM_[A-Z0-9_]+", n)]
    if not opts:
        sys.exit("hakmem_man: no HAKMEM_* option table found in %s" % a.options)
    brief = []
    for name, cells in opts:
        brief += [".TP", r"\fB" + esc_code(name) + r"\fR"]
        dflt = cells.get("default", "")
        vals = cells.get("values", "")
        brief += fill(inline("Default %s%s." % (dflt, "; " + vals if vals else "")))
    stats_roff = Md2Man().convert(stats_md)

    inputs = [a.options, a.stats, __file__] + [p.split("=", 1)[0] for p in a.pairs]
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    stamp = int(epoch) if epoch else int(max(os.path.getmtime(p) for p in inputs))
    date = time.strftime("%Y-%m-%d", time.gmtime(stamp))

    subst = {"@OPTIONS@": options_roff, "@OPTIONS_BRIEF@": brief, "@STATS@": stats_roff}
    for pair in a.pairs:
        skel, out = pair.split("=", 1)
        with open(skel, encoding="utf-8") as f:
            lines = f.read().splitlines()
        res = []
        for l in lines:
            if l.strip() in subst:
                res += subst[l.strip()]
            else:
                res.append(l.replace("@VERSION@", a.version).replace("@DATE@", date))
        text = "\n".join(res) + "\n"
        left = re.findall(r"@[A-Z_]+@", text)
        if left:
            sys.exit("hakmem_man: %s: unknown placeholder %s" % (skel, left[0]))
        with open(out, "w", encoding="ascii") as f:
            f.write(text)
        if a.gzip:
            with open(out + ".gz", "wb") as raw:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as z:
                    z.write(text.encode("ascii"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
