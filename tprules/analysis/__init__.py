"""AST → checked program: static checks, stratification, candidate locality."""

from .program import CheckedProgram, check_program, load_rules

__all__ = ["CheckedProgram", "check_program", "load_rules"]
