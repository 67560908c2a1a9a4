// Grad mode: whether ops record a graph. On by default, per thread.
//
//   {
//     ng::NoGradGuard no_grad;   // inside this scope, no op records a Node
//     w.copy_(w - lr * g);       // e.g. an optimizer step
//   }
#pragma once

namespace ng {

bool grad_enabled();
void set_grad_enabled(bool on);

class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev_); }

 private:
  bool prev_;
};

}  // namespace ng
