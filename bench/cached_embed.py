"""Run `manage.py` with passage embeddings taken from an already embedded lode data folder.

    LODE_EMBED_CACHE=/work/scifact-data DATABASE_URL=postgres://… LODE_DATA_DIR=/tmp/pg-data \
        .venv/bin/python bench/cached_embed.py lode_embed_pending --no-progress

Embedding SciFact takes ~20–30 minutes on two cores. A second install of the same corpus
(PostgreSQL next to SQLite, for `lode_eval` on both) embeds exactly the same input texts, so
this wrapper looks each input up by its SHA-256 (`input_sha256`, what `PassageVector`
records) in the cache folder's database and reads that passage's vector from the cache's
Chroma; only inputs the cache lacks go through the model. The model is deterministic, so a
cached vector is the vector the model would give (the cache must have been embedded under
the same manifest: this checks it). Everything else — claims, records, the Chroma writes —
is lode's own code. For benchmarks only; lode never imports this.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load_cache(folder: Path, manifest_key: str, collection: str) -> dict[str, np.ndarray]:
    """input sha256 → vector, from the cache folder's SQLite records and embedded Chroma."""
    import chromadb
    from chromadb.config import Settings

    db = sqlite3.connect(f"file:{folder / 'lode.sqlite3'}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT input_sha256, passage_id FROM retrieval_passagevector WHERE manifest_key = ?",
        (manifest_key,),
    ).fetchall()
    db.close()
    if not rows:
        raise SystemExit(f"{folder} has no vectors under manifest {manifest_key}")
    client = chromadb.PersistentClient(
        path=str(folder / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    stored = client.get_collection(collection)
    by_passage: dict[str, np.ndarray] = {}
    ids = [str(pid) for _, pid in rows]
    for start in range(0, len(ids), 2000):
        got = stored.get(ids=ids[start : start + 2000], include=["embeddings"])
        for pid, vector in zip(got["ids"], got["embeddings"], strict=True):
            by_passage[pid] = np.asarray(vector, dtype=np.float32)
    return {digest: by_passage[str(pid)] for digest, pid in rows if str(pid) in by_passage}


def install(folder: Path) -> None:
    from retrieval.index import embeddings
    from retrieval.index.vectors import collection_name

    key = embeddings.current_manifest().key
    cache = load_cache(folder, key, collection_name(key))
    print(f"[cached_embed] {len(cache)} cached vectors from {folder}", file=sys.stderr)
    original = embeddings.Embedder.embed_passages
    missed = [0]

    def embed_passages(self, texts):  # type: ignore[no-untyped-def]
        digests = [embeddings.input_sha256(t) for t in texts]
        misses = [i for i, d in enumerate(digests) if d not in cache]
        computed = original(self, [texts[i] for i in misses]) if misses else None
        missed[0] += len(misses)
        out = np.zeros((len(texts), embeddings.DIMENSION), dtype=np.float32)
        for row, digest in enumerate(digests):
            if digest in cache:
                out[row] = cache[digest]
        for j, i in enumerate(misses):
            out[i] = computed[j]
        return out

    embeddings.Embedder.embed_passages = embed_passages  # type: ignore[method-assign]
    import atexit

    atexit.register(lambda: print(f"[cached_embed] {missed[0]} inputs embedded by the model",
                                  file=sys.stderr))  # fmt: skip


if __name__ == "__main__":
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    install(Path(os.environ["LODE_EMBED_CACHE"]))
    execute_from_command_line(["manage.py", *sys.argv[1:]])
