"""Escaping: every string from outside is escaped for the place it lands in a page.

Pages are Markdown with raw HTML passed through (Python-Markdown), so a string interpolated
into a page must neither open an HTML element nor be read as Markdown.  The environment's
``finalize`` escapes every ``{{ … }}`` output with :func:`md_text` unless it is Markup (a
chart, an anchor, a URL path, a code span built here), so a template cannot forget it.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from typing import Any

from markupsafe import Markup


#: Characters that Markdown (with tables, attr_list, toc, md_in_html) or HTML would read as syntax,
#: written as numeric character references: the browser shows the character, Markdown sees none.
_MD_SPECIAL = {c: f"&#{ord(c)};" for c in "\\`*_{}[]<#|"}
_MD_SPECIAL["&"] = "&amp;"
_MD_RE = re.compile("[" + re.escape("".join(_MD_SPECIAL)) + "]")
_NEWLINES_RE = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


#: Bidirectional controls (Unicode UAX #9, https://www.unicode.org/reports/tr9/; "Trojan Source", CVE-2021-42574):
#: U+202E makes ``llama\u202etxt.exe`` read ``llamaexe.txt``.  Never published raw: each is shown as ``[U+XXXX]``.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI_RE = re.compile("[" + BIDI_CONTROLS + "]")


def visible_controls(text: str) -> str:
    """``text`` with every bidirectional control (:data:`BIDI_CONTROLS`) written as ``[U+XXXX]``: seen, not obeyed."""
    return _BIDI_RE.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def md_text(value: Any) -> Markup:
    """``value`` as inline Markdown text that shows exactly as given (HTML, Markdown table cell, heading).

    ``&``, ``<`` (no HTML element or entity can open) and every sign that Markdown with tables,
    attr_list and toc reads mid-line (`` \\ ` * _ { } [ ] # | ``) become character references, line breaks a space (a newline would end a table row), and
    other control characters are dropped, bidirectional controls shown (:func:`visible_controls`).  Markup
    (already safe) passes unchanged.
    """
    if isinstance(value, Markup):
        return value
    text = visible_controls(_CONTROL_RE.sub("", _NEWLINES_RE.sub(" ", str(value))))
    return Markup(_MD_RE.sub(lambda m: _MD_SPECIAL[m.group()], text))


def html_text(value: Any) -> Markup:
    """``value`` escaped for HTML text or an attribute value (``& < > " '``)."""
    from markupsafe import escape

    return escape(value if isinstance(value, Markup) else visible_controls(str(value)))


def code(value: Any) -> Markup:
    """``value`` as an inline code span (``<code>``), shown as given."""
    return Markup(f"<code>{md_text(value)}</code>")


_ANCHOR_BAD = re.compile(r"[^a-z0-9_-]+")


#: Longest anchor (and page file name stem) :func:`anchor` makes; a longer one is cut and ends in a digest.
MAX_ANCHOR_CHARS = 120


def anchor(value: Any) -> Markup:
    """An element id / URL fragment from any string: lower case ``[a-z0-9_-]``, at most :data:`MAX_ANCHOR_CHARS`.

    A string that needed changing gets a short hash of the original, so two names that differ
    only in dropped characters (``a|b``, ``a<b``) never share an id; one longer than the limit is
    cut and ends in a 16-digit hash of the whole (model page file names are anchors).
    """
    raw = str(value)
    low = raw.lower()
    clean = _ANCHOR_BAD.sub("-", low).strip("-") or "x"
    if len(clean) > MAX_ANCHOR_CHARS:  # a page's file name too: 5,000 characters hit ENAMETOOLONG
        return Markup(f"{clean[:MAX_ANCHOR_CHARS - 17].rstrip('-')}-"
                      f"{hashlib.sha256(raw.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}")
    if clean != low:
        clean = f"{clean}-{hashlib.sha256(raw.encode()).hexdigest()[:6]}"
    return Markup(clean)


def url_path(value: Any) -> Markup:
    """``value`` as one URL path segment (percent-encoded; ``/`` too), for link targets such as downloads."""
    return Markup(urllib.parse.quote(str(value), safe=""))


#: A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV Injection",
#: https://owasp.org/www-community/attacks/CSV_Injection): such a text cell gets a leading ``'``.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_CSV_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def csv_cell(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs and no terminal obeys: a text starting like a formula gets a leading
    ``'``, control characters (ESC of a terminal escape) are written ``\\x1b``, bidirectional controls
    ``[U+XXXX]``; numbers and None as they are (a negative number is no formula)."""
    if not isinstance(value, str):
        return value
    text = visible_controls(_CSV_CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", value))
    return "'" + text if text.startswith(_FORMULA_START) or value.startswith(_FORMULA_START) else text
