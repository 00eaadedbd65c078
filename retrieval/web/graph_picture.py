"""A picture of part of the graph, drawn on the server as SVG: no
JavaScript library, nothing from a CDN.

`graph_svg(nodes, edges, focus=…)` lays the documents out deterministically — the focus at
the centre, the others on rings by their distance from it (one hop, two hops…), each ring
sorted (the first by title, the next beside its neighbours on the previous one) — and draws
every node as a link to its page and every edge as an arrow coloured by its kind, dashed when
it is inferred, with a legend of the kinds shown. Without a focus the nodes go on one ring
in the order given (a path stays in path order).

**Escaping.** The string returned is markup that a template includes with `|safe`. That is
safe only because every piece of it is built here with `django.utils.html.format_html` /
`escape`: titles, URLs, kinds and tiers are escaped where they are written, numbers are
formatted by us, and nothing a user wrote is ever interpolated raw
(tests/retrieval/web/test_graph_pages.py checks that a title `<script>` comes out as
`&lt;script&gt;`). Keep it so: any new piece of text goes through `format_html`.

Readable at a glance and on a phone: the SVG scales with its `viewBox` to the width it is
given. A page draws it twice, 640 wide and `NARROW` (380) wide, and lode.css shows the
narrow one on screens under 40rem, so its labels stay legible at 360 px without the page
ever scrolling sideways.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from retrieval.search.backlinks import HoodNode, Neighbourhood
from retrieval.trust import document_tier_labels, tier_label

# Edge kinds: colour and the legend's words. Inferred kinds are also dashed.
KIND_STYLE: dict[str, tuple[str, str]] = {
    "links_to": ("#2f6fd0", "links to"),
    "contains": ("#1f8a4c", "contains"),
    "annotates": ("#c07a00", "annotates"),
    "mentions": ("#8a4fd0", "mentions (inferred)"),
    "related": ("#c2407a", "related (inferred)"),
}
OTHER_COLOUR = "#6b7280"
NODE_FILL = {"note": "#dbe8fb", "external": "#f3e7cf", "source": "#dcefe2"}
DASH = "6 4"
NODE_RADIUS = 9
FOCUS_RADIUS = 13
LABEL_SIZE = 14  # px in the viewBox
LEGEND_SIZE = 13
LEGEND_ROW = 22
MAX_LABEL_CHARS = 26  # per line beside a node
MAX_CENTRED_CHARS = 18  # per line above or below a node: narrower, so neighbours keep room
LABEL_LINES = 2
LINE_HEIGHT = 15


@dataclass(frozen=True)
class PictureNode:
    id: int
    label: str
    url: str
    kind: str
    # The trust tier in the reader's words ("Your note", "Note by carol"): see
    # `retrieval.trust.tier_label` and `node_tier_labels`.
    tier_label: str


@dataclass(frozen=True)
class PictureEdge:
    source: int
    target: int
    kind: str
    inferred: bool


# Em widths of a sans-serif face (DejaVu Sans, the usual fallback), rounded up: a label is
# measured before the browser draws it, and an estimate too small lets it run off the picture.
_NARROW_CHARS = frozenset("iljtfrI.,:;'!|()[] ")
_WIDE_CHARS = frozenset("mwMW@%&")


def _text_width(text: str) -> float:
    """An estimate of `text`'s width at LABEL_SIZE, in the picture's units."""
    em = 0.0
    for char in text:
        if char in _NARROW_CHARS:
            em += 0.36
        elif char in _WIDE_CHARS:
            em += 0.98
        elif char.isupper() or char.isdigit() or not char.isascii():
            em += 0.72
        else:
            em += 0.62
    return em * LABEL_SIZE


def _fits(text: str, room: float, most: int) -> bool:
    return len(text) <= most and _text_width(text) <= room


def _truncate(text: str, room: float, most: int) -> str:
    """`text`, or as much of it as fits `room` (and `most` characters) followed by "…"."""
    text = " ".join(text.split())
    if _fits(text, room, most):
        return text
    end = min(len(text), most)
    while end > 1 and not _fits(text[: end - 1].rstrip() + "…", room, most):
        end -= 1
    return text[: max(end - 1, 1)].rstrip() + "…"


def _wrap(text: str, room: float, most: int, lines: int) -> list[str]:
    """`text` on at most `lines` lines, each within `room` units and `most` characters,
    broken at spaces (a word longer than a line is cut); what does not fit ends the last line
    with "…"."""
    words = text.split()
    room = max(room, _text_width("Abc…"))
    most = max(most, 4)
    out: list[str] = []
    current = ""
    i = 0
    while i < len(words):
        if len(out) == lines - 1:
            rest = " ".join(([current] if current else []) + words[i:])
            return [*out, _truncate(rest, room, most)]
        candidate = f"{current} {words[i]}" if current else words[i]
        if _fits(candidate, room, most):
            current = candidate
            i += 1
        elif current:
            out.append(current)
            current = ""
        else:  # one word longer than a line: cut it where it stops fitting
            cut = next(
                (n for n in range(len(words[i]) - 1, 0, -1) if _fits(words[i][:n], room, most)), 1
            )
            out.append(words[i][:cut])
            words[i] = words[i][cut:]
    if current:
        out.append(current)
    return out


def _class_safe(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", value.lower())[:32] or "other"


def node_tier_labels(viewer_id: int | None, nodes: Sequence[HoodNode]) -> dict[int, str]:
    """Each document node's trust tier in `viewer_id`'s words, by node id (one query): "Your
    note" only on the notes the viewer wrote."""
    labels = document_tier_labels(viewer_id, [n.id for n in nodes])
    return {n.id: labels.get(n.id) or tier_label(n.tier, mine=False) for n in nodes}


