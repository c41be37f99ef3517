"""tprules: declarative fusion legality for tensor-parallel programs.

Rule text → AST (`lang`) → checks and strata (`analysis`) → engines (`engine`) →
verdicts (`verdicts`) → planner (`planner`) → kernels (`codegen`) → devices (`runtime`);
the REPL, reports, golden snapshots and the Shim API sit beside that pipeline.
"""

__version__ = "0.1.0"
