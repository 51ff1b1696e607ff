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
