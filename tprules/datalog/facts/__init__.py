"""Fact files → int64 columns: the symbol table (`columns`), the fact base with each row's
file and line (`base`), the columnar and line readers (`scan`, `reader`), and Soufflé's
`.input`/`.output` IO for `tprules eval` (`souffle_io`)."""
