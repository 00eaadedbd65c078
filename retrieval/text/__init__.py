"""The text primitives every stage shares, one module per concern: cutting words and tokens
(`tokens`), their index form (`stemming`), negation cues (`negation`), Markdown blocks
(`markdown`), sentences (`sentences`) and Unicode normal forms (`normalise`). One home, because
the gate is only as correct as the tokeniser every stage shares; tests/retrieval/test_text.py
fails when a copy of a primitive appears elsewhere. Pure: no database, model or network.
"""
