"""The digits data read from scikit-learn's bundled file (without importing scikit-learn)
is exactly what ``load_digits`` returns."""

from __future__ import annotations

import numpy as np

from suite.datasets.digits import load_bundled_digits


def test_the_bundled_file_is_exactly_load_digits() -> None:
    from sklearn.datasets import load_digits

    pixels, target = load_bundled_digits()
    digits = load_digits()
    np.testing.assert_array_equal(pixels, digits.data)
    np.testing.assert_array_equal(target, digits.target)

