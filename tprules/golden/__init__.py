"""Regression tests on rule outputs: golden snapshots and rule-set diffs.

- `corpus.py`: the programs (facts/ but the shim library), the shims each is meant for,
  and the snapshot folder of each (program, shim);
- `snapshot.py`: a snapshot (`legal`, `refused`, the plan's groups) as sorted TSV files;
- `changes.py`: changed verdicts between two sides, each tuple with its one-line
  explanation (tprules.explain.oneline) on every side that has a model;
- `check.py`: check programs against their snapshots, or rewrite them (`--update`);
- `rulediff.py`: every verdict that differs between two rule sets (`tprules diff`);
- `render.py`: both as text, with what to run to accept a change.
"""
