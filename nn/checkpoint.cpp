#include "nn/checkpoint.h"

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/safetensors.h"

namespace ng::nn {

namespace {
constexpr const char* kFormat = "normgrad-checkpoint-v1";

Tensor i64_tensor(const std::vector<int64_t>& v) {
  return from_vector(v, Shape{int64_t(v.size())});
}

// Two model configs describe the same model. A "seed" key is ignored: it only decides the initial values,
// which loading overwrites.
bool same_config(const std::string& a, const std::string& b) {
  try {
    nlohmann::json ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
    if (ja.is_object()) ja.erase("seed");
    if (jb.is_object()) jb.erase("seed");
    return ja == jb;
  } catch (const std::exception&) {
    return a == b;
  }
}
}  // namespace

void save_checkpoint(const std::string& path, const TrainState& state) {
  NamedTensors all;
  std::map<std::string, std::string> meta = state.metadata;
  meta["format"] = kFormat;
  if (!state.config_json.empty()) meta["config"] = state.config_json;

  if (state.model)
    for (auto& [name, t] : state.model->state_dict()) all.emplace_back("model." + name, t.detach());
  if (state.optimizer) {
    for (auto& [name, t] : state.optimizer->state_dict()) all.emplace_back("optim." + name, t);
    meta["optimizer"] = state.optimizer->type_name();
    nlohmann::ordered_json hp;
    for (auto& [k, v] : state.optimizer->hyperparameters()) hp[k] = v;
    meta["optimizer_hyperparameters"] = hp.dump();
  }
  for (auto& [name, gen] : state.generators) {
    NG_CHECK(gen != nullptr, "save_checkpoint", "generator '", name, "' is null");
    // u64 seed and offset, stored bit for bit in I64.
    all.emplace_back("rng." + name, i64_tensor({int64_t(gen->seed()), int64_t(gen->offset())}));
  }
  all.emplace_back("train.step", from_vector(std::vector<int64_t>{state.step}, Shape{}));
  if (state.tokenizer) all.emplace_back("tokenizer.vocab", i64_tensor(state.tokenizer->vocab_bytes()));
  io::save_safetensors(path, all, meta);
}

std::string read_checkpoint_config(const std::string& path) {
  io::SafetensorsData data = io::load_safetensors(path);
  auto it = data.metadata.find("config");
  NG_CHECK(it != data.metadata.end(), "read_checkpoint_config", path, ": the checkpoint has no config");
  return it->second;
}

void load_checkpoint(const std::string& path, TrainState& state) {
  io::SafetensorsData data = io::load_safetensors(path);
  auto bad = [&](const auto&... parts) -> void { fail("load_checkpoint", path, ": ", parts...); };

  auto fmt = data.metadata.find("format");
  if (fmt == data.metadata.end() || fmt->second != kFormat)
    bad("not a normgrad checkpoint (metadata format is '",
        fmt == data.metadata.end() ? std::string("<missing>") : fmt->second, "', expected '", kFormat, "')");
  if (!state.config_json.empty()) {
    auto cfg = data.metadata.find("config");
    if (cfg == data.metadata.end()) bad("the checkpoint has no config, but the model has one");
    if (!same_config(cfg->second, state.config_json))
      bad("the model config differs from the checkpoint's.\n  checkpoint: ", cfg->second,
          "\n  model:      ", state.config_json);
  }

  // Sort the file's tensors by section; every one must be claimed by some part of the state.
  NamedTensors model_part, optim_part;
  std::map<std::string, Tensor> rng_part;
  Tensor step_t, vocab_t;
  std::vector<std::string> unexpected, problems;
  auto starts = [](const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; };
  for (auto& [name, t] : data.tensors) {
    if (starts(name, "model.") && state.model)
      model_part.emplace_back(name.substr(6), t);
    else if (starts(name, "optim.") && state.optimizer)
      optim_part.emplace_back(name.substr(6), t);
    else if (starts(name, "rng."))
      rng_part[name.substr(4)] = t;
    else if (name == "train.step")
      step_t = t;
    else if (name == "tokenizer.vocab" && state.tokenizer)
      vocab_t = t;
    else
      unexpected.push_back(name);
  }
  if (!step_t.defined())
    problems.push_back("missing: train.step");
  else if (step_t.dtype() != DType::i64 || step_t.numel() != 1)
    problems.push_back("train.step: expected one I64 value, got " + std::string(dtype_name(step_t.dtype())) +
                       " " + shape_str(step_t.shape()));
  if (state.tokenizer && !vocab_t.defined()) problems.push_back("missing: tokenizer.vocab");
  if (vocab_t.defined() && (vocab_t.dtype() != DType::i64 || vocab_t.dim() != 1))
    problems.push_back("tokenizer.vocab: expected a 1-D I64 tensor, got " +
                       std::string(dtype_name(vocab_t.dtype())) + " " + shape_str(vocab_t.shape()));
  std::set<std::string> wanted_rng;
  for (auto& [name, gen] : state.generators) {
    wanted_rng.insert(name);
    auto it = rng_part.find(name);
    if (it == rng_part.end())
      problems.push_back("missing: rng." + name);
    else if (it->second.dtype() != DType::i64 || it->second.shape() != Shape{2})
      problems.push_back("rng." + name + ": expected I64 (2), got " + dtype_name(it->second.dtype()) + " " +
                         shape_str(it->second.shape()));
  }
  for (auto& [name, _] : rng_part)
    if (!wanted_rng.count(name)) unexpected.push_back("rng." + name);
  // The model's dtypes must match exactly: a silent conversion would break exact resume.
  if (state.model) {
    std::map<std::string, Tensor> mine;
    for (auto& [n, t] : state.model->state_dict()) mine[n] = t;
    for (auto& [n, t] : model_part) {
      auto it = mine.find(n);
      if (it != mine.end() && it->second.dtype() != t.dtype())
        problems.push_back("model." + n + ": dtype " + dtype_name(t.dtype()) +
                           " in the file, the model has " + dtype_name(it->second.dtype()));
    }
  }
  if (!unexpected.empty() || !problems.empty()) {
    std::ostringstream msg;
    msg << "the checkpoint does not match the training state.";
    for (auto& p : problems) msg << " " << p << ";";
    if (!unexpected.empty()) {
      msg << " unexpected:";
      for (size_t i = 0; i < unexpected.size(); ++i) msg << (i ? ", " : " ") << unexpected[i];
      msg << ";";
    }
    bad(msg.str());
  }

  // Model and optimizer check their own names and shapes, and each changes nothing when it fails. The
  // model goes first (its errors say the most); if the optimizer then refuses its part, the model is
  // restored from a copy taken before.
  try {
    NamedTensors model_backup;
    if (state.model) {
      for (auto& [n, t] : state.model->state_dict()) model_backup.emplace_back(n, t.detach().clone());
      state.model->load_state_dict(model_part, true);
    }
    try {
      if (state.optimizer) state.optimizer->load_state_dict(optim_part);
    } catch (const Error&) {
      if (state.model) state.model->load_state_dict(model_backup, true);
      throw;
    }
  } catch (const Error& e) {
    bad(e.what());
  }
  for (auto& [name, gen] : state.generators) {
    std::vector<int64_t> v = rng_part[name].to_vector<int64_t>();
    gen->set_state(uint64_t(v[0]), uint64_t(v[1]));
  }
  state.step = step_t.to_vector<int64_t>()[0];
  if (state.tokenizer) *state.tokenizer = CharTokenizer::from_vocab(vocab_t.to_vector<int64_t>());
  for (auto& [k, v] : data.metadata) state.metadata[k] = v;
}

}  // namespace ng::nn