def _rings(
    nodes: Sequence[PictureNode], edges: Sequence[PictureEdge], focus: int | None
) -> tuple[list[list[int]], dict[int, set[int]]]:
    """The node ids ring by ring, and who is next to whom (edges read both ways): ring 0 is
    the focus; ring k the nodes k hops away; nodes not reached go on one ring further out.
    Each ring is sorted by label and id (`_positions` then places a later ring beside the
    nodes it hangs from). Without a focus: one ring, in the order given."""
    ids = [n.id for n in nodes]
    around: dict[int, set[int]] = defaultdict(set)
    for edge in edges:
        if edge.source != edge.target:
            around[edge.source].add(edge.target)
            around[edge.target].add(edge.source)
    if focus is None or focus not in ids:
        return ([[], ids] if len(ids) > 1 else [ids]), around
    label = {n.id: (" ".join(n.label.split()).casefold(), n.id) for n in nodes}
    distance = {focus: 0}
    queue = deque([focus])
    while queue:
        current = queue.popleft()
        for other in sorted(around[current]):
            if other in label and other not in distance:
                distance[other] = distance[current] + 1
                queue.append(other)
    far = max(distance.values()) + 1
    for node_id in ids:
        distance.setdefault(node_id, far)
    rings = [
        sorted((i for i in ids if distance[i] == k), key=label.__getitem__) for k in range(far + 1)
    ]
    return [ring for k, ring in enumerate(rings) if ring or k == 0], around


def _angles(ring: list[int], desired: dict[int, float]) -> dict[int, float]:
    """Angles for the nodes of a ring: evenly spread when none hangs from an inner node (or
    they are too many to keep near their anchors), else each as near its `desired` angle
    (beside the inner nodes it is linked to) as a minimum gap allows, in order."""
    n = len(ring)
    even = {node_id: -math.pi / 2 + 2 * math.pi * i / max(n, 1) for i, node_id in enumerate(ring)}
    if not desired or n > 12:
        return even
    gap = 2 * math.pi / 12
    wanted = sorted(ring, key=lambda i: (desired.get(i, math.pi), ring.index(i)))
    placed: dict[int, float] = {}
    previous = None
    for node_id in wanted:
        angle = desired.get(node_id, math.pi)
        if previous is not None:
            angle = max(angle, previous + gap)
        placed[node_id] = previous = angle
    first = placed[wanted[0]]
    if previous is not None and previous > first + 2 * math.pi - gap:
        return even
    return placed


