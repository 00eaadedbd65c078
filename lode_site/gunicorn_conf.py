"""gunicorn's configuration for lode: `gunicorn -c python:lode_site.gunicorn_conf`.

`python3 -m lode_site.bootstrap run` and `deploy-local` start gunicorn with this module and
`--bind HOST:PORT` (and `--workers` for deploy-local); a systemd unit does the same
(docs/deploy.md). Why each number:

* **Processes and threads.** A search is CPU work in Python and onnxruntime (the query's
  embedding, reranking, highlighting) between short waits on the database and Chroma. The
  GIL and the embedder's lock serialise the CPU part inside one process, so CPU parallelism
  comes from processes: one per core (`LODE_WEB_WORKERS`, default: the cores this process
  may run on, at most 8). Each holds its own copy of the embedding model: a warmed-up worker
  is ~300 MB resident (measured; the master 26 MB), more with a cross-encoder reranker —
  which, with the CPU-bound work, is what keeps the count at cores rather than the
  2 × cores + 1 of gunicorn's docs. A few threads per process (`LODE_WEB_THREADS`, 4) overlap
  those waits and slow clients, so a request that waits for PostgreSQL does not idle a core.
* **Time.** Every request's work is bounded by lode's own budget (`lode_site/budget.py`:
  10 s for reads, 30 s for asks, enforced in the database too); gunicorn's `timeout` is only
  the outer bound for a wedged process: a worker whose main loop has not checked in for
  `timeout` seconds (60) is killed and replaced. With the threaded worker requests run in
  threads and the main loop keeps checking in while they run, even an ask waiting minutes on
  a remote model (which the budget does not count): only a process stuck without giving up
  the GIL for that long (a runaway regular expression, say) is killed.
* **Graceful.** SIGTERM lets requests in flight finish for up to `graceful_timeout` (the ask
  budget) before workers are killed; SIGHUP starts new workers with freshly loaded code and
  settings and retires the old ones once they finish — no request is dropped.
  `bootstrap run` writes the master's pid to `<data>/gunicorn.pid` for that.
* **Recycling.** A worker is replaced after `max_requests` (± jitter, so the workers do not
  all restart at once) to bound slow memory growth (allocator fragmentation, caches).
* **One inference thread per process** (`LODE_EMBED_THREADS=1`, unless set): onnxruntime's
  default is a pool of one thread per core in every process, spinning between calls, so with
  a process per core each query's embedding kept every core busy. Measured
  (`bench/request_cpu.py`, SciFact, hybrid): 92 → 67 ms of CPU per search page, 83 → 59 per
  API search, for ~3 ms more wall time on an idle server (the query's embedding: 6 → 9 ms).
* **Garbage collection** (`tune_garbage_collector`, after the model loads): what was loaded at
  start is frozen out of later collections, and collections come less often; ~1.3 ms of CPU
  saved per search.
* **No preload.** The app (Django, and lazily the model, onnxruntime's thread pool, database
  and Chroma connections) is loaded in each worker after the fork: none of those survive a
  fork safely, and SIGHUP can only pick up new code when the master never imported it. Each
  worker loads the embedding model before it takes its first request (`post_worker_init`),
  so a recycled worker does not make a user wait for it.
* **Access log** on stdout, one line per request, without the query string: search and ask
  text are the user's own words about their notes and stay out of logs. Behind a proxy the
  `X-Forwarded-For` header is logged beside the proxy's address.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from pathlib import Path

from lode_site import env

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env.data_dir(BASE_DIR)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# Read by the workers' settings (they import Django after the fork); see the docstring.
os.environ.setdefault("LODE_EMBED_THREADS", "1")

wsgi_app = "lode_site.wsgi:application"
proc_name = "lode"
worker_class = "gthread"
workers = env.env_int("LODE_WEB_WORKERS", min(_cores(), 8), minimum=1)
threads = env.env_int("LODE_WEB_THREADS", 4, minimum=1)
timeout = 60
graceful_timeout = 30
keepalive = 5
max_requests = 2000
max_requests_jitter = 200
preload_app = False

pidfile = str(DATA_DIR / "gunicorn.pid")
# gunicorn 27's control socket defaults to one path per user ($HOME/.gunicorn/gunicorn.ctl),
# which two lode instances of one user would fight over; lode is controlled with signals.
control_socket_disable = True
if Path("/dev/shm").is_dir():
    # The heartbeat file is touched constantly; in memory, a slow disk cannot make a healthy
    # worker look wedged (gunicorn's docs recommend this where /tmp is on disk).
    worker_tmp_dir = "/dev/shm"

# gunicorn trusts X-Forwarded-Proto from these addresses (127.0.0.1 by default) to mark a
# request secure. lode decides that in one place, Django's SECURE_PROXY_SSL_HEADER, set only
# with LODE_HTTPS=1 (a proxy in front): without a proxy, no client may claim HTTPS.
forwarded_allow_ips = ""

accesslog = "-"
errorlog = "-"
access_log_format = (
    '%(h)s %({x-forwarded-for}i)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms %(p)s'
)
# Request-line and header bounds (gunicorn's defaults, stated): a longer one is a 400.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


def post_worker_init(worker: object) -> None:
    """Load the embedding model now, so the worker's first search does not wait for it.

    A model that cannot load is logged and left to search's own degraded path (lexical only,
    said on the page); it must not stop the worker from serving.
    """
    from retrieval.index.embeddings import EmbeddingUnavailable, get_embedder

    with contextlib.suppress(EmbeddingUnavailable):
        get_embedder()
    tune_garbage_collector()
    logging.getLogger("lode").debug("worker %s ready", os.getpid())


# Python's cyclic garbage collector, tuned for a long-lived web process: the objects loaded at
# start (Django, the model, Chroma's client: ~180,000) are frozen out of every later
# collection, and the youngest generation is collected after 10,000 net allocations rather
# than 2,000 (a search allocates tens of thousands of short-lived objects). Measured
# (SciFact, page and API, one at a time): ~2 ms of CPU per search spent collecting → ~0.7.
GC_THRESHOLDS = (10_000, 50, 100)


def tune_garbage_collector() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
