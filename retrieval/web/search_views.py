"""The search page. `GET /search?q=...&mode=...&rerank=...` is the shareable URL and renders
the whole page; htmx requests get only the results partial.

Shareable searches: the URL carries everything that decides the results —
the query with its filters (filters live inside `q`), the mode and the reranker — so opening
it in another session of a user who may see the same documents reproduces the same hits in
the same order. The page offers that URL with every parameter spelled out (defaults made
explicit, so a later change of default does not change what a shared link shows), built
server-side so it works without JavaScript, and htmx pushes the same URL into the address bar.

Graph expansion: `follow=1` (the *Follow links* box) follows links from the top
results and adds the linked passages that best match, each marked "via link from X";
`follow=0` never does; without it the graph discipline rule decides. The page says whether
links were followed and which rule decided.

Weaker matches: meaning-only hits below the similarity floor are left out
unless `weaker=1` is in the URL (the "Show weaker matches" link sets it; shared links keep it),
and a search that matches nothing says so in words.

A calm default view: each hit shows its title, where it lives, its age and
its text as a person reads it (`readable_segments`: no "##", fences, "**" or table pipes, the
highlighted characters still exactly the stored ones). Scores, ranks, offsets, the mode and
the reranker are shown only with `adv=1` in the URL (the "Advanced" link toggles it, and the
shared link keeps it, so a shared link reproduces the view). An empty library (no notes, no
sources) gets a first screen inviting the first note, source and question.

Grouped by note: the ranking is kept, but a note's further passages fold under its best one
("3 more in this note", a <details> that opens without JavaScript), so a page shows about
`PAGE_NOTES` notes however long one of them is. A hit with no highlighted word says why it
was found (by meaning, or by its title or headings). A query of filters only (`tag:ops`)
lists the documents they keep, newest first, a page at a time (`page=N`). When nothing
matches the page says so and what to try, and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.timesince import timesince
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from externals.models import SourceItem
from externals.selectors import externals_for_user, sources_for_user
from lode_site.errors import no_access
from lode_site.htmx import HtmxHttpRequest
from lode_site.ids import parse_id
from notes.models import Document, TrustTier
from notes.selectors import notes_for_user

# The one Markdown-to-readable-text rule and heading label (the answer page's quotes use
# them too): reused, not copied, so search hits and quotes read the same.
from retrieval.answer.display import heading_label, readable_text
from retrieval.eligibility import NoAccess, audience_for
from retrieval.highlight import Segment
from retrieval.index.link_parsing import wiki_links_as_text
from retrieval.links import document_url, search_path
from retrieval.search import listing
from retrieval.search.grouping import PASSAGES_PER_GROUP, group_by_document
from retrieval.search.listing import (
    EXCERPT_CHARS,
    DocumentList,
    filters_only_query,
    list_documents,
    tag_names,
)
from retrieval.search.pipeline import DEFAULT_MODE, MODES, Hit, SearchResult, search
from retrieval.search.rerank import RERANK_CHOICES
from retrieval.trust import document_tier_labels, tier_label
from spaces.context import read_member_spaces
from spaces.current import current_space_id
from spaces.models import Space

TRUE_VALUES = ("1", "true", "on", "yes")
# Notes (documents) a page of results shows, each with its further passages folded under it.
PAGE_NOTES = 10


@dataclass(frozen=True)
class ShownHit:
    """A hit as the calm view shows it: the pipeline's hit (its ids, scores and offsets for
    the Advanced view) plus its text made readable and where its document lives."""

    hit: Hit
    segments: list[Segment]
    context_text: str  # readable; "" when there is no more context than the passage
    where: str
    # The headings above the passage, without those that only repeat the title (as the
    # answer page labels a quote).
    headings: tuple[str, ...]
    age: str
    # The trust tier in the reader's words ("Your note", "Note by carol", "External
    # snapshot"); the calm view shows it as a badge on every hit but the reader's own notes.
    tier: str = ""
    tier_badge: bool = True
    # Why a hit with no highlighted word was found ("" when words are highlighted, or a
    # label already says it: a weaker match, a passage reached by a link).
    found_by: str = ""

    @property
    def opens_with_heading(self) -> bool:
        """Whether the shown text starts with its nearest heading (a folded passage then
        needs no separate heading line)."""
        text = "".join(segment.text for segment in self.segments).lstrip()
        return bool(self.headings) and text.startswith(self.headings[-1])


@dataclass(frozen=True)
class ShownGroup:
    """One document's hits as the page shows them: its best passage, then the rest folded
    under it."""

    best: ShownHit
    more: list[ShownHit]


@dataclass(frozen=True)
class ListedDocument:
    """A document a filter-only query keeps, as its list shows it."""

    document: Document
    url: str
    where: str
    age: str
    excerpt: str
    tags: list[str]


def _flag(request: HtmxHttpRequest, name: str) -> bool:
    return request.GET.get(name, "").lower() in TRUE_VALUES


def chosen_space(request: HtmxHttpRequest) -> tuple[int | None, str]:
    """The space a search covers, and how the URL spells it: `space=all` (every space the
    user belongs to), `space=<id>` (one of them), or no parameter (the space chosen in the
    header, else all). Raises `NoAccess` for a value naming no space the user is in."""
    raw = request.GET.get("space", "").strip()
    if raw == "all":
        return None, "all"
    if not raw:
        current = current_space_id(request)
        return current, str(current) if current is not None else "all"
    space_id = parse_id(raw)
    if space_id is None:
        raise NoAccess(raw)
    return space_id, str(space_id)


def share_audience(user_id: int, space_id: int | None) -> str:
    """Who a search link opens the same results for, in words."""
    if space_id is None:
        return (
            "This search covers all your spaces: a colleague who opens the link sees results "
            "from the spaces they belong to, not yours. Choose one space to share the same "
            "results."
        )
    space = Space.objects.get(pk=space_id)
    if space.is_personal:
        return "Only you can open this: it searches your personal space."
    others = space.memberships.exclude(user_id=user_id).count()
    return (
        f"Members of {space.name} ({others} other{'s' if others != 1 else ''}) can open this "
        "link and see the same results in the same order."
    )


@require_GET
def search_page(request: HtmxHttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    mode = request.GET.get("mode") or DEFAULT_MODE
    rerank = request.GET.get("rerank") or settings.LODE_RERANK
    weaker = _flag(request, "weaker")
    advanced = _flag(request, "adv")
    follow_links = follow_choice(request.GET.get("follow", ""))
    try:
        space_id, space = chosen_space(request)
        audience = audience_for(request.user.pk, space_id=space_id)
    except NoAccess:
        return no_access(request)
    spaces = read_member_spaces(request)
    space_names = _space_names(spaces)
    filters_only = filters_only_query(query) if query.strip() else None
    listing = (
        list_documents(filters_only, audience=audience, page=page_number(request))
        if filters_only is not None
        else None
    )
    result = (
        search(
            user=request.user,
            audience=audience,
            query=query,
            mode=mode,
            rerank=rerank,
            # Enough passages that the notes after a long one still fill the page.
            limit=PAGE_NOTES * PASSAGES_PER_GROUP,
            show_weaker=weaker,
            follow_links=follow_links,
        )
        if query.strip() and listing is None
        else None
    )
    share_path = with_follow(
        search_path(
            query=query, mode=mode, rerank=rerank, weaker=weaker, advanced=advanced, space=space
        ),
        follow_links,
    )
    groups = (
        shown_groups(result.hits, space_names=space_names, viewer_id=request.user.pk)
        if result is not None
        else []
    )
    template = "search/search.html#results" if request.htmx else "search/search.html"
    response = render(
        request,
        template,
        {
            "q": query,
            "mode": mode,
            "rerank": rerank,
            "modes": MODES,
            "rerank_choices": RERANK_CHOICES,
            "result": result,
            "groups": groups,
            "passages_shown": sum(1 + len(group.more) for group in groups),
            "listing": listing,
            "listed": listed_documents(listing, space_names=space_names) if listing else [],
            "page_paths": _page_paths(share_path, listing) if listing else {},
            "weaker": weaker,
            "advanced": advanced,
            "follow_links": follow_links,
            # The same view with the Advanced details shown or hidden (the toggle).
            "advanced_path": with_follow(
                search_path(
                    query=query,
                    mode=mode,
                    rerank=rerank,
                    weaker=weaker,
                    advanced=not advanced,
                    space=space,
                ),
                follow_links,
            ),
            # The same search with weaker matches shown, and without them.
            "weaker_path": with_follow(
                search_path(
                    query=query,
                    mode=mode,
                    rerank=rerank,
                    weaker=True,
                    advanced=advanced,
                    space=space,
                ),
                follow_links,
            ),
            "stronger_path": with_follow(
                search_path(query=query, mode=mode, rerank=rerank, advanced=advanced, space=space),
                follow_links,
            ),
            # The words of the query without its filters, for "search without the filters".
            "unfiltered_path": _unfiltered_path(result, mode=mode, rerank=rerank, space=space),
            "share_url": request.build_absolute_uri(share_path),
            "share_audience": share_audience(request.user.pk, space_id),
            "space": space,
            "spaces": spaces,
            # Carried on each "Open evidence" link, so its "back to results" returns here.
            "search_params": share_path.partition("?")[2],
            # Only asked when there is no query: the first screen of an empty library.
            "empty_library": result is None and listing is None and library_is_empty(request.user),
        },
    )
    if request.htmx:
        # The canonical URL (all parameters, defaults explicit) rather than whatever the
        # form happened to submit, so the address bar always holds a shareable link.
        push_url(response, _with_page(share_path, listing.page) if listing else share_path)
    return response


def page_number(request: HtmxHttpRequest) -> int:
    """The `page` parameter of a filter-only listing (1 when absent or not a number; the
    listing clamps it)."""
    raw = request.GET.get("page", "").strip()
    if not raw.isascii() or not raw.isdigit():
        return 1
    return int(raw) if len(raw) <= 6 else listing.MAX_PAGE


def _with_page(path: str, page: int) -> str:
    return path if page <= 1 else f"{path}&page={page}"


def _page_paths(share_path: str, listing: DocumentList) -> dict[str, str]:
    """The links to the newer and older pages of a listing ("" when there is none)."""
    return {
        "newer": _with_page(share_path, listing.page - 1) if listing.page > 1 else "",
        "older": _with_page(share_path, listing.page + 1) if listing.has_next else "",
    }


def _unfiltered_path(result: SearchResult | None, *, mode: str, rerank: str, space: str) -> str:
    """The same words searched without the query's filters ("" when it has none)."""
    parsed = result.parsed if result is not None else None
    if parsed is None or not parsed.filters:
        return ""
    return search_path(query=parsed.text, mode=mode, rerank=rerank, space=space)


