"""Rule text → AST: the Soufflé-subset grammar (`souffle.lark`), its parser and its printer.

Import `tprules.datalog.lang.parser` only when text must be parsed: lark stays out of start-up
when a cached checked program is reused.
"""
