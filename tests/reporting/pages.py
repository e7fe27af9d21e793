"""Reading a rendered page back in the report tests: its tags, texts and scripts, and the
checks that it references nothing outside itself."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

URL_ATTRS = {"src", "href", "action", "formaction", "data", "poster", "srcset", "background",
             "xlink:href", "manifest", "ping", "cite", "longdesc"}



class Page(HTMLParser):
    """Every tag with its attributes, the text per section / article / table row, and the
    contents of every script and style element."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.styles: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.rows: list[tuple[dict, list[str]]] = []
        self._open: list[tuple[str, str | None]] = []
        self._raw: tuple[str, dict, list[str]] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in ("script", "style"):
            self._raw = (tag, a, [])
        if tag == "section":
            self._open.append((tag, "section:" + a.get("id", "")))
        elif tag == "article":
            self._open.append((tag, "article:" + a.get("data-key", "")))
        elif tag == "tr":
            self.rows.append((a, []))
            self._open.append((tag, None))

    def handle_endtag(self, tag):
        if self._raw and tag == self._raw[0]:
            kind, a, parts = self._raw
            (self.scripts.append((a, "".join(parts))) if kind == "script"
             else self.styles.append("".join(parts)))
            self._raw = None
        if tag in ("section", "article", "tr") and self._open and self._open[-1][0] == tag:
            self._open.pop()

    def handle_data(self, data):
        if self._raw:
            self._raw[2].append(data)
            return
        for tag, name in self._open:
            if name:
                self.text.setdefault(name, []).append(data)
        if any(tag == "tr" for tag, _ in self._open) and self.rows:
            self.rows[-1][1].append(data)

    def of(self, name: str) -> str:
        return " ".join(" ".join(self.text.get(name, [])).split())

    def row_texts(self) -> list[str]:
        return [" ".join(" ".join(parts).split()) for _, parts in self.rows]


#: an interval's method (``ci.kind``) -> the tag docs/report.md says follows its bounds
METHOD_TAG = {"cluster": "cluster-bs", "wider": "wider-bs", "case": "case-bs", "wilson": "Wilson",
              "exact": "exact"}


def rate(r: dict) -> str:
    """A stored rate as docs/report.md says the page writes it: value, interval, the tag of the
    interval's method (a scorecard without one used the cluster bootstrap), num/den."""
    if r["value"] is None:
        return f"n/a ({r['num']}/{r['den']})"
    ci = r.get("ci") or {}
    bounds = ""
    if ci.get("low") is not None:
        bounds = (f" [{100 * ci['low']:.1f}, {100 * ci['high']:.1f}] "
                  f"{METHOD_TAG[ci.get('kind', 'cluster')]}")
    return f"{100 * r['value']:.1f}%{bounds} ({r['num']}/{r['den']})"


def power_label(card: dict) -> str:
    p = card["power"]
    able = [r["difference_points"] for r in p["rows"] if r["cases_needed_clustered"] <= p["n_cases"]]
    return f"able to rank {min(able)}-point differences" if able else "diagnostic only"


def assert_self_contained(html: str) -> Page:
    """Nothing outside the file: no URL attribute but fragments, no remote or file reference in
    CSS, every inline script and style named by hash in the CSP, no handler attributes."""
    page = Page(html)
    csp = [a["content"] for t, a in page.tags if t == "meta"
           and a.get("http-equiv", "").lower() == "content-security-policy"]
    assert len(csp) == 1 and "default-src 'none'" in csp[0] and "unsafe" not in csp[0]
    for tag, attrs in page.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base", "frame", "audio",
                           "video", "source", "image"), tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert name != "style", (tag, value)
            if name in URL_ATTRS:
                assert value is not None and value.startswith("#"), (tag, name, value)
    for text in page.styles:
        assert "@import" not in text and not re.search(r"url\((?!#)", text)
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp[0]
    code = [(a, t) for a, t in page.scripts if a.get("type") != "application/json"]
    assert len(code) == 1 and all("src" not in a for a, _ in page.scripts)
    digest = base64.b64encode(hashlib.sha256(code[0][1].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp[0]
    assert not re.search(r"\b(?:src|href)\s*=\s*[\"']?\s*(?:https?:|//|file:)", html, re.I)
    return page


def data_block(page: Page) -> tuple[str, list]:
    blocks = [t for a, t in page.scripts if a.get("type") == "application/json"]
    assert len(blocks) == 1
    assert not re.search(r"[<>&]", blocks[0])  # nothing can close the block or open a comment
    return blocks[0], json.loads(blocks[0])
