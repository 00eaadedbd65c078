"""The provider rules ported from gitleaks (`redaction._GITLEAKS_RULES`, `_CONTEXT_RULES`):
each has a secret it redacts and a near miss it leaves alone in the corpus
(tests/secret_corpus.py `GITLEAKS_CASES`, run by tests/retrieval/answer/test_redaction.py),
and the module names gitleaks as the source of its patterns."""

from __future__ import annotations

from retrieval.answer import redaction
from retrieval.answer.redaction import redact
from tests.secret_corpus import GITLEAKS_CASES


def test_every_ported_rule_has_a_secret_and_a_near_miss_in_the_corpus():
    kinds = {kind for kind, _ in redaction._GITLEAKS_RULES}
    kinds |= {kind for kind, _, _ in redaction._CONTEXT_RULES}
    covered = {kind for _, kind, _, _, _ in GITLEAKS_CASES}
    assert kinds <= covered, sorted(kinds - covered)
    for case_id, kind, secret, text, near in GITLEAKS_CASES:
        redacted = redact(text)[0]
        assert f"[REDACTED:{kind}]" in redacted and secret not in redacted, case_id
        assert redact(near) == (near, 0), case_id


def test_heroku_and_discord_webhook_secrets_are_redacted_with_the_text_around_them():
    hook = "https://discord.com/api/webhooks/112233445566778899/" + "Ab3-_" * 13 + "x9Q"
    assert redact(f"post to {hook} now") == ("post to [REDACTED:discord-webhook] now", 1)
    key = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
    assert redact(f"heroku_api_key: '{key}'") == ("heroku_api_key: '[REDACTED:heroku-key]'", 1)
    # A UUID with no Heroku pair around it is an identifier, not a key.
    assert redact(f"request {key} failed") == (f"request {key} failed", 0)


def test_the_module_cites_gitleaks_as_the_source_of_its_patterns():
    doc = redaction.__doc__ or ""
    assert "gitleaks" in doc and "MIT" in doc