def follow_choice(raw: str) -> bool | None:
    """The *Follow links* choice of a URL: `follow=1` always follows links from
    the top results, `follow=0` never does, anything else (the box unticked: no parameter)
    lets the graph discipline rule decide."""
    value = raw.strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in ("0", "false", "off", "no"):
        return False
    return None


def with_follow(path: str, follow_links: bool | None) -> str:
    """`path` with the *Follow links* choice spelled out when the user made one (absent: the
    rule decides, so a shared link keeps deciding by the rule)."""
    if follow_links is None:
        return path
    return f"{path}{'&' if '?' in path else '?'}follow={1 if follow_links else 0}"


def library_is_empty(user: AbstractBaseUser) -> bool:
    """Whether the user has nothing to search yet: no live note, no source, no external."""
    return not (
        notes_for_user(user).exists()
        or sources_for_user(user).exists()
        or externals_for_user(user).filter(deleted_at__isnull=True).exists()
    )


def _space_names(spaces: Sequence[Space]) -> dict[int, str]:
    """Space names to show beside each hit: only when the user has more than one space."""
    if len(spaces) < 2:
        return {}
    return {
        space.pk: "your personal space" if space.is_personal else space.name for space in spaces
    }


def shown_hits(
    hits: Sequence[Hit],
    *,
    space_names: dict[int, str] | None = None,
    viewer_id: int | None = None,
) -> list[ShownHit]:
    """The hits as the calm view shows them; one query for the sources of the externals and
    one for the trust tiers in `viewer_id`'s words. With `space_names`, each hit also says
    which space it is in."""
    where = _where_externals_live([hit.passage.document for hit in hits])
    names = space_names or {}
    tiers = document_tier_labels(viewer_id, {hit.passage.document_id for hit in hits})

    def tier_of(hit: Hit) -> str:
        document = hit.passage.document
        return tiers.get(document.pk) or tier_label(document.trust_tier, mine=False)

    return [
        ShownHit(
            hit=hit,
            segments=readable_segments(hit.display_segments),
            context_text=wiki_links_as_text(readable_text(hit.context_text, at_line_start=True))
            if shows_context(hit)
            else "",
            where=_in_space(
                where.get(hit.passage.document_id) or _where_document_lives(hit.passage.document),
                names.get(hit.passage.document.space_id, ""),
            ),
            headings=heading_label(hit.passage, hit.passage.document.title),
            age=age_words(hit.passage.version.created_at),
            tier=tier_of(hit),
            tier_badge=not (
                hit.passage.document.trust_tier == TrustTier.NOTE
                and hit.passage.document.owner_id == viewer_id
            ),
            found_by=found_by(hit),
        )
        for hit in hits
    ]


