"""Shared set-up of the test suite: every test starts from the same random and thread state.

Tests that train or compare float results run on one thread and from a seeded global
generator; both are restored afterwards, so no test's settings leak into another file.
The suite is laid out like the package: ``library/`` tests ``posenc``, ``book/`` tests
``posenc.book``, ``prose/`` asserts the numbers and claims the chapters state, and
``site/`` checks the built book in a browser.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded_single_thread():
    threads = torch.get_num_threads()
    state = torch.random.get_rng_state()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    yield
    torch.set_num_threads(threads)
    torch.random.set_rng_state(state)


def _meta_then_reset(factory):
    """``(fresh, module)``: ``factory()`` built normally and built on the meta device, moved to the CPU and
    reset with ``reset_parameters()``, each after ``torch.manual_seed(0)``; the two must be equal."""
    torch.manual_seed(0)
    fresh = factory()
    with torch.device("meta"):
        module = factory()
    assert all(t.device.type == "meta" for t in (*module.parameters(), *module.buffers()))
    module.to_empty(device="cpu")
    torch.manual_seed(0)
    module.reset_parameters()  # the module's own reset re-initialises its children
    return fresh, module


@pytest.fixture
def meta_then_reset():
    """The check of a module's ``reset_parameters`` after meta-device initialisation (see ``_meta_then_reset``)."""
    return _meta_then_reset
