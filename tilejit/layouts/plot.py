"""Render a Fragment as a PNG grid: each cell shows ``T<thread>`` / ``v<slot>``,
coloured by thread.  matplotlib is optional and imported only when plotting.

    plot_fragment(MMA_M16N8K16_F16_A, "a_frag.png")
"""
from __future__ import annotations

import os

from tilejit.layouts.fragment import Fragment

_TEXT_CELLS = 2048  # above this many cells the labels are unreadable; colours only


def plot_fragment(fragment: Fragment, path: str | os.PathLike, *, title: str | None = None,
                  dpi: int = 100) -> str:
    """Write ``fragment`` (2-D) as a PNG to ``path`` and return the path."""
    try:
        from matplotlib import colormaps
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # optional dependency
        raise ImportError("plot_fragment needs matplotlib: pip install matplotlib") from e
    if len(fragment.shape) != 2:
        raise ValueError(f"plot_fragment: expected a 2-D fragment, got shape {fragment.shape}")
    rows, cols = fragment.shape
    cells = [[fragment(i, j) for j in range(cols)] for i in range(rows)]
    cmap = colormaps["tab20"]
    # Threads cycle through 20 colours; lighten every other cycle so neighbours
    # 20 apart (e.g. lanes 0 and 20) stay distinguishable.
    def colour(t: int) -> tuple[float, float, float]:
        r, g, b, _ = cmap(t % 20)
        k = 0.55 if (t // 20) % 2 else 1.0
        return (1 - k * (1 - r), 1 - k * (1 - g), 1 - k * (1 - b))

    image = [[colour(t) for t, _ in row] for row in cells]
    cell = 0.55 if max(rows, cols) <= 32 else max(0.06, 24 / max(rows, cols))
    fig = Figure(figsize=(max(3.0, cols * cell + 1), max(2.5, rows * cell + 1)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.imshow(image, interpolation="nearest", aspect="equal")
    if rows * cols <= _TEXT_CELLS:
        size = max(3.0, min(8.0, 72 * cell / 3.2))
        for i, row in enumerate(cells):
            for j, (t, s) in enumerate(row):
                ax.text(j, i, f"T{t}\nv{s}", ha="center", va="center", fontsize=size)
    if max(rows, cols) <= 32:
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=7)
    ax.set_xlabel("col")
    ax.set_ylabel("row")
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    rep = f", replicate={fragment.replicate}" if fragment.replicate > 1 else ""
    ax.set_title(title or f"{fragment.name or 'fragment'} {rows}x{cols}{rep}", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=dpi)
    return os.fspath(path)
