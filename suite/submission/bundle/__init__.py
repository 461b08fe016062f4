"""Signed result bundles: keys (``keys``), DSSE envelopes (``dsse``), the in-toto
Statement and our predicate (``statement``), the deterministic archive (``archive``)
and the verifier (``verify``). Only ``cryptography`` is needed.
"""