def _positions(
    rings: list[list[int]], around: dict[int, set[int]], width: int, area: int
) -> dict[int, tuple[float, float, int]]:
    """(x, y, ring) of every node: ring 0 at the centre, ring k on an ellipse k/R of the
    way out; a later ring's nodes beside the inner nodes they link to; a crowded ring
    staggers every other node inwards so labels overlap less."""
    cx, cy = width / 2, area / 2
    count = len(rings) - 1
    max_rx = max(width / 2 - 110, 40)
    max_ry = max(area / 2 - 34, 30)
    placed: dict[int, tuple[float, float, int]] = {}
    angle_of: dict[int, float] = {}
    for k, ring in enumerate(rings):
        if k == 0:
            for node_id in ring:
                placed[node_id] = (cx, cy, 0)
            continue
        desired: dict[int, float] = {}
        if k > 1:
            for node_id in ring:
                inner = [angle_of[o] for o in around[node_id] if o in angle_of]
                if inner:
                    desired[node_id] = math.atan2(
                        sum(math.sin(a) for a in inner), sum(math.cos(a) for a in inner)
                    )
        angles = _angles(ring, desired)
        for index, node_id in enumerate(ring):
            angle = angles[node_id]
            angle_of[node_id] = angle
            scale = (k + 0.4) / (count + 0.4)  # inner rings a little further out than k/R
            if len(ring) > 10 and index % 2:
                scale *= 0.8
            placed[node_id] = (
                round(cx + max_rx * scale * math.cos(angle), 1),
                round(cy + max_ry * scale * math.sin(angle), 1),
                k,
            )
    return placed


def _legend(kinds: list[str], width: int, top: float, prefix: str) -> tuple[list[SafeString], int]:
    """The legend's pieces (a sample stroke and the words for each kind shown) and how many
    rows it takes."""
    parts: list[SafeString] = []
    x, row = 8.0, 0
    for kind in kinds:
        colour, words = KIND_STYLE.get(kind, (OTHER_COLOUR, kind.replace("_", " ")))
        item = 30 + len(words) * LEGEND_SIZE * 0.55 + 18
        if x + item > width - 4 and x > 8:
            x, row = 8.0, row + 1
        y = top + row * LEGEND_ROW + LEGEND_ROW / 2
        dash = (
            format_html(' stroke-dasharray="{}"', DASH) if kind in ("mentions", "related") else ""
        )
        parts.append(
            format_html(
                '<g class="gp-legend-item gp-kind-{}"><line x1="{}" y1="{}" x2="{}" y2="{}" '
                'stroke="{}" stroke-width="2"{} marker-end="url(#{}-{})"/>'
                '<text x="{}" y="{}" class="gp-legend-text" font-size="{}">{}</text></g>',
                _class_safe(kind),
                round(x, 1),
                round(y, 1),
                round(x + 24, 1),
                round(y, 1),
                colour,
                dash,
                prefix,
                _class_safe(kind),
                round(x + 30, 1),
                round(y + 4, 1),
                LEGEND_SIZE,
                words,
            )
        )
        x += item
    return parts, row + 1 if kinds else 0


