"""The text report of `tprules run`: a header, kernels per chip, outputs against the reference."""

from __future__ import annotations

import io


def seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _reference_ok(o) -> bool:
    return (o.max_abs_err if o.dtype in ("i8", "i32", "i64") else o.max_rel_err) <= o.tolerance


def render_text(report, width: int = 100, color: bool = False) -> str:
    console, buf = make_console(width, color)
    print_plan(console, report, f"run {report.program} on {report.device}   shim {report.shim} ({report.shim_source})")
    console.print()
    console.print(chip_table(report))
    console.print()
    print_outputs(console, report)
    console.print(f"compile {seconds(report.compile_s)}, run {seconds(report.run_s)}, "
                  f"{report.transfers} transfer{'' if report.transfers == 1 else 's'} ({size(report.moved_bytes)}); "
                  f"{verdict(report)}", soft_wrap=True)
    return buf.getvalue()


def make_console(width: int = 100, color: bool = False):
    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, width=width, color_system="standard" if color else None, highlight=False), buf


def table(*columns: str, right: tuple[str, ...] = ()):
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left")
    return t


def print_plan(console, report, title: str) -> None:
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(report.kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    console.print(title, soft_wrap=True)
    console.print(f"plan: {report.groups} groups -> {report.kernels} kernels ({kinds}); "
                  f"{report.compiled} distinct source{'' if report.compiled == 1 else 's'}"
                  + (f", {report.uncompiled} run by numpy with no compile" if report.uncompiled else ""), soft_wrap=True)


def chip_table(report):
    chips = table("chip", "kernels", "launches", "busy", "threads", right=("kernels", "launches", "busy", "threads"))
    for c in report.chips:
        chips.add_row(str(c.chip), str(c.kernels), str(c.launches), seconds(c.busy_s),
                      "-" if c.threads is None else str(c.threads))
    return chips


def output_table(report):
    outs = table("output", "shape", "chips", "max abs err", "max rel err", "tolerance", "")
    for o in report.outputs:
        ok = _reference_ok(o)
        outs.add_row(o.tensor, "x".join(map(str, o.shape)) or "scalar", ",".join(map(str, o.chips)),
                     f"{o.max_abs_err:.2g}", f"{o.max_rel_err:.2g}", f"{o.tolerance:g}", "ok" if ok else "MISMATCH")
    return outs


def print_outputs(console, report) -> None:
    """The outputs against the reference, then against expected/ when the program has it."""
    for shown in (output_table(report), expected_table(report)):
        if shown is not None:
            console.print(shown)
            console.print()


def expected_table(report):
    """Outputs against DIR/expected/ (an import's torch forward), or None when there is none."""
    expected = [o for o in report.outputs if o.expected]
    if not expected:
        return None
    rows = table("output", "against", "max abs err", "max rel err", "tolerance", "")
    for o in expected:
        e = o.expected  # e.path names the program folder, which the header names already
        rows.add_row(o.tensor, f"expected/{o.tensor}.npy", f"{e.max_abs_err:.2g}", f"{e.max_rel_err:.2g}",
                     f"{o.tolerance:g}", "ok" if e.ok else "MISMATCH")
    return rows


def verdict(report) -> str:
    bad = [o.tensor for o in report.outputs if not o.ok]
    n = len(report.outputs)
    expected = any(o.expected for o in report.outputs)
    if bad:
        return (f"MISMATCH: {len(bad)} of {n} outputs differ from the reference{' or expected/' if expected else ''} "
                f"({', '.join(bad)})")
    found = "the output matches the reference" if n == 1 else f"all {n} outputs match the reference"
    return found + (" and expected/" if expected else "")