def shown_groups(
    hits: Sequence[Hit],
    *,
    space_names: dict[int, str] | None = None,
    viewer_id: int | None = None,
    max_groups: int = PAGE_NOTES,
) -> list[ShownGroup]:
    """`hits` grouped by document (`group_by_document`, ranking kept), at most `max_groups`
    documents, each hit made readable as `shown_hits` does."""
    groups = group_by_document(hits, max_groups=max_groups)
    kept = [hit for group in groups for hit in (group.best, *group.more)]
    shown = iter(shown_hits(kept, space_names=space_names, viewer_id=viewer_id))
    out = []
    for group in groups:
        best = next(shown)
        out.append(ShownGroup(best=best, more=[next(shown) for _ in group.more]))
    return out


def found_by(hit: Hit) -> str:
    """Why a hit with no highlighted word was found, in words; "" when some of its words are
    highlighted, or when its labels already say it (a weaker match, a linked passage)."""
    if any(segment.highlighted for segment in hit.segments) or hit.weak or hit.via is not None:
        return ""
    if hit.fused.lexical is None:
        return "Matched by meaning: none of your search words are in this passage."
    return "Matched by its title or headings: your words are not in this passage itself."


def listed_documents(
    listing: DocumentList, *, space_names: dict[int, str] | None = None
) -> list[ListedDocument]:
    """The documents of a filter-only listing as its rows show them: where each lives, when
    its current text was saved, its tags and the start of that text made readable."""
    documents = listing.documents
    where = _where_externals_live(documents)
    names = space_names or {}
    tags = tag_names([document.pk for document in documents])
    rows = []
    for document in documents:
        excerpt = " ".join(
            wiki_links_as_text(readable_text(document.excerpt, at_line_start=True)).split()
        )
        if len(document.excerpt) >= EXCERPT_CHARS:
            excerpt = f"{excerpt.rsplit(' ', 1)[0]} …"
        rows.append(
            ListedDocument(
                document=document,
                url=document_url(kind=document.kind, document_id=document.pk),
                where=_in_space(
                    where.get(document.pk) or _where_document_lives(document),
                    names.get(document.space_id, ""),
                ),
                age=age_words(document.head.created_at),
                excerpt=excerpt,
                tags=tags.get(document.pk, []),
            )
        )
    return rows


