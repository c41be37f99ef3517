"""Rewrite the own-shim cases: `python tests/data/own_shim/generate.py`.

Each case is a copy of facts/megatron-mlp-tp2 whose folder describes a shim itself (SPEC §2:
a program's description of a shim shadows the library's shim of that name as a whole). The
folders are the test data; this script only documents how they were made. Each case's
expected output (`expected.out`, `expected.err`, `status`) was reviewed by hand.
"""
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[2]
EXAMPLE = PROJECT / "facts" / "megatron-mlp-tp2"
LIBRARY = PROJECT / "facts" / "shims"
H100 = "cuda-lane:h100:Bf16"
SHIM_FILES = ("shim", "supports", "limit", "quantized")


def library_lines(shim: str) -> dict[str, list[str]]:
    """The library's lines of one shim, by relation: what a user copies into a program folder."""
    out = {}
    for rel in SHIM_FILES:
        lines = (LIBRARY / f"{rel}.facts").read_text().splitlines()
        out[rel] = [line for line in lines if line.split("\t")[0] == shim]
    return out


def renamed(lines: dict[str, list[str]], old: str, new: str) -> dict[str, list[str]]:
    return {rel: [line.replace(old, new, 1) for line in ls] for rel, ls in lines.items()}


def changed(lines: dict[str, list[str]]) -> dict[str, list[str]]:
    """One level, one limit and one quantized operand differ from the library's, each
    seen in one verdict: `add` runs alone (bias_residual), at most 3 members (everything),
    matmul reads operand 0 as int8 (gelu_mm2_1)."""
    out = {rel: list(ls) for rel, ls in lines.items()}
    out["supports"] = [line.replace("\tadd\tfused", "\tadd\talone") for line in out["supports"]]
    out["limit"] = [line.replace("\tmax_members\t16", "\tmax_members\t3") for line in out["limit"]]
    out["quantized"] = out["quantized"] + [f"{H100}\tmatmul\t0\tint8_two_pass"]
    return out


CASES = {
    # The program's copy of a library shim, changed: every entry point answers from it.
    "own_copy_changed": changed(library_lines(H100)),
    # A shim the library does not have, described whole by the program.
    "own_new_shim": renamed(library_lines(H100), H100, "cuda-lane:b200:Fp8"),
    # One source answers a class twice: an error with both lines.
    "answers_twice": {**library_lines(H100),
                      "supports": library_lines(H100)["supports"] + [f"{H100}\tgelu\talone"]},
    # The program names a shim that nothing describes.
    "named_nowhere": {"shim": ["cuda-lane:a100:Tf32"]},
    # A program that describes a library shim only in part: its description stands alone.
    "partial_description": {"shim": [H100], "limit": [f"{H100}\tmax_members\t4"]},
    # The program describes a library shim without naming it in a shim.facts of its own
    # (shim.facts only names shims; the library names this one).
    "described_not_named": {**changed(library_lines(H100)), "shim": []},
}


def main() -> None:
    for name, shim_files in CASES.items():
        program = HERE / name / "program"
        if program.exists():
            shutil.rmtree(program)
        shutil.copytree(EXAMPLE, program)
        for rel, lines in shim_files.items():
            path = program / f"{rel}.facts"
            if lines:
                path.write_text("".join(line + "\n" for line in lines))
            elif path.exists():
                path.unlink()
        print(f"wrote {program.relative_to(PROJECT)}")


if __name__ == "__main__":
    main()
