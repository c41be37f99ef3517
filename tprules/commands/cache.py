"""`tprules cache [--clear]`: where the cache lives, how large it is, and how to clear it.

The cache (`$TPRULES_CACHE_DIR`, else `$XDG_CACHE_HOME/tprules`, else `~/.cache/tprules`)
holds the generated kernels with Numba's machine code beside them (`kernels/`) and the
checked rule programs (`rules/`); everything in it is made again when missing, so clearing
it only costs the next run its compiles."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from . import common

KERNELS = {"cpu": "CPU kernels: source and Numba's machine code", "cuda": "CUDA kernels: source and machine code",
           "sim": "kernels for Numba's CUDA simulator", "nvvm": "CUDA kernels built by `tprules compile`"}


def add_parser(sub):
    p = sub.add_parser("cache", help="say where the cache lives and how large it is; --clear empties it")
    p.add_argument("--clear", action="store_true", help="delete everything in the cache (made again when needed)")
    common.add_format(p)
    return p


def usage(root: Path) -> list[dict]:
    """Each part of the cache: its folder, files and bytes (`other`: anything else there)."""
    seen: set[Path] = set()
    rows = []
    flavours = sorted(d.name for d in (root / "kernels").iterdir() if d.is_dir()) if (root / "kernels").is_dir() else []
    parts = [(f"kernels/{f}", KERNELS.get(f.split("_")[0], "kernels")) for f in flavours or ["cpu"]]
    for part, what in [*parts, ("rules", "checked rule programs"), ("", "other files")]:
        files = [f for f in (root / part).rglob("*") if f.is_file() and f not in seen] if (root / part).is_dir() else []
        seen.update(files)
        rows.append({"part": part or ".", "what": what, "files": len(files), "bytes": sum(f.stat().st_size for f in files)})
    return rows


def run(args) -> int:
    from ..config import cache_dir
    from ..runtime.report import size

    root = cache_dir()
    rows = usage(root)
    total = sum(r["bytes"] for r in rows)
    if args.clear:
        if root.is_dir():
            shutil.rmtree(root, ignore_errors=True)
        if args.format == "json":
            common.emit_json({"location": str(root), "cleared": True, "bytes": total})
        else:
            print(f"cleared {root} ({size(total)} in {sum(r['files'] for r in rows)} files)")
        return 0
    if args.format == "json":
        common.emit_json({"location": str(root), "bytes": total, "parts": rows})
        return 0
    lines = [f"cache {root}: {size(total)} in {sum(r['files'] for r in rows)} files"
             + ("" if root.is_dir() else " (not made yet)")]
    width = max(len(r["part"]) for r in rows)
    for r in rows:
        if r["files"] or r["part"] != ".":
            lines.append(f"  {r['part'].ljust(width)}  {size(r['bytes']).rjust(9)}  {str(r['files']).rjust(6)} files  "
                         f"{r['what']}")
    lines.append("set TPRULES_CACHE_DIR to move it; clear it with `tprules cache --clear` (or delete the folder): "
                 "the next run compiles its kernels again")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
