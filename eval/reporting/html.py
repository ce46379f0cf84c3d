"""HTML pieces of the run report (eval.reporting.report): tables, figures, notes and the page shell.

Everything is inline (CSS, one small script) so the page reads offline from its folder. The script
records after window load how many images loaded and how many tables rendered, on ``<body>``'s
``data-*`` attributes, which eval.reporting.check reads back from headless Chromium's DOM dump.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1d2330;
 margin:0;background:#fafbfc}
main{max-width:1180px;margin:0 auto;padding:24px 32px 80px}
h1{font-size:26px;margin:8px 0 4px}h2{font-size:21px;margin:40px 0 8px;padding-top:12px;border-top:2px solid #dde3ea}
h3{font-size:16px;margin:24px 0 6px}
code,.path{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;background:#eef1f5;
 padding:1px 4px;border-radius:3px;word-break:break-all}
nav.toc{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:10px 18px;margin:16px 0}
nav.toc ul{margin:4px 0;padding-left:4px;list-style:none}nav.toc a{text-decoration:none;color:#1b5fad}
table.data{border-collapse:collapse;margin:8px 0 4px;background:#fff;font-size:13.5px}
table.data th,table.data td{border:1px solid #d5dbe3;padding:4px 9px;text-align:left;vertical-align:top}
table.data th{background:#eef2f7;font-weight:600}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums}
table.data tr.bound td{color:#6b7380;font-style:italic}
table.data td.best{font-weight:700}
figure{margin:14px 0 22px;background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:10px}
figure img{max-width:100%;height:auto;display:block;margin:0 auto}
figcaption{font-size:13px;color:#3d4552;margin-top:6px}
.note{font-size:13px;color:#3d4552}
.missing{background:#fff7e0;border:1px solid #ecd48a;border-radius:6px;padding:8px 12px;margin:10px 0;font-size:14px}
.missing b{color:#8a5a00}
.example{display:flex;gap:16px;align-items:flex-start;background:#fff;border:1px solid #dde3ea;border-radius:6px;
 padding:10px;margin:12px 0}
.example img{width:180px;height:auto;flex:none;image-rendering:auto}
.example table.data{margin:0;flex:1}
.gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:12px}
.gallery figure{margin:0}
"""

SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = function (i) { return i.complete && i.naturalWidth > 0; };
  var b = document.body;
  b.setAttribute('data-images-loaded', String(imgs.filter(ok).length));
  b.setAttribute('data-images-total', String(imgs.length));
  b.setAttribute('data-images-failed', JSON.stringify(imgs.filter(function (i) { return !ok(i); })
    .map(function (i) { return i.getAttribute('src'); })));
  b.setAttribute('data-tables-rendered', String(document.querySelectorAll('table').length));
  b.setAttribute('data-report-loaded', '1');
});
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def code(text) -> str:
    return f"<code>{esc(text)}</code>"


def anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


@dataclass
class Cell:
    """A table cell: text (escaped) or raw HTML, with CSS classes (num, best)."""
    text: str
    classes: tuple[str, ...] = ()
    raw: bool = False

    def render(self, tag: str = "td") -> str:
        cls = f' class="{" ".join(self.classes)}"' if self.classes else ""
        return f"<{tag}{cls}>{self.text if self.raw else esc(self.text)}</{tag}>"


def table(head: list[str], rows: list[list[Cell | str]], row_classes: list[str] | None = None) -> str:
    out = ['<table class="data"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for r, row in enumerate(rows):
        cls = row_classes[r] if row_classes and row_classes[r] else ""
        out.append(f"<tr{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}>"
                   + "".join((c if isinstance(c, Cell) else Cell(str(c))).render() for c in row) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


def missing(what: str, fix: str) -> str:
    """The note a section shows instead of a figure or table whose input is absent."""
    return f'<div class="missing"><b>Missing:</b> {what} <br><span class="note">Produced by: {fix}</span></div>'


def figure(src: str, alt: str, caption_html: str) -> str:
    return (f'<figure><img src="{esc(src)}" alt="{esc(alt)}">'
            f"<figcaption>{caption_html}</figcaption></figure>")


@dataclass
class Section:
    title: str
    body: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # one line per missing input (for the CLI summary)

    @property
    def id(self) -> str:
        return anchor(self.title)

    def add(self, fragment: str) -> None:
        self.body.append(fragment)

    def note_missing(self, what: str, fix: str) -> None:
        self.missing.append(f"{self.title}: {what}")
        self.body.append(missing(esc(what), esc(fix)))


def page(title: str, intro_html: str, sections: list[Section]) -> str:
    toc = "".join(f'<li><a href="#{s.id}">{esc(s.title)}</a>'
                  + (" <span class=note>(inputs missing)</span>" if s.missing else "") + "</li>" for s in sections)
    body = "\n".join(f'<section id="{s.id}"><h2>{esc(s.title)}</h2>\n' + "\n".join(s.body) + "</section>"
                     for s in sections)
    n_tables = body.count("<table")
    n_images = body.count("<img ")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head>\n"
            f'<body data-tables-expected="{n_tables}" data-images-expected="{n_images}"><main>'
            f"<h1>{esc(title)}</h1>{intro_html}"
            f'<nav class="toc"><b>Contents</b><ul>{toc}</ul></nav>\n{body}\n</main>'
            f"<script>{SCRIPT}</script></body></html>\n")