def shows_context(hit: Hit) -> bool:
    """Whether the hit's context window says more than the passage (the page offers it only
    then; a passage that is its whole section has no context to show)."""
    return bool(hit.context_text) and hit.context_text != hit.passage.text


def _in_space(where: str, space_name: str) -> str:
    return f"{where} · in {space_name}" if space_name else where


def age_words(moment: datetime | None) -> str:
    """How long ago, coarsely ("3 days ago", "just now"); "" when unknown."""
    if moment is None:
        return ""
    now = timezone.now()
    if now - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment, now, depth=1)} ago"


def _where_document_lives(document: Document) -> str:
    """A note ("Note", or "Note imported from X"), an annotation, or an external by its
    source name when no source item names its path."""
    origin = f" from {document.source_name}" if document.source_name else ""
    if document.kind == Document.Kind.EXTERNAL:
        return f"External{origin}"
    if document.trust_tier == "annotation":
        return f"Annotation{origin}"
    return f"Note imported{origin}" if origin else "Note"


def _where_externals_live(documents: Sequence[Document]) -> dict[int, str]:
    """ "Source › path" for each external among `documents` that a source mirrors."""
    ids = {d.pk for d in documents if d.kind == Document.Kind.EXTERNAL}
    if not ids:
        return {}
    items = SourceItem.objects.filter(
        document_id__in=ids, source__space_id=F("document__space_id")
    ).select_related("source")
    return {item.document_id: f"{item.source.name} › {item.path}" for item in items.order_by("id")}


