"""OpInfos of src/arrays/ops/arithmetic.py."""
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import ALL, binary_samples

register(
    OpInfo("add", np.add, ALL, binary_samples, nin=2, hypothesis_shapes=True),
)
