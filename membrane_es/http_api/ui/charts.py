"""The geometry of the inspector's charts, drawn as SVG by its templates (no script runs in
the page; everything is computed here, on the server).

Each chart is also given as text beside it (a table, or the figure on each bar), so it reads
without colour and without the picture.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from membrane_es.http_api.ui.reads import Neighbourhood

# Node shapes by memory type, with the letter drawn inside them: told apart without colour.
TYPE_MARK = {
    "episodic": ("square", "E"),
    "working": ("square", "W"),
    "semantic": ("circle", "S"),
    "competence": ("diamond", "C"),
    "plan_graph": ("diamond", "P"),
    "entity": ("circle", "N"),
}


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: float
    text: str
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    width: int
    height: int
    bars: list[Bar]
    baseline: float
    rows: list[tuple[str, str]]  # the figures as text: (label, value), zeros left out


def column_chart(
    title: str,
    values: Sequence[tuple[str, float]],
    *,
    width: int = 640,
    height: int = 200,
    label_every: int = 1,
    names: Sequence[str] = (),
) -> Chart:
    """Vertical bars, one per (label, value), scaled to the largest value; every
    ``label_every``-th label is drawn under its bar."""
    top, bottom, side = 18.0, 34.0, 8.0
    usable = height - top - bottom
    peak = max((v for _, v in values), default=0.0) or 1.0
    slot = (width - 2 * side) / max(len(values), 1)
    bars = []
    for index, (name, value) in enumerate(values):
        tall = usable * value / peak
        shown = name if index % label_every == 0 else ""
        bars.append(
            Bar(
                label=shown,
                value=value,
                text=_figure(value),
                x=side + index * slot + slot * 0.15,
                y=top + usable - tall,
                width=slot * 0.7,
                height=tall,
            )
        )
    full = list(names) or [name for name, _ in values]
    rows = [(full[i], _figure(v)) for i, (_, v) in enumerate(values) if v]
    return Chart(title, width, height, bars, top + usable, rows)


def share_bars(values: Sequence[tuple[str, float]], *, width: int = 240) -> Chart:
    """Horizontal bars on a 0..1 scale, one row each (a search hit's explanation)."""
    row = 16.0
    bars = [
        Bar(name, value, f"{value:.3f}", 0.0, index * row + 2, width * min(max(value, 0), 1), 12)
        for index, (name, value) in enumerate(values)
    ]
    return Chart("", width, int(row * len(values)) + 2, bars, 0.0, [])


def share_svg(chart: Chart, title_id: str) -> Markup:
    """``chart`` (from :func:`share_bars`) as inline SVG: a named row per part, its bar on a
    0..1 track, and the figure it added. Written here rather than in a template: a results
    page draws twenty of these, and escaping each small value costs more than the rest of the
    page. Nothing here needs escaping: the names are the fixed ones of :func:`shares`, the
    figures numbers, and ``title_id`` the page's own."""
    width = chart.width + 120
    rows = []
    for bar in chart.bars:
        rows.append(
            f'<text x="0" y="{bar.y + 10:.0f}" class="name">{bar.label}</text>'
            f'<rect x="62" y="{bar.y:.0f}" width="{chart.width}" height="{bar.height:.0f}" '
            f'class="track"/><rect x="62" y="{bar.y:.0f}" width="{bar.width:.1f}" '
            f'height="{bar.height:.0f}" class="bar"/><text x="{chart.width + 68}" '
            f'y="{bar.y + 10:.0f}" class="figure">+{bar.text}</text>'
        )
    return Markup(
        f'<svg role="img" aria-labelledby="{title_id}" width="{width}" '
        f'height="{chart.height}" viewBox="0 0 {width} {chart.height}" class="shares">'
        f'<title id="{title_id}">What the score is made of</title>{"".join(rows)}</svg>'
    )


def _figure(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


@dataclass(frozen=True, slots=True)
class Point:
    record_id: str
    x: float
    y: float
    shape: str
    mark: str
    hop: int
    label: str
    redacted: bool


@dataclass(frozen=True, slots=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    predicate: str
    mx: float
    my: float


@dataclass(frozen=True, slots=True)
class Drawing:
    width: int
    height: int
    points: list[Point]
    lines: list[Line]


def ring_layout(graph: Neighbourhood, *, size: int = 640) -> Drawing:
    """The root in the middle, each hop on a ring around it; nodes of one ring spread evenly
    in the order they were reached (deterministic for the same graph)."""
    centre = size / 2
    rings: dict[int, list[str]] = {}
    for record_id, node in graph.nodes.items():
        rings.setdefault(node.hop, []).append(record_id)
    radius_step = (centre - 100) / max(max(rings, default=0), 1)  # labels fit inside
    where: dict[str, tuple[float, float]] = {}
    points = []
    for hop, members in sorted(rings.items()):
        for index, record_id in enumerate(members):
            angle = 2 * math.pi * index / len(members) - math.pi / 2 + hop * 0.4
            x = centre + hop * radius_step * math.cos(angle)
            y = centre + hop * radius_step * math.sin(angle)
            where[record_id] = (x, y)
            node = graph.nodes[record_id]
            shape, mark = TYPE_MARK.get(node.record.type.value, ("circle", "?"))
            text = "redacted" if node.redacted else (node.label or "(erased)")
            points.append(Point(record_id, x, y, shape, mark, hop, _short(text), node.redacted))
    # one line per pair of records, naming every predicate between them
    pairs: dict[tuple[str, str], list[str]] = {}
    for edge in graph.edges:
        if edge.source in where and edge.target in where:
            key = (min(edge.source, edge.target), max(edge.source, edge.target))
            pairs.setdefault(key, []).append(edge.predicate)
    lines = []
    for (one, other), predicates in pairs.items():
        (x1, y1), (x2, y2) = where[one], where[other]
        text = ", ".join(dict.fromkeys(predicates))
        lines.append(Line(x1, y1, x2, y2, text, (x1 + x2) / 2, (y1 + y2) / 2))
    return Drawing(size, size, points, lines)


def _short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
