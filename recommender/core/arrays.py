"""The array type the core's numeric modules share (online fits, the population, steps,
neighbours): one alias, so that a change of precision is made in one place."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
