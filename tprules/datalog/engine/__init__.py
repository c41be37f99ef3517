"""Engines that evaluate checked rules: the fast engine over numpy columns, the compiled
tuple-at-a-time evaluator, pyDatalog (the reference, behind one object) and clingo
(`asp`, for the benchmarks and the exactness tests)."""