def graph_svg(
    nodes: list[PictureNode],
    edges: list[PictureEdge],
    *,
    focus: int | None = None,
    width: int = 640,
    height: int = 420,
) -> str:
    """SVG markup of `nodes` and `edges` (edges whose ends are not both among the nodes are
    left out). Safe to include with `|safe`: every user string in it is escaped here."""
    width, height = max(int(width), 200), max(int(height), 160)
    by_id = {n.id: n for n in nodes}
    edges = [e for e in edges if e.source in by_id and e.target in by_id and e.source != e.target]
    kinds = [k for k in KIND_STYLE if any(e.kind == k for e in edges)]
    kinds += sorted({e.kind for e in edges} - set(KIND_STYLE))
    digest = hashlib.sha1(
        repr(
            (
                sorted(by_id),
                sorted((e.source, e.target, e.kind) for e in edges),
                focus,
                width,
                height,
            )
        ).encode()
    ).hexdigest()[:8]
    # Marker ids unique to this picture (and size: a page may hold two layouts of one graph,
    # and `url(#id)` must not resolve into the hidden one).
    prefix = f"gp{digest}"

    # The legend's height first: the drawing gets what is left.
    _, legend_rows = _legend(kinds, width, 0, prefix)
    area = height - legend_rows * LEGEND_ROW - (8 if legend_rows else 0)
    legend, _ = _legend(kinds, width, area + 4, prefix)
    rings, around = _rings(nodes, edges, focus)
    placed = _positions(rings, around, width, area)
    cx = width / 2

    markers = [
        format_html(
            '<marker id="{}-{}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            'fill="{}"/></marker>',
            prefix,
            _class_safe(kind),
            KIND_STYLE.get(kind, (OTHER_COLOUR, ""))[0],
        )
        for kind in kinds
    ]

    # Several edges between one pair of documents: bent apart so each stays visible.
    pairs: dict[tuple[int, int], list[PictureEdge]] = defaultdict(list)
    for edge in sorted(edges, key=lambda e: (e.source, e.target, e.kind)):
        pairs[(min(edge.source, edge.target), max(edge.source, edge.target))].append(edge)
    lines: list[SafeString] = []
    for (low, _high), group in sorted(pairs.items()):
        for index, edge in enumerate(group):
            lines.append(_edge_path(edge, index, len(group), low, placed, focus, prefix))

    labels = _labels(by_id, placed, focus, cx, width, area)
    drawn: list[SafeString] = []
    for node_id, (x, y, _ring) in sorted(placed.items(), key=lambda item: (item[1][2], item[0])):
        drawn.append(_node(by_id[node_id], x, y, node_id == focus, labels[node_id], width))

    count_nodes, count_edges = len(placed), len(edges)
    summary = format_html(
        "{} document{} and {} link{}{}",
        count_nodes,
        "" if count_nodes == 1 else "s",
        count_edges,
        "" if count_edges == 1 else "s",
        format_html(" around “{}”", by_id[focus].label) if focus in by_id else "",
    )
    return mark_safe(  # every piece below was built with format_html (escaped)
        format_html(
            '<svg xmlns="http://www.w3.org/2000/svg" class="graph-picture" viewBox="0 0 {} {}" '
            'role="group" aria-label="{}"><title>{}</title><defs>{}</defs>'
            '<g class="gp-edges">{}</g><g class="gp-nodes">{}</g>'
            '<g class="gp-legend">{}</g></svg>',
            width,
            height,
            summary,
            summary,
            mark_safe("".join(markers)),
            mark_safe("".join(lines)),
            mark_safe("".join(drawn)),
            mark_safe("".join(legend)),
        )
    )


def _edge_path(
    edge: PictureEdge,
    index: int,
    size: int,
    low: int,
    placed: dict[int, tuple[float, float, int]],
    focus: int | None,
    prefix: str,
) -> SafeString:
    x1, y1, _ = placed[edge.source]
    x2, y2, _ = placed[edge.target]
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    # Bend: edges of one pair spread either side of the straight line; the perpendicular is
    # taken from the lower id to the higher, so a→b and b→a bend apart.
    sign = 1 if edge.source == low else -1
    bend = (index - (size - 1) / 2) * 18 * sign
    if size == 1:
        bend = 0
    mx, my = (x1 + x2) / 2 - dy / length * bend, (y1 + y2) / 2 + dx / length * bend
    r1 = FOCUS_RADIUS if edge.source == focus else NODE_RADIUS
    r2 = FOCUS_RADIUS if edge.target == focus else NODE_RADIUS
    # Start and end on the circles' edges, towards the control point.
    sx, sy = _towards(x1, y1, mx, my, r1 + 1)
    ex, ey = _towards(x2, y2, mx, my, r2 + 2)
    colour = KIND_STYLE.get(edge.kind, (OTHER_COLOUR, ""))[0]
    dash = format_html(' stroke-dasharray="{}"', DASH) if edge.inferred else ""
    return format_html(
        '<path class="gp-edge gp-kind-{}{}" d="M{} {} Q{} {} {} {}" fill="none" stroke="{}" '
        'stroke-width="1.8"{} marker-end="url(#{}-{})"/>',
        _class_safe(edge.kind),
        " gp-inferred" if edge.inferred else "",
        round(sx, 1),
        round(sy, 1),
        round(mx, 1),
        round(my, 1),
        round(ex, 1),
        round(ey, 1),
        colour,
        dash,
        prefix,
        _class_safe(edge.kind),
    )


