"""Serving: imported programs run as a serving engine runs them, over the runtime (beside
the pipeline, after frontends/: it imports a prefill and a decode step, then runs them).

generate.py   `tprules generate`: the prefill and each decode step's greedy token in this
              process, the caches fed back, checked against transformers' generate;
ranks.py      `tprules generate --ranks N`: the same loop on N MPI ranks, each holding its
              chips' caches.
"""
