#include "autograd/node.h"

#include <mutex>

#include "autograd/grad_mode.h"
#include "tensor/ops/elementwise.h"

namespace ng {

// ---- iterative graph destruction ----------------------------------------------------------------
// Destroying the last handle to the output of a 100,000-op chain would, naively, destroy node 100,000,
// whose edge destroys node 99,999, ... one C++ stack frame per node: a stack overflow. Instead, a dying
// Node hands what it owns (its edges, its backward lambda with the saved tensors) to a per-thread list,
// and the outermost destructor empties that list in a loop.
//
// The list is a thread_local, and a thread's thread_locals die before its last tensors can: the main
// thread's before static objects (std::exit), another thread's in the reverse order of their making. A
// graph that outlives the list (held by a static or a later-made thread_local Tensor) then pushed onto
// destroyed vectors: a write into freed memory at exit (stop 42). So the list's destructor raises a flag
// of its own, trivially destructible and readable to the end, and from then on a node dies the plain
// recursive way.
namespace {
thread_local bool t_reaper_gone = false;
struct Reaper {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<BackwardFn> fns;
  bool draining = false;
  ~Reaper() { t_reaper_gone = true; }
};
thread_local Reaper t_reaper;

void drain() {
  Reaper& r = t_reaper;
  if (r.draining) return;  // an outer destructor is already looping
  r.draining = true;
  while (!r.nodes.empty() || !r.fns.empty()) {
    if (!r.fns.empty()) {
      BackwardFn fn = std::move(r.fns.back());
      r.fns.pop_back();
      // fn dies here; nodes it frees push onto the lists instead of recursing.
    } else {
      std::shared_ptr<Node> node = std::move(r.nodes.back());
      r.nodes.pop_back();
    }
  }
  r.draining = false;
}
}  // namespace

Node::~Node() {
  if (t_reaper_gone) return;  // the thread is ending: next_edges die with this node, recursively
  for (Edge& e : next_edges)
    if (e.fn) t_reaper.nodes.push_back(std::move(e.fn));
  drain();
}

FunctionNode::~FunctionNode() {
  if (fn_ && !t_reaper_gone) t_reaper.fns.push_back(std::move(fn_));
  // ~Node runs next and drains.
}

// ---- nodes --------------------------------------------------------------------------------------

namespace {
// True when `g` is the only handle to a plain gradient buffer: one TensorImpl reference (the engine's),
// one Storage reference, contiguous from offset 0 over the whole storage, outside any graph. Such a
// tensor can become .grad as it is; nothing else can see it, so later in-place += into .grad is safe.
bool sole_owner(const Tensor& g) {
  const TensorImpl& gi = *g.impl_ptr();
  return g.impl_ptr().use_count() == 1 && gi.storage.use_count() == 1 && !gi.requires_grad && !gi.grad_fn &&
         gi.offset == 0 && g.is_contiguous() &&
         gi.storage->nbytes() == size_t(g.numel()) * dtype_size(g.dtype());
}
}  // namespace

// ---- leaves shared by threads --------------------------------------------------------------------
// Two threads may build graphs on the same leaf (a model's parameters) and run backward at once: each
// makes or finds the leaf's AccumulateGrad (gradient_edge), and each adds into the leaf's .grad (apply).
// Both read and write the leaf's shared_ptr and weak_ptr fields, which is a data race without a lock: two
// threads x 20000 backward() into one leaf aborted with "pure virtual method called" (a node freed while
// in use; 2026-11-28). One process-wide mutex guards both: uncontended it costs ~20 ns per leaf edge and
// per accumulation, and threads that accumulate at the same time take turns (PyTorch takes a lock per
// leaf). Everything else a backward touches belongs to its own graph.
namespace {
std::mutex g_leaf_mutex;
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  std::lock_guard<std::mutex> lock(g_leaf_mutex);
  TensorImpl& l = *leaf;
  if (!l.grad) {
    // First gradient. The incoming tensor may be shared with other paths (y = x + x hands the same
    // tensor to both inputs; a view's backward may hand back a view of its input): then take a private
    // copy. When the engine holds the only handle (the usual case: a fresh buffer the backward just
    // wrote, e.g. cross_entropy's dlogits), adopt it: cloning would cost a full read + write per leaf.
    if (grad_output.dtype() == l.dtype && sole_owner(grad_output)) {
      l.grad = std::make_shared<TensorImpl>(*grad_output.impl_ptr());  // same storage, own metadata
      return {};
    }
    Tensor g = grad_output.dtype() != l.dtype ? grad_output.to(l.dtype) : grad_output;
    l.grad = g.clone().impl_ptr();
    return {};
  }
  Tensor g = grad_output;
  if (g.dtype() != l.dtype) g = g.to(l.dtype);
  {
    Tensor acc(l.grad);
    add_(acc, g);  // .grad += g
  }
  return {};
}

const Tensor& SavedTensor::unpack() const {
  if (tensor_.defined() && tensor_.version() != version_)
    fail(op_, "a tensor saved for backward was modified in place after it was saved (version ", version_,
         " when saved, now ", tensor_.version(), "); the gradient would be wrong. Use clone() before the ",
         "in-place change, or change it after backward");
  return tensor_;
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  if (!fn_)
    fail("backward", "trying to backward through the graph a second time: the saved tensors of ", name_,
         " were freed by the first backward(). Pass retain_graph = true to the first backward() if you "
         "need to call it twice");
  return fn_(grad_output);
}

void FunctionNode::release() {
  if (t_reaper_gone) {
    fn_ = nullptr;
    return;
  }
  if (fn_) t_reaper.fns.push_back(std::move(fn_));
  fn_ = nullptr;
  drain();
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (impl.grad_fn) return Edge{impl.grad_fn};
  if (!impl.requires_grad) return Edge{};
  std::lock_guard<std::mutex> lock(g_leaf_mutex);  // (leaves shared by threads, above)
  std::shared_ptr<Node> acc = impl.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl.grad_accumulator = acc;
  }
  return Edge{acc};
}

}  // namespace ng
