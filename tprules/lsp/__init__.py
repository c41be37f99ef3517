"""`tprules lsp`: a Language Server Protocol server for rule files, over stdio (pygls).

The server holds the rule folders the editor has open, each checked as one program by the
parser and checker the command line uses, and answers one LSP feature per module:

1. ruleset.py      a rule folder as the editor holds it: open buffers in place of files on disk,
                   parsed and checked (lang/, analysis/), indexed by relation and reason;
2. program.py      the configured program folder beside the rules: its model, tuple counts and
                   each rule's derived tuples (workspace.py, explain/solve.py);
3. diagnostics.py  every problem as a diagnostic with its range, severity and code;
4. navigation.py   definition, references, document symbols;
5. hover.py        a relation's declaration, columns, comment and tuple count;
6. completion.py   relations with their arity, reason codes, a column's constants;
7. lenses.py       a code lens per rule: what it refuses or derives in the program;
8. server.py       the pygls server: one handler per feature, calling the modules above.
"""
