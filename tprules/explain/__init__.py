"""Explanations, a pass beside evaluation (like Soufflé's provenance): it reads an evaluated
model and the checked rules, never the engine's internals.

- `query.py`: read an atom or a query body typed by the user, checked like rule text;
- `solve.py`: evaluate bodies over the model, one binding at a time;
- `proof.py`: the explanation IR (proof nodes, why-not attempts) and its JSON;
- `prove.py`: proof trees of tuples that hold, with the depth limit and elided ids;
- `whynot.py`: why an atom does not hold, naming the tuples that block a negation;
- `explainer.py`: the service commands use (`explain`, `why_not`, `subproof`);
- `render.py`: rich trees, colour off when not a terminal, ASCII guides on request;
- `oneline.py`: a verdict tuple's explanation in one line, for diffs (`golden`, `diff`).
"""
