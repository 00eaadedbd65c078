"""Start-up checks for the backends settings name: `LODE_ANSWERER`, `LODE_ENTAILMENT` and
`LODE_LEXICAL_BACKEND` each resolve (an alias or a dotted import path) to something that has
what its Protocol asks for. A bad name stops `manage.py check` (and so `runserver`,
`migrate` and the bootstrap) with the setting and the reason, instead of failing requests.
Registered by `retrieval.web.apps.RetrievalConfig.ready`; each check imports its backend's
module when it runs, so starting a process does not load the answer pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.db import connection

from retrieval.index.backend_paths import BackendPathError


def _backend_error(build: Callable[[], Any], check_id: str, choices: str) -> list[Error]:
    try:
        build()
    except BackendPathError as exc:
        return [Error(str(exc), id=check_id, hint=f"Use {choices}.")]
    return []


def _aliases(names: Any) -> str:
    return ", ".join(sorted(names)) + ", or the dotted import path of your own"


@register()
def answerer_resolves(app_configs: Any, **kwargs: Any) -> list[Error]:
    from retrieval.answer.answerers import ANSWERER_ALIASES, get_answerer

    return _backend_error(
        get_answerer, "lode.E003", _aliases(["auto", *ANSWERER_ALIASES]) + " Answerer class"
    )


@register()
def entailment_scorer_resolves(app_configs: Any, **kwargs: Any) -> list[Error]:
    from retrieval.answer.entailment import ENTAILMENT_ALIASES, get_entailment_scorer

    return _backend_error(
        get_entailment_scorer,
        "lode.E004",
        _aliases(["none", *ENTAILMENT_ALIASES]) + " EntailmentScorer class or factory",
    )


@register()
def lexical_backend_resolves(app_configs: Any, **kwargs: Any) -> list[Error]:
    from retrieval.index.lexical import VENDOR_BACKENDS, backend_for

    return _backend_error(
        lambda: backend_for(settings.LODE_LEXICAL_BACKEND, connection.vendor),
        "lode.E005",
        "an empty value (by database vendor: "
        + ", ".join(f"{vendor} → {path}" for vendor, path in VENDOR_BACKENDS.items())
        + ") or the dotted path of a lexical backend module",
    )