def _towards(x: float, y: float, tx: float, ty: float, distance: float) -> tuple[float, float]:
    dx, dy = tx - x, ty - y
    length = math.hypot(dx, dy) or 1.0
    return x + dx / length * distance, y + dy / length * distance


@dataclass(frozen=True)
class _Label:
    anchor: str  # "start" | "middle" | "end"
    x: float
    y: float  # the baseline of the first line
    lines: tuple[str, ...]

    def box(self) -> tuple[float, float, float, float]:
        """An estimate of its extent (left, top, right, bottom) in the viewBox."""
        wide = max((_text_width(line) for line in self.lines), default=0)
        left = {"start": self.x, "middle": self.x - wide / 2, "end": self.x - wide}[self.anchor]
        top = self.y - LABEL_SIZE
        return left, top, left + wide, top + LABEL_SIZE + (len(self.lines) - 1) * LINE_HEIGHT + 4


def _label_choices(
    node: PictureNode, x: float, y: float, is_focus: bool, cx: float, width: int, area: int
) -> list[_Label]:
    """Where a node's label may go, best first: beside a node left or right of the centre,
    below (or, in the top half, above) one near the vertical middle; two lines, then one; the
    other placements after. Each cut to the room it has."""
    radius = FOCUS_RADIUS if is_focus else NODE_RADIUS
    label = node.label

    def beside(side: str, lines: int) -> _Label:
        if side == "start":
            lx = x + radius + 4
            room = width - lx - 4
        else:
            lx = x - radius - 4
            room = lx - 4
        cut = _wrap(label, room, MAX_LABEL_CHARS, lines)
        return _Label(side, lx, y + 5 - (len(cut) - 1) * LINE_HEIGHT / 2, tuple(cut))

    def centred(above: bool, lines: int) -> _Label:
        cut = _wrap(label, min(x, width - x) * 2 - 8, MAX_CENTRED_CHARS, lines)
        lift = radius + 6 + (len(cut) - 1) * LINE_HEIGHT
        ly = y - lift if above else y + radius + LABEL_SIZE + 2
        return _Label("middle", x, ly, tuple(cut))

    # Near the middle, relative to the picture's width: a phone's narrow layout keeps its
    # side labels beside their nodes.
    middle = is_focus or abs(x - cx) < 60 * width / 640
    above = y < area / 2 and not is_focus
    side = "start" if x >= cx else "end"
    other = "end" if side == "start" else "start"
    if middle:
        order = [(centred, above), (centred, not above), (beside, side), (beside, other)]
    else:
        order = [(beside, side), (centred, above), (centred, not above)]
    return [place(where, lines) for lines in (LABEL_LINES, 1) for place, where in order]


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    wide = min(a[2], b[2]) - max(a[0], b[0])
    high = min(a[3], b[3]) - max(a[1], b[1])
    return wide * high if wide > 0 and high > 0 else 0.0


def _outside(box: tuple[float, float, float, float], width: int, area: int) -> float:
    """How much of `box` lies outside the drawing (a label cut off at the picture's edge)."""
    left, top, right, bottom = box
    whole = max(right - left, 0) * max(bottom - top, 0)
    return whole - _overlap(box, (0, 0, width, area))


