"""Rule text → AST: the Soufflé-subset grammar (`souffle.lark`), its parser and its printer,
and the language's values: what every operator and functor computes (`values`), records
and ADTs as values (`record_values`), and the value of a constant term (`constant`).

Import `tprules.datalog.lang.parser` only when text must be parsed: lark stays out of start-up
when checked rules are reused from the cache.
"""
