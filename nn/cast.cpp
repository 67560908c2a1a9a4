#include "nn/cast.h"

#include "autograd/grad_mode.h"

namespace ng::nn {

void cast_(Module& module, DType dtype) {
  NG_CHECK(is_floating(dtype), "cast_", "expected a floating dtype, got ", dtype_name(dtype));
  NoGradGuard no_grad;
  for (auto& [name, t] : module.state_dict()) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) continue;
    NG_CHECK(t.is_leaf(), "cast_", "'", name, "' is not a leaf tensor");
    Tensor converted = t.detach().to(dtype).contiguous();
    TensorImpl& impl = t.impl();  // swap the contents of the shared impl: every handle sees the change
    impl.storage = converted.impl().storage;
    impl.shape = converted.shape();
    impl.strides = converted.strides();
    impl.offset = converted.offset();
    impl.dtype = dtype;
    impl.grad.reset();
  }
}

}  // namespace ng::nn
