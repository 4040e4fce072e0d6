"""The CUDA API names of :mod:`specscope.analysis.apicalls`: :func:`api_name` is the regex
:data:`VERSION_SUFFIX` stripped, in time of the suffix alone."""

from __future__ import annotations

import random

import pytest

from specscope.analysis.apicalls import VERSION_SUFFIX, api_name


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("cudaGraphLaunch_v10000", "cudaGraphLaunch"),
        ("cudaMemcpyAsync_ptsz_v7000", "cudaMemcpyAsync"),
        ("cudaLaunchKernel_ptsz", "cudaLaunchKernel"),
        ("cuLaunchKernel", "cuLaunchKernel"),
        ("x_v1_v7000", "x_v1"),  # (the last suffix only)
        ("x_ptds_v", "x_ptds_v"),  # (no digits: no version)
        ("x_v12a", "x_v12a"),
        ("x_v²", "x_v²"),  # (a digit that is no decimal: not the regex's \d)
        ("x_v٣", "x"),  # (an Arabic-Indic decimal digit: the regex's \d)
        ("cudaFree_v3020\n", "cudaFree\n"),  # ($ matches before a last newline)
        ("_v1", ""),
        ("", ""),
        ("aten::mm, sizes = [[8, 512]]_v", "aten::mm, sizes = [[8, 512]]_v"),
    ],
)
def test_api_name_strips_the_version_and_stream_suffixes(text, want):
    assert api_name(text) == want == VERSION_SUFFIX.sub("", text)


def test_api_name_is_the_regex_on_random_texts():
    """Texts of the suffixes' characters, any order: the same as the regex's substitution."""
    rng = random.Random(19)
    pieces = ["_", "v", "p", "t", "s", "z", "d", "1", "0", "x", "\n", "²", "_v", "_pt", "sz", "ds"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert api_name(text) == VERSION_SUFFIX.sub("", text), text
