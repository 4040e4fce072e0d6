"""``png_bytes``: what Pillow reads back is the image given, RGB when opaque, RGBA otherwise,
at the resolution given; a figure written by ``save_png`` has the pixels ``savefig`` draws."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from specscope.reports.png import png_bytes


def _image(alpha: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, (7, 5, 4), dtype=np.uint8)  # [height, width, 4]
    rgba[..., 3] = 255
    rgba[3, 2, 3] = alpha
    return rgba


@pytest.mark.parametrize("alpha, mode", [(255, "RGB"), (128, "RGBA")])
def test_round_trip(alpha, mode):
    rgba = _image(alpha)
    with Image.open(io.BytesIO(png_bytes(rgba, 100))) as im:
        assert im.mode == mode and im.size == (5, 7)
        assert im.info["dpi"] == pytest.approx((100, 100), abs=0.01)
        assert (np.asarray(im.convert("RGBA")) == rgba).all()


def test_same_pixels_as_savefig(tmp_path):
    from specscope.reports.style import new_figure, save_png

    fig = new_figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.plot([0, 1, 2], [2, 0, 1], marker="o")
    ax.set_title("µs → 1.5")
    fig.savefig(tmp_path / "pillow.png", dpi=100)
    save_png(fig, tmp_path / "ours.png")
    with Image.open(tmp_path / "pillow.png") as a, Image.open(tmp_path / "ours.png") as b:
        assert a.size == b.size == (400, 300)
        assert (np.asarray(a.convert("RGB")) == np.asarray(b.convert("RGB"))).all()
