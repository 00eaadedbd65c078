"""Passages: the retrieval unit, chunked from a version's body.

Passages are canonical rows (the lexical and vector indexes are derived from them). Only
passages of head versions carry `is_head=True`; the lexical index covers exactly those,
maintained by database triggers (SQLite) or a generated column + partial index (PostgreSQL),
see `retrieval/index/lexical/`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from spaces.models import hand_over_or_cascade


class Passage(models.Model):
    version = models.ForeignKey("notes.Version", on_delete=models.CASCADE, related_name="passages")
    # Denormalised from version.document so eligibility filters need no extra join.
    document = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, related_name="passages"
    )
    is_head = models.BooleanField(default=True)
    position = models.PositiveIntegerField()
    block_kind = models.CharField(max_length=16)
    heading_path = models.JSONField(default=list, blank=True)
    # The title text the lexical index weights above the body: the version title plus any
    # heading-path entries that differ from it.
    title_text = models.TextField(blank=True, default="")
    start = models.PositiveIntegerField(help_text="Unicode code-point offset in the version body.")
    end = models.PositiveIntegerField(help_text="Unicode code-point offset (exclusive).")
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    parent_start = models.PositiveIntegerField()
    parent_end = models.PositiveIntegerField()
    text = models.TextField()
    text_sha256 = models.CharField(max_length=64)
    # PDF snapshots: the 1-based page the passage starts on (null for other text).
    page = models.PositiveIntegerField(null=True, blank=True)
    # Externals: a public logical id from the full content hash, the source and the
    # position (seeds/adr-0005), so chunks sharing a prefix, or identical chunks at two
    # positions, never collide. Blank for notes.
    logical_id = models.CharField(max_length=64, blank=True, default="", db_index=True)

    class Meta:
        ordering = ["version_id", "position"]
        indexes = [models.Index(fields=["document", "is_head"])]
        constraints = [
            models.UniqueConstraint(fields=["version", "position"], name="passage_unique_position")
        ]

    def __str__(self) -> str:
        return f"passage {self.id} of version {self.version_id}"


class PassageVector(models.Model):
    """Canonical record that passage P has a vector in the Chroma collection of manifest K.

    Written only after the Chroma upsert succeeded, so a crash in between just re-embeds
    (the upsert is idempotent by passage id). `input_sha256` hashes the exact text that was
    embedded (title + passage text); an equal input under the same manifest reuses the vector
    instead of re-embedding. The passage link has no database constraint on purpose: if a
    passage row is ever hard-deleted, this record survives so the sync can still remove
    its vector from Chroma.
    """

    passage = models.ForeignKey(
        Passage,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="vectors",
    )
    manifest_key = models.CharField(max_length=32)
    text_sha256 = models.CharField(max_length=64)
    input_sha256 = models.CharField(max_length=64)
    embedded_at = models.DateTimeField()
    # The space stamped into the vector's Chroma metadata (the dense leg filters on it).
    # Null for vectors written before spaces existed; a document moved to another space
    # differs from it until the sync re-stamps the vector (`sync.restamp_spaces`).
    space_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["passage", "manifest_key"], name="passage_vector_unique_per_manifest"
            )
        ]
        indexes = [models.Index(fields=["manifest_key", "input_sha256"])]

    def __str__(self) -> str:
        return f"vector of passage {self.passage_id} ({self.manifest_key})"


class PendingVector(models.Model):
    """A head passage with no vector under the active manifest yet: what search's "not yet
    embedded" note counts, kept so that count reads only the pending passages instead of
    anti-joining every head passage with its vector records (~100 ms at 56k passages, paid on
    every hybrid search).

    Derived, like the lexical index: written in the transaction that makes a passage a head
    passage (`vectors.mark_pending`), deleted in the transaction that records its vector
    under the active manifest, rebuilt when another manifest becomes active. The worker never
    reads it — it finds its work by that anti-join (`vectors.pending_passages`, the truth) —
    so a drift could make the note miscount but never leaves a passage unembedded;
    `lode_index health` compares the two and `repair` rebuilds this table.
    """

    passage = models.OneToOneField(
        Passage, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )

    def __str__(self) -> str:
        return f"passage {self.passage_id} awaits its vector"


class VectorIndexState(models.Model):
    """The one row (pk=1) saying which manifest's collection queries read.

    `active_key` changes only when `lode_reindex_vectors` has embedded every head passage
    under the new manifest, so a query never mixes two models' vectors.
    """

    active_key = models.CharField(max_length=32)
    active_manifest = models.JSONField(default=dict)
    building_key = models.CharField(max_length=32, blank=True, default="")
    switched_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"vector index {self.active_key}"


class EgressLog(models.Model):
    """One time content left (or was about to leave) the machine. Written *before* the
    request is sent (invariant 8), so a crash mid-request still leaves its record."""

    class Purpose(models.TextChoices):
        QA = "qa", "Question answering"
        JUDGE = "judge", "Entailment judge"
        TOOL = "tool", "Tool call"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    destination_host = models.CharField(max_length=255)
    purpose = models.CharField(max_length=8, choices=Purpose.choices)
    # [{"document_id", "version_id", "chars"}] for every document whose content was sent.
    items = models.JSONField(default=list, blank=True)
    chars_sent = models.PositiveIntegerField(default=0)
    redaction_count = models.PositiveIntegerField(default=0)
    withheld_count = models.PositiveIntegerField(default=0)
    request_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.purpose} → {self.destination_host} at {self.created_at:%Y-%m-%d %H:%M}"


class AskTrace(models.Model):
    """A stored answer and its replayable trace (the "flight recorder"): everything needed
    to re-run the deterministic stages and compare. `trace` is redacted JSON."""

    # An answer asked in a shared space outlives its asker's account (another member of
    # the space inherits it: `spaces.models.hand_over_or_cascade`).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=hand_over_or_cascade, related_name="ask_traces"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The space it was asked in: its members may open it, and only that space's documents
    # were evidence. Null: asked across all the asker's spaces, so only the asker may.
    space = models.ForeignKey(
        "spaces.Space", on_delete=models.CASCADE, null=True, blank=True, related_name="answers"
    )
    question = models.TextField()
    # "Ask about this note": the document whose head passages were pinned first.
    pinned_document = models.ForeignKey(
        "notes.Document", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decision = models.CharField(max_length=32)
    answerer = models.CharField(max_length=64)
    # The final answer shown: {"claims": [...], "dropped": [...], "withheld": [...], ...}.
    answer = models.JSONField(default=dict)
    trace = models.JSONField(default=dict)
    code_version = models.CharField(max_length=64, blank=True, default="")
    elapsed_ms = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.decision}: {self.question[:60]}"


class VectorClaim(models.Model):
    """A claim on a head passage that one sync run is embedding right now.

    Several workers on PostgreSQL may each be asked to embed the same passage (a document's
    task and the sweep, or two overlapping tasks). Before embedding, a run inserts one row
    per passage; the primary key makes the insert the arbiter, so exactly one run owns a
    passage at a time and the others skip it. The row is deleted once the passage's vector
    is recorded. A run killed outright cannot delete its rows: `expires_at` is how long the
    claim holds without renewal (a worker's heartbeat renews the claims it is working on
    every few seconds), after which another run takes it over. Only used where the database
    offers `SELECT … FOR UPDATE SKIP LOCKED` (PostgreSQL); SQLite runs one worker.
    """

    passage_id = models.BigIntegerField(primary_key=True)
    # Who holds it: a worker id (`db_worker --worker-id`) or host:pid:random for a command.
    owner = models.CharField(max_length=100)
    # One sync window's claims share a token, so the run releases exactly its own rows.
    token = models.CharField(max_length=32, db_index=True)
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"claim on passage {self.passage_id} by {self.owner}"


class WorkerHeartbeat(models.Model):
    """A running `db_worker` says it is alive every few seconds (PostgreSQL deployments).

    A task row stays RUNNING forever when its worker is SIGKILLed; the surviving workers
    use this row to tell a task that is still running from one whose worker is gone
    (`seen_at` older than the stale limit), mark it failed and queue it again.
    """

    worker_id = models.CharField(max_length=64, primary_key=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)
    # The DBTaskResult id the worker is running (blank when idle), for the admin and logs.
    task_id = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"worker {self.worker_id} (seen {self.seen_at:%H:%M:%S})"


class Edge(models.Model):
    """One directed, labelled edge of the graph: `from` —kind→ `to`, derived from
    the head version it was read from, with its basis (the rule, its version and, for a
    declared link, the exact span).

    Edges are a derived index like passages: regenerated from head versions
    (`retrieval/index/edges.py`), never edited, removed with the version's passages when it
    stops being head, checked and rebuilt by `lode_index health` / `repair`. Whoever reads
    one applies eligibility to both ends (a hidden or deleted end hides the edge).

    The `from` end is a document version, except for `contains`, whose `from` is a source
    (its folder, upload or URL) and whose `to_version` pins the external's head snapshot.
    An unresolved edge has no `to_document`: `target` keeps what the link said (a title, a
    path or a URL) and `resolution` why it did not resolve.
    """

    class Kind(models.TextChoices):
        LINKS_TO = "links_to", "links to"
        CONTAINS = "contains", "contains"
        ANNOTATES = "annotates", "annotates"
        MENTIONS = "mentions", "mentions (inferred)"
        RELATED = "related", "related (inferred)"

    class Resolution(models.TextChoices):
        RESOLVED = "resolved", "Resolved"
        MISSING = "missing", "No such document"
        AMBIGUOUS = "ambiguous", "More than one document has this title"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The document whose head the edge was derived from (the linking note; for `contains`
    # the external; for `related` the document whose vectors were compared): re-deriving a
    # document replaces exactly the edges whose origin it is.
    origin = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, related_name="edges_derived"
    )
    from_document = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, null=True, blank=True, related_name="edges_out"
    )
    from_version = models.ForeignKey(
        "notes.Version", on_delete=models.CASCADE, null=True, blank=True, related_name="edges_out"
    )
    from_source = models.ForeignKey(
        "externals.Source", on_delete=models.CASCADE, null=True, blank=True, related_name="edges"
    )
    to_document = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, null=True, blank=True, related_name="edges_in"
    )
    # A link that names one version (a version page or an evidence link) pins it here; a link
    # to a document's page follows its head, so this stays null.
    to_version = models.ForeignKey(
        "notes.Version", on_delete=models.CASCADE, null=True, blank=True, related_name="edges_in"
    )
    to_passage = models.ForeignKey(
        Passage, on_delete=models.CASCADE, null=True, blank=True, related_name="edges_in"
    )
    resolution = models.CharField(
        max_length=16, choices=Resolution.choices, default=Resolution.RESOLVED
    )
    # What the link said: the wiki title, the path or URL; `target_key` the title as
    # `notes.models.title_key` matches it, so saving a note of that title re-resolves the link.
    target = models.CharField(max_length=1000, blank=True, default="")
    target_key = models.CharField(max_length=500, blank=True, default="", db_index=True)
    label = models.CharField(max_length=500, blank=True, default="")  # the link's text / alias
    # The basis: which rule established the edge, and where in the `from` version.
    rule = models.CharField(max_length=64)
    rule_version = models.CharField(max_length=16)
    passage = models.ForeignKey(
        Passage, on_delete=models.CASCADE, null=True, blank=True, related_name="edges_out"
    )
    start = models.PositiveIntegerField(null=True, blank=True, help_text="Code points.")
    end = models.PositiveIntegerField(null=True, blank=True, help_text="Code points.")
    score = models.FloatField(null=True, blank=True)  # `related`: the similarity
    basis = models.JSONField(default=dict, blank=True)  # rule-specific details (model, path…)

    class Meta:
        ordering = ["from_document_id", "start", "id"]
        indexes = [
            models.Index(fields=["origin", "kind"]),
            models.Index(fields=["from_document", "kind"]),
            models.Index(fields=["to_document", "kind"]),
            models.Index(fields=["from_source", "kind"]),
        ]

    def __str__(self) -> str:
        return f"{self.from_document_id or self.from_source_id} {self.kind} {self.to_document_id}"

    @property
    def inferred(self) -> bool:
        return self.kind in INFERRED_EDGE_KINDS


INFERRED_EDGE_KINDS = frozenset({Edge.Kind.MENTIONS, Edge.Kind.RELATED})


class GraphGeneration(models.Model):
    """One row per change of the edge set, appended in the transaction that made it.

    The graph's generation is the largest id a reader's snapshot sees: a graph query reads it
    and the edges inside one transaction, so its answer names the generation it ran on and
    never mixes two. Append-only rather than one counter row, so concurrent saves never wait
    on each other for it."""

    created_at = models.DateTimeField(auto_now_add=True)
    documents = models.PositiveIntegerField(default=0)  # how many documents' edges changed

    def __str__(self) -> str:
        return f"graph generation {self.pk}"


class GraphQuestionTrace(models.Model):
    """A graph question in words and what became of it: which path (the
    offline rules or the two model stages) made which query, on which candidates, and the
    model stages' prompt version, request hashes (equal to their egress log rows) and raw
    replies. Private to the asker (the admin shows it read-only); kept apart from stored
    answers, which are cited answers and list on the ask page."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="graph_questions"
    )
    space = models.ForeignKey(
        "spaces.Space", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    question = models.TextField()
    path = models.CharField(max_length=16)  # "rules" | "model"
    answered = models.BooleanField(default=False)
    message = models.TextField(blank=True, default="")
    query = models.JSONField(null=True, blank=True)  # as executed (or as the model proposed)
    generation = models.PositiveBigIntegerField(null=True, blank=True)
    trace = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"graph question {self.pk} ({self.path}, answered={self.answered})"


class DocumentMeta(models.Model):
    """What a document is, derived from its head version (`retrieval/meta/`): the date it is
    about and where that was read, and its kind. Rewritten with the head's passages, so it
    is never older than what search finds; `lode_index health` re-derives and compares."""

    document = models.OneToOneField(
        "notes.Document", on_delete=models.CASCADE, primary_key=True, related_name="meta"
    )
    # The version the row was derived from (the head when written).
    version = models.ForeignKey("notes.Version", on_delete=models.CASCADE, related_name="+")
    date = models.DateField(null=True, blank=True, db_index=True)
    # front_matter | title | heading | path | first_version
    date_source = models.CharField(max_length=16)
    date_precision = models.CharField(max_length=8, default="day")  # day | month
    kind = models.CharField(max_length=16, db_index=True)
    kind_source = models.CharField(max_length=16)  # front_matter | external | title | path | …
    # The extraction rules' version (`retrieval.meta.extract` changes it): rows made under
    # other rules are stale.
    rules = models.PositiveSmallIntegerField(default=1)

    def __str__(self) -> str:
        return f"{self.document_id}: {self.kind} {self.date}"


class DocumentTerm(models.Model):
    """One of a document's top topic words (the per-space catalog's basis)."""

    document = models.ForeignKey("notes.Document", on_delete=models.CASCADE, related_name="+")
    term = models.CharField(max_length=64)
    weight = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["term"])]

    def __str__(self) -> str:
        return f"{self.document_id}: {self.term}"


class DocumentAlias(models.Model):
    """Two names of one thing a document states ("Service Level Objective (SLO)"). Used for
    query expansion only for readers who may see the document."""

    document = models.ForeignKey("notes.Document", on_delete=models.CASCADE, related_name="+")
    short = models.CharField(max_length=100)
    long = models.CharField(max_length=200)
    # Folded tokens, one space apart (`retrieval.meta.extract.alias_key`): what a query's
    # words are matched with.
    short_key = models.CharField(max_length=200, db_index=True)
    long_key = models.CharField(max_length=200, db_index=True)
    pattern = models.CharField(max_length=16)

    def __str__(self) -> str:
        return f"{self.short} = {self.long}"
