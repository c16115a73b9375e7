"""Benchmarks: each figure beside its baseline, measured in the same run.

``python -m bench`` (``make bench``) runs every comparison and prints one
table each; ``--quick`` runs the same code on small counts as a smoke test.
"""
