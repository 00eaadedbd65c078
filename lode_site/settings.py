"""lode's settings: everything that varies comes from the environment via `lode_site.env`."""

from __future__ import annotations

import os
from pathlib import Path

from lode_site import env

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env.data_dir(BASE_DIR)

# Models must never be fetched at run time (see ../shared/MODELS.md).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One BLAS thread: onnxruntime keeps its own pool, and two pools on 2 cores roughly double
# query latency (MODELS.md). Must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

SECRET_KEY = env.secret_key(DATA_DIR)
DEBUG = env.env_bool("DEBUG", False)
ALLOWED_HOSTS = env.env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",
    "lode_site",
    "notes",
    "externals",
    "retrieval",
    # After "retrieval" on purpose: retrieval's `db_worker` (which first queues a sweep for
    # vector work a killed worker left behind) must shadow the stock command.
    "django_tasks_db",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "lode_site.middleware.LodeLoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "lode_site.urls"
WSGI_APPLICATION = "lode_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.database(DATA_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "notes:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request when it is missing

# One cache shared by every worker process of this machine (a folder in the data dir, so no
# extra service): rendered note versions (keyed by their SHA-256) and login throttling.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(DATA_DIR / "cache"),
        "TIMEOUT": 7 * 24 * 3600,
        "OPTIONS": {"MAX_ENTRIES": 2000},
    }
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# Upper bounds on what one request may carry; larger bodies get a clear 400/413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.env_int("LODE_MAX_REQUEST_BYTES", 5_000_000, minimum=1024)
LODE_MAX_NOTE_BYTES = env.env_int("LODE_MAX_NOTE_BYTES", 2_000_000, minimum=1024)
LODE_MAX_QUERY_CHARS = env.env_int("LODE_MAX_QUERY_CHARS", 1000, minimum=16)

# Chunking (retrieval/chunking.py): passage size bound in words and overlap between windows.
LODE_CHUNK_MAX_WORDS = env.env_int("LODE_CHUNK_MAX_WORDS", 200, minimum=20)
LODE_CHUNK_OVERLAP_WORDS = env.env_int("LODE_CHUNK_OVERLAP_WORDS", 20, minimum=0)

