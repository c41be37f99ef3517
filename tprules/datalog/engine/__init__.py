"""Engines that evaluate a checked program: the compiled set-at-a-time evaluator (fast path)
and pyDatalog (the reference), plus proofs over an evaluated model."""
