"""Scale latency: the lexical leg at >= 200k passages, the dense leg at >= 500k vectors.

    # 1. lexical, SQLite (FTS5 bm25): copies the data folder, never writes to it
    .venv/bin/python bench/scale_latency.py lexical --db sqlite \
        --data-dir /work/scifact-data [--passages 200000] [--queries 200]
    # 1. lexical, PostgreSQL: loads SciFact into the scratch database h4_scale, then scales it
    .venv/bin/python bench/scale_latency.py lexical --db postgres [--pg-name h4_scale] [--keep]
    # 2. the dense leg on a Chroma server (`chroma run --path DIR --port 8765`)
    .venv/bin/python bench/scale_latency.py vectors --chroma-url http://127.0.0.1:8765 \
        [--vectors 500000] [--spaces 4] [--queries 200]
    # 3. where hybrid+learned spends its time (cProfile), on a migrated copy of the data folder
    .venv/bin/python bench/scale_latency.py profile --data-dir /tmp/h4-scifact [--queries 100]

Lexical. The corpus (SciFact, user `eval`) is scaled up by replication with perturbation until
it holds >= `--passages` head passages: each replica copies every original document, its head
version and its head passages under a new external key (`beir:r<R>-<id>`), each passage's
text with two adjacent words swapped (as bench/search_latency.py perturbs abstracts). The rows
are written with the ORM's `bulk_create` in one transaction per replica, so the same tables
are written and the same database triggers fire as for lode's own writes (the FTS5 index on
SQLite; the tsvector column and GIN index on PostgreSQL, whose BM25 statistics trigger is
disabled during the copy and the statistics refilled after by lode's `rebuild()`: the same
rows, minutes faster). Vectors are not needed.
Per SciFact train query, interleaved so all see the same load, it times:
* `leg`: `lexical.backend().search(parsed, audience=…)`, the lexical leg search runs;
* `service`: `retrieval.search.pipeline.search()` in lexical mode, rerank off;
* `service+learned`: the same with the learned reranker;
* `floor`: `lexical.backend().floor_search(parsed)`, the same query with no joins/eligibility;
and `live_ids`: `vectors.live_passage_ids` of 288 ids (the dense leg's space/head check on the
database, which the vectors phase cannot time: its synthetic vectors have no passages).

Vectors. `--vectors` random unit vectors (384-d, float32) are added in batches of 5,000 to a
collection on the Chroma server, with the metadata lode writes (`vector_metadata`: document,
version, space, kind, trust, created, text_sha256, manifest), spaces spread round-robin over
`--spaces` spaces (`--owners` is the old name). Queries are stored vectors plus Gaussian
noise (σ 0.05, renormalised), so each has true near neighbours. Per query:
* `dense`: what `VectorStore.query` sends to Chroma for an audience that sees less than a
  fifth of the documents —
  `collection.query(n_results=256+32, where=eligibility_where([space]))` (`VectorStore._nearest`);
* `dense_unfiltered_by_share`: what it sends now for an audience that sees at least a fifth
  of the documents (`UNFILTERED_SHARE`): no space clause, `int(288 / share) + 32` deep (the
  database check of those ids that follows is not timed here: no passages exist for them);
* `dense_sees_every_document`: the same for an audience that sees every document (a
  single-user install), where search drops the space clause (`vectors.sees_every_document`);
* `floor`: a raw `collection.query` of 256 with no filter.
A collection that already holds `--vectors` vectors is reused (`--reuse`).

Load average (1 min) is recorded next to every figure: the machine is shared. Figures are
printed and merged into bench/out/scale_latency.json under the phase's key.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import percentile

os.environ["OPENBLAS_NUM_THREADS"] = "1"
ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))
OUT = ROOT / "bench" / "out"
PG_SERVER = os.environ.get("LODE_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DIM = 384
BATCH = 5000
WARMUP = 10


def summary(timings: dict[str, list[float]], floor: str = "floor") -> dict[str, object]:
    figures: dict[str, object] = {}
    for name, values in timings.items():
        figures[name] = {
            "p50": round(percentile(values, 50), 2),
            "p95": round(percentile(values, 95), 2),
        }
    for name in timings:
        if name != floor and name in figures:
            figures[f"{name}/{floor}"] = {
                q: round(figures[name][q] / max(figures[floor][q], 1e-9), 2)  # type: ignore[index]
                for q in ("p50", "p95")
            }
    return figures


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def save(key: str, figures: dict[str, object]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "scale_latency.json"
    existing = json.loads(path.read_text()) if path.exists() else {}
    existing[key] = figures
    path.write_text(json.dumps(existing, indent=2) + "\n")


# --- lexical -----------------------------------------------------------------------------


def perturb(text: str, rng: random.Random) -> str:
    """Two adjacent plain words swapped: same length and vocabulary, a different passage."""
    words = text.split(" ")
    plain = [i for i in range(len(words) - 1) if words[i].isalpha() and words[i + 1].isalpha()]
    if plain:
        i = rng.choice(plain)
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def replicate_bulk(target: int, seed: int = 7) -> int:
    """Copy the original SciFact documents (perturbed) until >= `target` head passages."""
    import hashlib

    from django.db import transaction

    from notes.models import Document, Version
    from retrieval.models import Passage

    rng = random.Random(seed)
    originals = list(
        Document.objects.filter(external_key__regex=r"^beir:[0-9]", deleted_at__isnull=True)
        .select_related("head")
        .order_by("id")
    )
    passages = list(
        Passage.objects.filter(is_head=True, document__in=[d.pk for d in originals]).order_by("id")
    )
    by_document: dict[int, list[Passage]] = {}
    for p in passages:
        by_document.setdefault(p.document_id, []).append(p)
    r = 0
    while (count := Passage.objects.filter(is_head=True).count()) < target:
        r += 1
        while Document.objects.filter(external_key__startswith=f"beir:r{r}-").exists():
            r += 1  # a reused database already holds this replica
        started = time.perf_counter()
        with transaction.atomic():
            docs = [
                Document(
                    owner_id=d.owner_id,
                    space_id=d.space_id,
                    kind=d.kind,
                    title=d.title,
                    trust_tier=d.trust_tier,
                    external_key=f"beir:r{r}-{d.external_key.removeprefix('beir:')}",
                    source_name=d.source_name,
                    no_egress=d.no_egress,
                )
                for d in originals
            ]
            Document.objects.bulk_create(docs, batch_size=500)
            versions = []
            for new, old in zip(docs, originals, strict=True):
                h = old.head
                versions.append(
                    Version(
                        document_id=new.pk,
                        number=h.number,
                        title=h.title,
                        body=h.body,
                        sha256=h.sha256,
                        byte_size=h.byte_size,
                        extractor_name=h.extractor_name,
                        extractor_version=h.extractor_version,
                        created_by_id=h.created_by_id,
                        source_path=h.source_path,
                        source_sha256=h.source_sha256,
                    )
                )
            Version.objects.bulk_create(versions, batch_size=500)
            for new, version in zip(docs, versions, strict=True):
                new.head_id = version.pk
            Document.objects.bulk_update(docs, ["head"], batch_size=500)
            copies = []
            for new, version, old in zip(docs, versions, originals, strict=True):
                for p in by_document.get(old.pk, []):
                    text = perturb(p.text, rng)
                    copies.append(
                        Passage(
                            document_id=new.pk,
                            version_id=version.pk,
                            is_head=True,
                            position=p.position,
                            block_kind=p.block_kind,
                            heading_path=p.heading_path,
                            title_text=p.title_text,
                            start=p.start,
                            end=p.end,
                            start_line=p.start_line,
                            end_line=p.end_line,
                            parent_start=p.parent_start,
                            parent_end=p.parent_end,
                            text=text,
                            text_sha256=hashlib.sha256(text.encode()).hexdigest(),
                            page=p.page,
                            logical_id=p.logical_id,
                        )
                    )
            Passage.objects.bulk_create(copies, batch_size=500)
        print(
            f"  replica {r}: +{len(copies):,} passages in {time.perf_counter() - started:.1f}s",
            file=sys.stderr,
            flush=True,
        )
    return count


def measure_lexical(query_count: int) -> dict[str, object]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from retrieval.eligibility import audience_for
    from retrieval.index import lexical
    from retrieval.index.vectors import live_passage_ids
    from retrieval.models import Passage
    from retrieval.query import parse
    from retrieval.search.evaluation import load_queries
    from retrieval.search.pipeline import search

    user = get_user_model().objects.get(username="eval")
    audience = audience_for(user.pk)
    queries = list(load_queries(SCIFACT / "queries.jsonl").values())[:query_count]
    backend = lexical.backend()
    ids = list(
        Passage.objects.filter(is_head=True).order_by("?").values_list("pk", flat=True)[:2000]
    )
    rng = random.Random(3)
    for text in queries[:WARMUP]:
        search(user=user, query=text, mode="lexical", rerank="learned")
        backend.floor_search(parse(text))
    timings: dict[str, list[float]] = {
        "leg": [],
        "service": [],
        "service+learned": [],
        "live_ids": [],
        "floor": [],
    }
    score_name = ""
    loads = []
    for n, text in enumerate(queries):
        parsed = parse(text)
        started = time.perf_counter()
        hits = backend.search(parsed, audience=audience)
        timings["leg"].append((time.perf_counter() - started) * 1000)
        score_name = score_name or (hits[0].score_name if hits else "")
        started = time.perf_counter()
        search(user=user, query=text, mode="lexical", rerank="off")
        timings["service"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        search(user=user, query=text, mode="lexical", rerank="learned")
        timings["service+learned"].append((time.perf_counter() - started) * 1000)
        sample = rng.sample(ids, 288)
        started = time.perf_counter()
        live_passage_ids(sample, audience.space_ids)
        timings["live_ids"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        backend.floor_search(parsed)
        timings["floor"].append((time.perf_counter() - started) * 1000)
        if n % 20 == 0:
            loads.append(os.getloadavg()[0])
    figures: dict[str, object] = {
        "vendor": connection.vendor,
        "backend": backend.__name__,
        "score_name": score_name,
        "head_passages": Passage.objects.filter(is_head=True).count(),
        "queries": len(queries),
        "load_avg_1m": [round(x, 2) for x in loads],
    }
    figures.update(summary(timings))
    return figures


def lexical_child(args: argparse.Namespace) -> int:
    setup_django()
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0)
    from notes.models import Document

    if connection.vendor == "postgresql" and not Document.objects.exists():
        started = time.perf_counter()
        call_command("lode_load_beir", str(SCIFACT), user="eval", verbosity=0)
        print(f"  SciFact loaded in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    started = time.perf_counter()
    if connection.vendor == "postgresql":
        # The BM25 statistics trigger costs ~2 min per 8k-passage replica on this machine
        # (one B-tree insert per posting); so it is off during the copy, and lode's own
        # repair (`postgresql.rebuild()`) then refills the statistics from the stored
        # tsvectors — the same rows the trigger writes. The tsvector column and GIN index
        # are maintained as usual.
        from retrieval.index.lexical import postgresql

        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE retrieval_passage DISABLE TRIGGER retrieval_bm25_ai")
        try:
            replicate_bulk(args.passages)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("ALTER TABLE retrieval_passage ENABLE TRIGGER retrieval_bm25_ai")
        with transaction.atomic(), connection.cursor() as cursor:
            # Dropped first: `rebuild()` recreates them, and a database migrated while the
            # backend's SQL functions were being changed would refuse CREATE OR REPLACE.
            for statement in postgresql.BM25_DROP_SQL:
                cursor.execute(statement)
            postgresql.rebuild()
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    else:
        replicate_bulk(args.passages)
    scale_seconds = round(time.perf_counter() - started, 1)
    figures = measure_lexical(args.queries)
    figures["scale_seconds"] = scale_seconds
    print(json.dumps(figures))
    return 0


def run_lexical(args: argparse.Namespace) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "LODE_DATA_DIR")}
    scratch = Path(tempfile.mkdtemp(prefix=f"h4-scale-{args.db}-"))
    pg_name = args.pg_name
    try:
        if args.db == "sqlite":
            if not args.data_dir:
                sys.exit("--data-dir is required for --db sqlite")
            # A copy: the benchmark migrates and writes; the source folder stays untouched.
            shutil.copytree(
                args.data_dir, scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns("chroma")
            )
        else:
            import psycopg

            with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
                if not args.reuse:
                    conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [pg_name]
                ).fetchone()
                if not exists:
                    conn.execute(f'CREATE DATABASE "{pg_name}"')
            env["DATABASE_URL"] = f"{PG_SERVER}/{pg_name}"
            if args.data_dir:  # the model folder for the learned reranker's embeddings
                shutil.copytree(
                    Path(args.data_dir) / "models", scratch / "models", dirs_exist_ok=True
                )
        env["LODE_DATA_DIR"] = str(scratch)
        command = [sys.executable, __file__, "lexical", "--child", "--db", args.db]
        command += ["--passages", str(args.passages), "--queries", str(args.queries)]
        done = subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE, text=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if args.db == "postgres" and not args.keep:
            import psycopg

            with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
    print(json.dumps({f"lexical_{args.db}": figures}, indent=2))
    save(f"lexical_{args.db}", figures)
    return 0


# --- profile -----------------------------------------------------------------------------


def run_profile(args: argparse.Namespace) -> int:
    """cProfile of hybrid search with the learned reranker over the first `--queries` claims.

    Reads a migrated data folder (search writes nothing, but pass a copy all the same)."""
    import cProfile
    import pstats

    os.environ["LODE_DATA_DIR"] = str(Path(args.data_dir).resolve())
    os.environ.pop("DATABASE_URL", None)
    setup_django()
    from django.contrib.auth import get_user_model

    from retrieval.search.evaluation import load_queries
    from retrieval.search.pipeline import search

    user = get_user_model().objects.get(username="eval")
    queries = list(load_queries(SCIFACT / "queries.jsonl").values())[: args.queries]
    for text in queries[:WARMUP]:
        search(user=user, query=text, mode="hybrid", rerank=args.rerank)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for text in queries:
        search(user=user, query=text, mode="hybrid", rerank=args.rerank)
    profiler.disable()
    elapsed = (time.perf_counter() - started) * 1000 / len(queries)
    print(f"hybrid+{args.rerank}: {elapsed:.1f} ms/query under cProfile, {len(queries)} queries")
    stats = pstats.Stats(profiler).sort_stats(args.sort)
    stats.print_stats(args.top)
    return 0


# --- vectors -----------------------------------------------------------------------------


def run_vectors(args: argparse.Namespace) -> int:
    os.environ["CHROMA_URL"] = args.chroma_url
    # Django needs a data folder (nothing is written to it: the vectors live on the server).
    scratch = tempfile.mkdtemp(prefix="h4-scale-vectors-")
    os.environ["LODE_DATA_DIR"] = scratch
    try:
        return _run_vectors(args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_vectors(args: argparse.Namespace) -> int:
    setup_django()
    import hashlib

    import numpy as np

    from retrieval.index.vectors import (
        DEFAULT_LIMIT,
        QUERY_MARGIN,
        UNFILTERED_SHARE,
        VectorStore,
        _connection,
        eligibility_where,
    )

    store = VectorStore(_connection(), "scale_bench", None)
    rng = np.random.default_rng(11)
    total = args.vectors
    created = int(time.time()) - 86400
    with store._use("count", write=False, create=True) as collection:
        have = collection.count()
    if have < total:
        if have and not args.reuse:
            with store._connection.session(write=True):
                store._connection._client.delete_collection(store.name)
                store._connection.forget(store.name)
            have = 0
        import chromadb
        from chromadb.config import Settings

        from retrieval.index.vectors import _http_settings

        host, port, ssl = _http_settings(args.chroma_url)
        loader = chromadb.HttpClient(
            host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False)
        ).get_or_create_collection(store.name, embedding_function=None, metadata=store._metadata)
        started = time.perf_counter()
        for start in range(have, total, BATCH):
            size = min(BATCH, total - start)
            vectors = rng.standard_normal((size, DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            ids = range(start + 1, start + size + 1)
            metadatas = [
                {
                    "document": i // 2 + 1,
                    "version": i // 2 + 1,
                    "space": i % args.spaces + 1,
                    "kind": "note",
                    "trust": "note",
                    "created": created + i,
                    "text_sha256": hashlib.sha256(str(i).encode()).hexdigest(),
                    "manifest": "scale_bench",
                }
                for i in ids
            ]
            # A client of its own with no timeout: a 5,000-vector add takes longer than the
            # per-request timeout lode puts on searches.
            loader.add(ids=[str(i) for i in ids], embeddings=vectors, metadatas=metadatas)
            if (start // BATCH) % 10 == 0:
                print(
                    f"  {start + size:,} vectors, {time.perf_counter() - started:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
        load_seconds = round(time.perf_counter() - started, 1)
    else:
        load_seconds = None
    # The first queries after a bulk load wait for the server to index what it was sent
    # (longer than lode's request timeout at this size): made here with a client of its
    # own, without a timeout, and timed.
    import chromadb
    from chromadb.config import Settings

    from retrieval.index.vectors import _http_settings

    host, port, ssl = _http_settings(args.chroma_url)
    raw = chromadb.HttpClient(
        host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False)
    ).get_collection(store.name, embedding_function=None)
    probe = rng.standard_normal(DIM).astype(np.float32)
    started = time.perf_counter()
    raw.query(query_embeddings=[probe], n_results=256, include=["distances"])
    first_unfiltered = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    raw.query(
        query_embeddings=[probe], n_results=288, where=eligibility_where([1]), include=["distances"]
    )
    first_filtered = round(time.perf_counter() - started, 2)
    with store._use("count", write=False, create=False) as collection:
        count = collection.count()
        sample = collection.get(
            ids=[str(i) for i in rng.choice(count, args.queries + WARMUP, replace=False) + 1],
            include=["embeddings"],
        )
    queries = np.asarray(sample["embeddings"], dtype=np.float32)
    queries += rng.normal(0, 0.05, queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    clause = eligibility_where([1])
    wanted = DEFAULT_LIMIT + QUERY_MARGIN
    # What `VectorStore.query` asks for an audience that sees at least `UNFILTERED_SHARE` of
    # the documents: no space clause, deeper by the share (then checked on the database).
    share = 1 / args.spaces
    share_depth = int(wanted / share) + QUERY_MARGIN if share >= UNFILTERED_SHARE else wanted
    timings: dict[str, list[float]] = {
        "dense": [],
        "dense_unfiltered_by_share": [],
        "dense_sees_every_document": [],
        "floor": [],
    }
    loads = []
    for n, query in enumerate(queries):
        started = time.perf_counter()
        ids, _, _ = store._nearest(query, clause, wanted)
        dense = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        store._nearest(query, None, wanted)
        sole = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        store._nearest(query, None, share_depth)
        by_share = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        with store._use("query", write=False, create=False) as collection:
            collection.query(query_embeddings=[query], n_results=256, include=["distances"])
        floor = (time.perf_counter() - started) * 1000
        if n < WARMUP:
            continue
        timings["dense"].append(dense)
        timings["dense_unfiltered_by_share"].append(by_share)
        timings["dense_sees_every_document"].append(sole)
        timings["floor"].append(floor)
        if n % 20 == 0:
            loads.append(os.getloadavg()[0])
    figures: dict[str, object] = {
        "vectors": count,
        "spaces": args.spaces,
        "eligible_share": round(1 / args.spaces, 3),
        "unfiltered_depth": share_depth,
        "queries": len(timings["floor"]),
        "load_seconds": load_seconds,
        "first_query_seconds": {"unfiltered": first_unfiltered, "filtered": first_filtered},
        "load_avg_1m": [round(x, 2) for x in loads],
    }
    figures.update(summary(timings))
    print(json.dumps({"vectors_chroma_server": figures}, indent=2))
    save("vectors_chroma_server", figures)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="phase", required=True)
    lex = sub.add_parser("lexical", help="lexical leg at >= --passages head passages")
    lex.add_argument("--db", choices=["sqlite", "postgres"], required=True)
    lex.add_argument("--data-dir", help="SciFact data folder (copied, never written)")
    lex.add_argument("--passages", type=int, default=200_000)
    lex.add_argument("--queries", type=int, default=200)
    lex.add_argument("--pg-name", default="h4_scale")
    lex.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    lex.add_argument("--reuse", action="store_true", help="reuse an existing PostgreSQL database")
    lex.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    vec = sub.add_parser("vectors", help="dense leg on a Chroma server at >= --vectors")
    vec.add_argument("--chroma-url", required=True)
    vec.add_argument("--vectors", type=int, default=500_000)
    vec.add_argument(
        "--spaces",
        "--owners",
        dest="spaces",
        type=int,
        default=4,
        help="spaces the vectors spread over",
    )
    vec.add_argument("--queries", type=int, default=200)
    vec.add_argument("--reuse", action="store_true", help="top up an existing collection")
    prof = sub.add_parser("profile", help="cProfile of hybrid search with a reranker")
    prof.add_argument("--data-dir", required=True, help="a migrated copy of the data folder")
    prof.add_argument("--queries", type=int, default=100)
    prof.add_argument("--rerank", default="learned")
    prof.add_argument("--sort", default="cumulative", choices=["cumulative", "tottime"])
    prof.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if args.phase == "profile":
        return run_profile(args)
    if args.phase == "vectors":
        if args.spaces < 1 or args.vectors < 1:
            parser.error("--spaces and --vectors must be positive")
        return run_vectors(args)
    if args.child:
        return lexical_child(args)
    return run_lexical(args)


if __name__ == "__main__":
    sys.exit(main())
