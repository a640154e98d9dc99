"""Test configuration shared by `pytest tests/` and `pytest --nbval-lax notebooks/`.

Notebook cells tagged `gpu` are skipped when CUDA is absent; cells tagged `online` (they need the
internet, e.g. to download GPT-2's weights) are always skipped under the tests.
"""

import pytest

from kimik3_lessons.__main__ import skip_reason


def pytest_collection_modifyitems(config, items):
    for item in items:
        cell = getattr(item, "cell", None)  # nbval's notebook-cell items carry their cell
        if cell is None:
            continue
        reason = skip_reason(cell, online=False)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