def _labels(
    by_id: dict[int, PictureNode],
    placed: dict[int, tuple[float, float, int]],
    focus: int | None,
    cx: float,
    width: int,
    area: int,
) -> dict[int, _Label]:
    """Every node's label, placed so that labels do not cover one another or another
    node's circle, nor run off the picture: in drawing order, each takes its first choice
    that overlaps nothing placed before it, else the choice that overlaps least."""
    taken: list[tuple[float, float, float, float]] = [
        (x - NODE_RADIUS, y - NODE_RADIUS, x + NODE_RADIUS, y + NODE_RADIUS)
        for x, y, _ in placed.values()
    ]
    labels: dict[int, _Label] = {}
    for node_id, (x, y, _ring) in sorted(placed.items(), key=lambda item: (item[1][2], item[0])):
        own = (x - NODE_RADIUS, y - NODE_RADIUS, x + NODE_RADIUS, y + NODE_RADIUS)
        others = [box for box in taken if box != own]
        choices = _label_choices(by_id[node_id], x, y, node_id == focus, cx, width, area)
        scored = [
            (
                sum(_overlap(choice.box(), box) for box in others)
                + 4 * _outside(choice.box(), width, area),
                index,
                choice,
            )
            for index, choice in enumerate(choices)
        ]
        _cost, _index, best = min(scored, key=lambda item: (item[0], item[1]))
        labels[node_id] = best
        taken.append(best.box())
    return labels


def _node(
    node: PictureNode, x: float, y: float, is_focus: bool, label: _Label, width: int
) -> SafeString:
    """A node: its circle and label inside a link to its page. The whole title shows on
    hover and keyboard focus (lode.css `.gp-full`), and is the link's tooltip (`<title>`)."""
    radius = FOCUS_RADIUS if is_focus else NODE_RADIUS
    tspans = mark_safe(
        "".join(
            format_html(
                '<tspan x="{}" dy="{}">{}</tspan>',
                round(label.x, 1),
                0 if index == 0 else LINE_HEIGHT,
                line,
            )
            for index, line in enumerate(label.lines)
        )
    )
    full = " ".join(node.label.split())
    # The whole title on one line, kept inside the picture as far as it fits.
    full_width = _text_width(full)
    fx = min(max(x - full_width / 2, 4), max(width - 4 - full_width, 4))
    kind = _class_safe(node.kind)
    return format_html(
        '<a href="{}" class="gp-node gp-node-{}{}"><title>{} ({}, {})</title>'
        '<circle cx="{}" cy="{}" r="{}" fill="{}" stroke="#4a5560" stroke-width="{}"/>'
        '<text x="{}" y="{}" text-anchor="{}" font-size="{}" class="gp-label">{}</text>'
        '<text x="{}" y="{}" text-anchor="start" font-size="{}" class="gp-full">{}</text></a>',
        node.url,
        kind,
        " gp-focus" if is_focus else "",
        node.label,
        node.kind,
        node.tier_label,
        x,
        y,
        radius,
        NODE_FILL.get(node.kind, "#e5e7eb"),
        3 if is_focus else 1.5,
        round(label.x, 1),
        round(label.y, 1),
        label.anchor,
        LABEL_SIZE,
        tspans,
        round(fx, 1),
        round(label.y, 1),
        LABEL_SIZE,
        full,
    )


# A phone's layout: narrower, so the same 14-unit labels are ~11 px on a 360 px screen.
NARROW = {"width": 380, "height": 460}


def hood_picture_nodes(hood: Neighbourhood, *, viewer_id: int | None) -> list[PictureNode]:
    """The neighbourhood's documents as picture nodes, their tiers in `viewer_id`'s words."""
    labels = node_tier_labels(viewer_id, hood.nodes)
    return [PictureNode(n.id, n.title, n.url, n.kind, labels[n.id]) for n in hood.nodes]


def neighbourhood_svg(
    hood: Neighbourhood, *, viewer_id: int | None, width: int = 640, height: int = 420
) -> str:
    """The picture of a document's neighbourhood (`retrieval.search.backlinks.neighbourhood`)
    as `viewer_id` sees it."""
    nodes = hood_picture_nodes(hood, viewer_id=viewer_id)
    edges = [PictureEdge(e.source, e.target, e.kind, e.inferred) for e in hood.edges]
    if len(nodes) <= 4:  # a few documents: a lower picture, not an empty frame
        height = min(height, 280)
    return graph_svg(nodes, edges, focus=hood.focus, width=width, height=height)
