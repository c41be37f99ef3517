"""The query REPL (`tprules repl DIR`), one concern per module:

- `session.py`: the loaded workspace and the commands (a line in, an answer out);
- `answers.py`: answers as tables or JSON (queries, rules, facts, relations, plan);
- `complete.py`: completion of commands, relation names and symbols;
- `terminal.py`: the prompt_toolkit loop on a terminal, the line loop when piped.
"""
