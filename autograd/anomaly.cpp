// Anomaly detection: the checks behind DetectAnomalyGuard (see anomaly.h).
#include "autograd/anomaly.h"

#include <cmath>
#include <sstream>

namespace ng {

bool all_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return true;
  const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  for (double v : host.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

std::string shapes_list(const std::vector<Shape>& shapes) {
  std::ostringstream os;
  for (size_t i = 0; i < shapes.size(); ++i) os << (i ? ", " : "") << shape_str(shapes[i]);
  return os.str();
}

void check_forward_anomaly(const Tensor& out, const std::string& node_name,
                           const std::vector<Tensor>& inputs) {
  if (all_finite(out)) return;

  // "MulBackward" -> "Mul": the op that ran forward.
  const std::string suffix = "Backward";
  std::string op = node_name;
  if (op.size() > suffix.size() && op.compare(op.size() - suffix.size(), suffix.size(), suffix) == 0)
    op.resize(op.size() - suffix.size());

  std::vector<Shape> shapes;
  std::ostringstream already;  // inputs that were not finite to begin with: the NaN came from upstream
  for (size_t i = 0; i < inputs.size(); ++i) {
    shapes.push_back(inputs[i].defined() ? inputs[i].shape() : Shape{});
    if (!all_finite(inputs[i]))
      already << " Input " << i << " already held NaN or Inf (it was made by an op that recorded no graph, "
              << "or is a leaf).";
  }
  fail("anomaly", "the forward of ", op, " (node ", node_name,
       ") produced NaN or Inf in its output of shape ", shape_str(out.shape()), "; its inputs have shapes ",
       shapes_list(shapes), ".", already.str());
}

}  // namespace ng
