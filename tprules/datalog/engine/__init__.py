"""Engines that evaluate checked rules; each has `evaluate(facts, targets=None, base=None, only=None)`.

options.py          the engines by name (`--engine fast | compiled | pydatalog`), what each can do
model.py            a model: every relation's tuples after an evaluation, what every engine returns
choice.py           `choice-domain`: one tuple per key, the same in every engine
expressions.py      terms as Python expressions (the compiled engine's joins, pyDatalog's lambdas)

The fast engine, over numpy columns (the default):
keys.py             row keys and joins over int64 columns
column_values.py    terms computed over columns, with Soufflé's semantics
rule_run.py         a rule body evaluated set-at-a-time: a table of bindings, literal by literal
fast_model.py       its model: int64 rows, decoded into tuples when asked
fast.py             the engine: stratified, semi-naive, strata run on columns

The compiled engine, tuple-at-a-time (the fast engine's recursive strata with small rounds too):
compiled_rules.py   each rule compiled into a Python function of nested loops over hash indexes
compiled.py         the engine: stratified, semi-naive, over `Model`'s hash indexes

The references:
pydatalog_backend.py  pyDatalog, behind one object (the reference engine)
asp.py              clingo (the benchmarks and the exactness tests)
"""
