"""The Datalog wing: the rule language as a chain of its own.

Rule text → AST (`lang`, with the language's values) → checks and strata (`analysis`) →
engines (`engine`); `facts` reads fact files into the int64 columns every engine shares.
The tensor program, the planner, codegen and the runtime stand on this wing; nothing here
imports them.
"""
