"""Serving: imported programs run as a serving engine runs them, over the runtime.

generate.py  `tprules generate`: a prefill and decode steps imported, planned and compiled
             once, run greedily with each step's cache fed back, against transformers'
             own greedy `generate`
ranks.py     the same on N MPI ranks (`--ranks N`), as `tprules run --ranks N` runs one program
"""
