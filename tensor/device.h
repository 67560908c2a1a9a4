// Where a tensor's memory lives. CPU always; CUDA when the optional backend (cuda/) is built.
#pragma once

#include <string>

namespace ng {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  bool operator==(const Device&) const = default;
};

}  // namespace ng