# Background work (Django tasks): the database-backed queue run by `manage.py db_worker`.
# LODE_TASKS_BACKEND=django.tasks.backends.immediate.ImmediateBackend runs tasks inline instead.
TASKS = {
    "default": {
        "BACKEND": env.env_str("LODE_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}

# Dense retrieval (retrieval/embeddings.py, retrieval/vectors.py; see ../shared/MODELS.md).
# LODE_MODEL_DIR: a ready model folder to use as-is; empty means assemble one into
# <data>/models/ from the pinned model packages.
LODE_MODEL_DIR = env.env_str("LODE_MODEL_DIR", "").strip()
# CHROMA_URL (e.g. http://127.0.0.1:8001) selects a Chroma server; empty means the embedded
# PersistentClient at LODE_CHROMA_PATH.
CHROMA_URL = env.env_str("CHROMA_URL", "").strip()
LODE_CHROMA_PATH = DATA_DIR / "chroma"
# Collection names are <prefix>_<manifest key>, so several lode instances can share a server.
LODE_CHROMA_COLLECTION_PREFIX = env.env_str("LODE_CHROMA_COLLECTION_PREFIX", "lode")
# Upper bound on one Chroma server request, so a dead server degrades search quickly.
LODE_CHROMA_TIMEOUT_SECONDS = env.env_int("LODE_CHROMA_TIMEOUT_SECONDS", 5, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"lode": {"handlers": ["console"], "level": env.env_str("LODE_LOG_LEVEL", "INFO")}},
}

# Rerank stage (retrieval/rerank.py): "learned" (default, ships with lode), "cross-encoder"
# (needs a local model folder) or "off".
LODE_RERANK = env.env_choice("LODE_RERANK", "learned", ("learned", "cross-encoder", "off"))
LODE_RERANK_MODEL_DIR = env.env_str("LODE_RERANK_MODEL_DIR", "")
LODE_RERANK_MODEL_NAME = env.env_str("LODE_RERANK_MODEL_NAME", "Xenova/ms-marco-MiniLM-L-6-v2")

# --- Cited answers (issue 5) ------------------------------------------------------------
# An OpenAI-compatible chat endpoint (`…/v1`); empty means the offline extractive answerer.
LODE_LLM_BASE_URL = env.env_str("LODE_LLM_BASE_URL", "").strip().rstrip("/")
LODE_LLM_MODEL = env.env_str("LODE_LLM_MODEL", "").strip()
LODE_LLM_API_KEY = env.env_str("LODE_LLM_API_KEY", "")
LODE_LLM_TIMEOUT_SECONDS = env.env_int("LODE_LLM_TIMEOUT_SECONDS", 60, minimum=1)
LODE_LLM_MAX_RETRIES = env.env_int("LODE_LLM_MAX_RETRIES", 2, minimum=0)
LODE_LLM_MAX_TOKENS = env.env_int("LODE_LLM_MAX_TOKENS", 1024, minimum=16)
# How JSON output is requested: OpenAI's `json_schema` (default), or `json_object` with the
# schema beside it for servers that only know that form (llama-cpp-python's server).
LODE_LLM_RESPONSE_FORMAT = env.env_choice(
    "LODE_LLM_RESPONSE_FORMAT", "json_schema", ("json_schema", "json_object")
)
# Entailment stage of the faithfulness gate: none (fail closed), a local cross-encoder
# folder, or an LLM judge over the same endpoint as the answerer.
LODE_ENTAILMENT = env.env_choice("LODE_ENTAILMENT", "none", ("none", "cross-encoder", "llm-judge"))
LODE_ENTAILMENT_MODEL_DIR = env.env_str("LODE_ENTAILMENT_MODEL_DIR", "")
LODE_ENTAILMENT_MODEL_NAME = env.env_str(
    "LODE_ENTAILMENT_MODEL_NAME", "Xenova/ms-marco-MiniLM-L-6-v2"
)
# Evidence pack budget: items and characters of passage text handed to an answerer.
LODE_ASK_MAX_ITEMS = env.env_int("LODE_ASK_MAX_ITEMS", 12, minimum=1)
LODE_ASK_MAX_CHARS = env.env_int("LODE_ASK_MAX_CHARS", 12_000, minimum=200)

# --- Externals (issue 6) ----------------------------------------------------------------
# Largest file a source scan reads (ADR 0005's ingest.max_file_bytes); bigger is a failure
# and the previous snapshot stays searchable.
LODE_SOURCE_MAX_FILE_BYTES = env.env_int("LODE_SOURCE_MAX_FILE_BYTES", 2_000_000, minimum=1024)
# URL sources: one GET with these bounds; redirects are followed, each hop re-checked.
LODE_FETCH_TIMEOUT_SECONDS = env.env_int("LODE_FETCH_TIMEOUT_SECONDS", 20, minimum=1)
LODE_FETCH_MAX_BYTES = env.env_int("LODE_FETCH_MAX_BYTES", 5_000_000, minimum=1024)
# Private, loopback, link-local and reserved addresses are refused (SSRF) unless this is on.
LODE_FETCH_ALLOW_PRIVATE = env.env_bool("LODE_FETCH_ALLOW_PRIVATE", False)
# Folder sources read the server's disk: staff may mirror any folder, other accounts only
# folders inside these roots (comma-separated absolute paths; empty = staff only).
LODE_SOURCE_FOLDER_ROOTS = env.env_list("LODE_SOURCE_FOLDER_ROOTS", [])
# Push-triggered re-index: largest webhook body accepted (larger → 413, unread).
LODE_WEBHOOK_MAX_BODY_BYTES = env.env_int("LODE_WEBHOOK_MAX_BODY_BYTES", 1_000_000, minimum=1024)
