"""Take docs/editor.md's screenshots: Neovim under tmux, with docs/editor/tprules.lua, on the
project's rules/ and facts/llama-layer-tp4; each screen captured (`tmux capture-pane -e`)
and drawn to PNG with its colours (rich reads the escapes, Pillow draws the cells).

    python benchmarks/nvim_screenshots.py [--out docs/editor] [--size 112x30]

Needs nvim, tmux, and Pillow (which matplotlib, the `bench` extra, brings). Nothing is
saved to the rule files: every edit is made in the buffer and undone, and Neovim quits
with :qa!.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION = "tprules-shots"
BG, FG = (30, 30, 30), (212, 212, 212)


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def keys(*keys: str) -> None:
    for k in keys:
        tmux("send-keys", "-t", SESSION, k)
        time.sleep(0.15)


def screen() -> str:
    return tmux("capture-pane", "-p", "-e", "-t", SESSION)


def wait_for(text: str, timeout: float = 30.0, gone: bool = False) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        plain = subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True).stdout
        if (text in plain) != gone:
            time.sleep(0.3)  # let the screen settle
            return screen()
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {text!r} on the screen:\n{plain}")


def render(ansi: str, out: Path, cols: int, rows: int) -> None:
    """The captured screen as a PNG: one monospace cell per character, with its colours."""
    import matplotlib
    from PIL import Image, ImageDraw, ImageFont
    from rich.color import Color
    from rich.text import Text

    font_path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSansMono.ttf"
    font = ImageFont.truetype(str(font_path), 14)
    bold = ImageFont.truetype(str(font_path.with_name("DejaVuSansMono-Bold.ttf")), 14)
    cw, ch = int(font.getlength("M")) + 1, 18
    image = Image.new("RGB", (cols * cw + 16, rows * ch + 16), BG)
    draw = ImageDraw.Draw(image)

    def rgb(color: Color | None, default):
        return default if color is None or color.is_default else tuple(color.get_truecolor())

    for y, line in enumerate(ansi.split("\n")[:rows]):
        text = Text.from_ansi(line)
        styles = [None] * len(text.plain)
        for span in text.spans:
            for i in range(span.start, min(span.end, len(styles))):
                styles[i] = span.style if styles[i] is None else styles[i] + span.style
        for x, char in enumerate(text.plain[:cols]):
            style = styles[x]
            fg = rgb(style.color, FG) if style is not None and not isinstance(style, str) else FG
            bg = rgb(style.bgcolor, BG) if style is not None and not isinstance(style, str) else BG
            if style is not None and not isinstance(style, str) and style.reverse:
                fg, bg = bg, fg
            px, py = 8 + x * cw, 8 + y * ch
            if bg != BG:
                draw.rectangle([px, py, px + cw, py + ch], fill=bg)
            if char.strip():
                use = bold if style is not None and not isinstance(style, str) and style.bold else font
                draw.text((px, py + 1), char, font=use, fill=fg)
    image.save(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "editor")
    ap.add_argument("--size", default="112x30")
    args = ap.parse_args()
    cols, rows = map(int, args.size.split("x"))
    tprules = Path(sys.executable).parent / "tprules"
    setup = (f"let g:tprules_command='{tprules}' | let g:tprules_program='facts/llama-layer-tp4' | set laststatus=2 "
             "| set shortmess+=F nohlsearch cursorline completeopt=menuone,noinsert")
    # quieter colours than Neovim 0.7's magenta floats, for the pictures only
    colours = ("hi NormalFloat ctermbg=237 ctermfg=252 | hi Pmenu ctermbg=237 ctermfg=252 | hi PmenuSel ctermbg=31 "
               "ctermfg=255 | hi CursorLine cterm=NONE ctermbg=236 | hi StatusLine ctermbg=31 ctermfg=255 cterm=bold")
    command = (f"nvim -n --clean --cmd {shlex.quote(setup)} -u docs/editor/tprules.lua -c {shlex.quote(colours)} "
               "rules/tp.dl")
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    tmux("new-session", "-d", "-s", SESSION, "-x", str(cols), "-y", str(rows), "-c", str(ROOT),
         f"env PYTHONPATH={ROOT} TERM=xterm-256color {command}")
    args.out.mkdir(parents=True, exist_ok=True)
    shot = lambda name, ansi: render(ansi, args.out / f"{name}.png", cols, rows)  # noqa: E731
    try:
        wait_for("tp.dl")
        keys(":call search('spans_chips: a fused op')", "Enter", "zt")
        shot("lenses", wait_for("refuses"))
        keys(":%s/on_chip(A, CA)/on_chipp(A, CA)/", "Enter")
        wait_for("rule error")
        keys(":lua vim.diagnostic.open_float()", "Enter")
        shot("diagnostics", wait_for("not declared"))
        keys("j", "u")
        wait_for("not declared", gone=True)
        keys(":call search('member(F, O)')", "Enter", "K")
        shot("hover", wait_for("holds statement"))
        keys("j", "k")
        keys(":call search('is_fold(O)')", "Enter", "gd")
        shot("definition", wait_for("place.dl"))
        keys("C-o")
        wait_for("tp.dl")
        keys(":call search('member(F, O)')", "Enter", "gr")
        shot("references", wait_for("base.dl|"))
        keys(":cclose", "Enter")
        keys("gO")
        shot("symbols", wait_for("[Function]"))
        keys(":cclose", "Enter")
        keys("G", "o", 'q(F) :- refused(F, "', "C-x", "C-o")
        shot("completion", wait_for("too_many_matmuls"))
        keys("Escape", "u")
        keys("G", "o", 'q(F) :- legal("', "C-x", "C-o")
        shot("completion-constants", wait_for("constant of legal.0"))
        keys("Escape", "u")
        keys(":qa!", "Enter")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    print(f"wrote {', '.join(sorted(p.name for p in args.out.glob('*.png')))} in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
