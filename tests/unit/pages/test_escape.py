"""Escaping filters of the page renderer: each string from outside lands as text (fault kind: injection)."""

from __future__ import annotations

import json

from markupsafe import Markup

from pipeline.pages.render import anchor, chart_json, code, make_env, md_text, url_path


def test_md_text_escapes_html_and_markdown_signs():
    assert md_text("<img src=x onerror=alert(1)>") == "&#60;img src=x onerror=alert(1)>"
    assert md_text("a|b") == "a&#124;b"
    assert md_text("*x* _y_ `z` [l](u) {: #id } \\") == "&#42;x&#42; &#95;y&#95; &#96;z&#96; &#91;l&#93;(u) &#123;: &#35;id &#125; &#92;"
    assert md_text("a & b &lt;") == "a &amp; b &amp;lt;"
    assert md_text("line1\nline2\r\n\x00x") == "line1 line2 x"  # a newline would end a table row
    assert md_text("Llama-3.1-8B 1,234.5") == "Llama-3.1-8B 1,234.5"  # ordinary text unchanged
    assert md_text(Markup("<b>kept</b>")) == "<b>kept</b>"


def test_code_anchor_and_url_path():
    assert code("a`b<c") == "<code>a&#96;b&#60;c</code>"
    assert anchor("20261201T000000Z-a") == "20261201t000000z-a"
    # changed names get a hash of the original, so "a|b" and "a<b" never share an id
    assert anchor("a|b").startswith("a-b-") and anchor("a|b") != anchor("a<b")
    assert set(anchor('x" onmouseover="alert(1)')) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_")
    assert url_path("a b/../c") == "a%20b%2F..%2Fc"


def test_chart_json_cannot_close_its_script_and_has_no_nan():
    blob = chart_json({"title": "</script><script>alert(1)</script>&", "v": float("nan"), "w": [float("inf"), 1.5]})
    assert "<" not in blob and ">" not in blob and "&" not in blob
    assert json.loads(blob) == {"title": "</script><script>alert(1)</script>&", "v": None, "w": [None, 1.5]}


def test_every_template_output_is_escaped_by_default():
    env = make_env()
    out = env.from_string("| {{ name }} | {{ n|fmt }} | {{ missing_is_none }} |").render(name="a|<b>", n=1234.5,
                                                                                        missing_is_none=None)
    assert out == "| a&#124;&#60;b> | 1,234.5 | – |"