# --- readable hit text --------------------------------------------------------------------------
#
# A hit's text is shown as a person reads it, with the same rule the answer page applies to a
# quote's context (`retrieval.answer.display.readable_text`). The highlights must stay exactly
# the stored characters, and Markdown's markup often sits right against them ("**failover**",
# "`psql`", "## Failover"), so the whole passage is made readable at once with each
# highlighted segment standing in as a placeholder word that no markup rule touches (letters
# and digits only, absent from the text), and the stored highlighted text is put back in place
# of each placeholder afterwards.

_PLACEHOLDER_STEM = "lodemark"


def _placeholder_stem(text: str) -> str:
    """A word of letters absent from `text` (so a placeholder can never be passage text)."""
    stem, n = _PLACEHOLDER_STEM, 0
    while stem in text:
        n += 1
        stem = f"{_PLACEHOLDER_STEM}{'q' * n}z"
    return stem


def readable_segments(segments: Sequence[Segment]) -> list[Segment]:
    """`segments` (a passage's highlight segments, in order) with the Markdown markup of the
    unhighlighted text removed (`readable_text`) and every highlighted segment kept exactly.
    A highlight whose markup goes entirely (in a link's address, a fence's info string) goes
    with it; when none is left, or the order is not kept, the segments are shown as stored:
    exact raw text is better than a hit with no visible reason."""
    stem = _placeholder_stem("".join(segment.text for segment in segments))
    marked: list[Segment] = []
    parts: list[str] = []
    for segment in segments:
        if segment.highlighted:
            parts.append(f"{stem}{len(marked)}{stem}")
            marked.append(segment)
        else:
            parts.append(segment.text)
    joined = "".join(parts)
    readable = wiki_links_as_text(readable_text(joined, at_line_start=True))
    pieces = re.split(rf"{stem}(\d+){stem}", readable)
    # re.split with one group: text, index, text, index, …, text.
    found = [int(index) for index in pieces[1::2]]
    # A highlight inside a link's address goes with the address (the link shows its text);
    # the others stay, each once and in order. Had every highlight gone, the stored text is
    # shown instead, so a hit never shows no reason for being found.
    in_order = all(a < b for a, b in pairwise(found))
    if not in_order or (marked and not found):
        return list(segments)
    out: list[Segment] = []
    for position, piece in enumerate(pieces):
        if position % 2:
            out.append(marked[int(piece)])
        elif piece:
            out.append(Segment(piece, False))
    return out
