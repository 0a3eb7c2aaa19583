"""Self-contained HTML report: no network URLs, escaping, SVG pipeline, one <details> per phase."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import tracefactory as tf

from policyrun.render.html import pipeline_layout, render_html

# An absolute or protocol-relative URL anywhere in the page (attribute, CSS, script or text).
EXTERNAL_URL = re.compile(r"(?i)\b(?:https?|ftp|wss?)://|(?<![\w:/])//[a-z0-9.-]+", re.ASCII)


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Collect()
    parser.feed(html)
    return parser.tags


def test_html_golden() -> None:
    tf.golden("report.html", render_html(tf.flagship()))


@pytest.mark.parametrize("make", [tf.flagship, tf.generic, tf.all_pass])
def test_html_has_no_external_urls(make) -> None:  # type: ignore[no-untyped-def]
    html = render_html(make())
    assert not EXTERNAL_URL.search(html), EXTERNAL_URL.search(html)
    for tag, attrs in _tags(html):
        for name in ("src", "href", "action", "srcset", "poster", "data"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), (tag, name, value)
        assert tag not in ("link", "iframe", "object", "embed", "img", "base")


def test_url_in_fact_is_shown_but_not_linkable() -> None:
    html = render_html(tf.flagship())
    assert "https:&#47;&#47;github.com/example/afd.git" in html  # renders as https://github.com/...


def test_every_phase_expands_to_its_checks() -> None:
    trace = tf.flagship()
    html = render_html(trace)
    details = [a for t, a in _tags(html) if t == "details" and "phase" in (a.get("class") or "")]
    assert [d["id"] for d in details] == [f"phase-{p.phase}" for p in trace.phases]
    for d, p in zip(details, trace.phases, strict=True):
        assert f"s-{p.status}" in (d.get("class") or "")
        assert ("open" in d) == (p.status in ("FAIL", "BLOCKED", "STOPPED"))
    for p in trace.phases:
        for c in p.evidence:
            assert f"<code>{c.id}</code>" in html
    assert "git rev-parse --verify v0.9.1^{commit}" in html  # provenance command
    assert "build&#47;&#47;" not in html and "build/unit-junit.xml" in html


def _svg(html: str, which: str) -> str:
    start = html.index(f'<svg class="pipeline {which}"')
    return html[start:html.index("</svg>", start)]


@pytest.mark.parametrize("which", ["wide", "narrow"])
def test_svg_pipeline_nodes_coloured_and_linked(which: str) -> None:
    trace = tf.flagship()
    svg = _svg(render_html(trace), which)
    nodes = [a for t, a in _tags(svg) if t == "a" and "node" in (a.get("class") or "")]
    assert [n["href"] for n in nodes] == [f"#phase-{p.phase}" for p in trace.phases]
    assert [n["class"] for n in nodes] == [f"node s-{p.status}" for p in trace.phases]
    assert svg.count('class="edge"') == len(trace.phases) - 1
    assert f'marker-end="url(#arrow-{which})"' in svg and f'<marker id="arrow-{which}"' in svg
    assert "xmlns" not in svg  # inline SVG needs no namespace URL


def test_pipeline_stays_legible_on_a_narrow_screen() -> None:
    """A phone cannot show rows of four boxes: scaled to its width, their 12 px labels would be
    about 4 px. A one-column drawing, no wider than a 320 px screen less the page's padding,
    replaces the wide one below 720 px; above, the wide one shrinks to at most 75 % and then scrolls."""
    from policyrun.render.view import build_view

    phases = build_view(tf.flagship())["phases"]
    narrow = pipeline_layout(phases, columns=1)
    assert narrow["width"] <= 320 - 2 * 14 and len({n["x"] for n in narrow["nodes"]}) == 1
    wide = pipeline_layout(phases)
    html = render_html(tf.flagship())
    css = html[html.index("<style>"):html.index("</style>")]
    assert ".pipeline-scroll { overflow-x: auto;" in css
    assert f"svg.pipeline.wide {{ width: 100%; max-width: {wide['width']}px; min-width: {wide['width'] * 3 // 4}px; }}" \
        in css
    assert "@media (max-width: 720px) { .pipeline-scroll.wide, .pipeline-note { display: none; } " \
           ".pipeline-scroll.narrow { display: block; } }" in css
    assert ".pipeline-scroll.narrow { display: none; }" in css
    assert f'viewBox="0 0 {narrow["width"]} {narrow["height"]}" width="{narrow["width"]}"' in _svg(html, "narrow")


def test_a_stop_condition_that_did_not_fire_is_not_shown_as_a_failure() -> None:
    """ARCHITECTURE_GATE of the sample has a stop condition that fired and one that did not; the one
    that did not (recorded UNSATISFIED) is muted, not a red ✗ above the check that decided."""
    trace = tf.flagship()
    quiet = [(p.phase, c.id) for p in trace.phases for c in p.stop_when
             if c.kind == "stop_when" and c.result == "UNSATISFIED" and c.outcome is None]
    assert quiet
    html = render_html(trace)
    for phase, check in quiet:
        section = html[html.index(f'id="phase-{phase}"'):]
        row = section[section.rindex("<tr", 0, section.index(f"<code>{check}</code>")):]
        row = row[:row.index("</tr>")]
        assert row.startswith('<tr class="r-DID_NOT_FIRE">') and "– did not fire" in row
        assert "UNSATISFIED</span>" not in row and "decisive" not in row
    css = html[html.index("<style>"):html.index("</style>")]
    assert ".r-DID_NOT_FIRE .rbadge { color: var(--muted); }" in css
    assert "✗ UNSATISFIED" in html  # a check that did not hold still shows as one


def test_provenance_shows_the_final_command_and_folds_the_others() -> None:
    trace = tf.flagship()
    prov = next(p for p in trace.provenance.values() if len(p.commands) > 1)
    html = render_html(trace)
    final, earlier = prov.commands[-1], prov.commands[:-1]
    assert f"<div>$ <code>{final}</code></div><details class=\"cmds\"><summary>{len(earlier)} earlier command" in html
    folded = html[html.index(f"<code>{final}</code></div><details"):]
    folded = folded[:folded.index("</details>")]
    assert all(f"<code>{c}</code>" in folded for c in earlier)
    # The provenance section does the same, without the prompt.
    section = html[html.index('<section id="provenance">'):]
    assert f"<div><code>{final}</code></div><details class=\"cmds\">" in section


def test_pipeline_layout_snakes_without_overlap() -> None:
    from policyrun.render.view import build_view

    layout = pipeline_layout(build_view(tf.flagship())["phases"], columns=4)
    boxes = {(n["x"], n["y"]) for n in layout["nodes"]}
    assert len(boxes) == 13
    xs = [n["x"] for n in layout["nodes"]]
    assert xs[:4] == sorted(xs[:4]) and xs[4:8] == sorted(xs[4:8], reverse=True)
    assert all(n["x"] + n["w"] <= layout["width"] and n["y"] + n["h"] <= layout["height"] for n in layout["nodes"])


def test_values_from_facts_are_escaped() -> None:
    trace = tf.generic()
    evil = "<script>alert(1)</script>"
    phases = [trace.phases[0], trace.phases[1].model_copy(update={"blocker": evil})]
    html = render_html(trace.model_copy(update={"phases": phases}))
    assert evil not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # only our own inline script


def test_long_values_are_cut_with_full_value_expandable() -> None:
    html = render_html(tf.flagship())
    assert '<details class="more">' in html and "(355 chars)" in html


def test_html_counts_and_verdict() -> None:
    html = render_html(tf.flagship())
    assert "4 PASS" in html and "6 SKIPPED" in html and "<strong>not_ready</strong>" in html


def test_rulebook_html_template_is_autoescaped(tmp_path: Path) -> None:
    tpl = tmp_path / "mine.html.j2"
    tpl.write_text("<p>{{ report.phases[1].blocker }}</p>{{ trace.mode }}")
    trace = tf.generic()
    phases = [trace.phases[0], trace.phases[1].model_copy(update={"blocker": "<b>x</b>"})]
    out = render_html(trace.model_copy(update={"phases": phases}), template=tpl)
    assert out == "<p>&lt;b&gt;x&lt;/b&gt;</p>release"
