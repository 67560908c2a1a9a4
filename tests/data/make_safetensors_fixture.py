# Writes tests/data/python_fixture.safetensors with the Python safetensors library (one-off; the test
# suite reads the committed file and needs no Python). Run: python3 make_safetensors_fixture.py
#   pip install safetensors numpy   (made with safetensors 0.8.0, numpy 2.4.6)
import numpy as np
import safetensors
from safetensors import TensorSpec, serialize_file

arrays = {  # name: (safetensors dtype, shape, little-endian numpy array holding the bytes)
    "f32": ("float32", (2, 3), np.arange(6, dtype=np.float32) * 0.5 - 1),
    "f64": ("float64", (3,), np.array([np.pi, -np.e, 1e-300])),
    "f16": ("float16", (4,), np.array([1.0, -2.5, 65504, 6e-5], dtype=np.float16)),
    # numpy has no bfloat16: the raw bits of 1.0, -2.0, 0.15625
    "bf16": ("bfloat16", (3,), np.array([0x3F80, 0xC000, 0x3E20], dtype=np.uint16)),
    "i64": ("int64", (3,), np.array([-3, 0, 9007199254740993], dtype=np.int64)),
    "scalar": ("float32", (), np.array(7.25, dtype=np.float32)),
    "empty": ("float32", (0, 4), np.zeros((0, 4), dtype=np.float32)),
}
tensors = {k: TensorSpec(dtype=d, shape=s, data_ptr=a.ctypes.data, data_len=a.nbytes) for k, (d, s, a) in arrays.items()}
serialize_file(tensors, "python_fixture.safetensors",
               metadata={"source": "python safetensors " + safetensors.__version__, "note": "fixture"})
