# Writes the small .npy fixtures that tests/test_npy.cpp reads, using NumPy itself.
# Run once (needs numpy: python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy), commit the outputs.
# The C++ test never runs Python.
import numpy as np
import os

here = os.path.dirname(os.path.abspath(__file__))
np.save(os.path.join(here, "numpy_f32_2x3.npy"), (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 4)
np.save(os.path.join(here, "numpy_f64_2x1x3.npy"), np.array([[[1e-300, -0.0, np.pi]], [[np.inf, -np.inf, 1.5]]]))
np.save(os.path.join(here, "numpy_f16_4.npy"), np.array([1.0, 65504.0, 6e-8, -2.5], dtype=np.float16))
np.save(os.path.join(here, "numpy_i64_5.npy"), np.array([0, -1, 2**62, -(2**63), 7], dtype=np.int64))
np.save(os.path.join(here, "numpy_f32_scalar.npy"), np.float32(3.25))
np.save(os.path.join(here, "numpy_f64_0x3.npy"), np.zeros((0, 3)))
# A long shape: NumPy's spare spaces for the first dimension (21 - len(str(shape[0]))) push its header
# past 128 bytes, to 192 (save_npy wrote 128 until stop 48).
np.save(os.path.join(here, "numpy_f32_15_ones.npy"), np.full((1,) * 15, 2.5, dtype=np.float32))
