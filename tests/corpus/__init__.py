"""The differential corpus: small functions run eagerly and through minidynamo, compared.

To add a case, write a plain function next to its category and add ``single(fn, *inputs)``
(must be one graph) or ``fallback(fn, *inputs)`` (must run eagerly, with a reason) to that
category's table; ``helpers.check`` does the rest. Run: ``pytest -q tests/corpus``.
"""
