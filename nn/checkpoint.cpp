#include "nn/checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
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
// vocab_size from the file's model config, or -1 when it has none.
int64_t config_vocab_size(const std::map<std::string, std::string>& metadata) {
  auto it = metadata.find("config");
  if (it == metadata.end()) return -1;
  try {
    nlohmann::json j = nlohmann::json::parse(it->second);
    if (j.is_object() && j.contains("vocab_size") && j["vocab_size"].is_number_integer())
      return j["vocab_size"].get<int64_t>();
  } catch (const std::exception&) {
  }
  return -1;
}

// How the file's optimizer (its kind and settings, from the metadata) differs from `opt`; lr is left out.
std::vector<std::string> optimizer_differences(const std::map<std::string, std::string>& metadata,
                                               const optim::Optimizer& opt) {
  std::vector<std::string> out;
  auto kind = metadata.find("optimizer");
  if (kind == metadata.end()) return {"the file has no optimizer kind (metadata 'optimizer')"};
  if (kind->second != opt.type_name())
    return {"optimizer: the state was saved by " + kind->second + ", this optimizer is " + opt.type_name()};
  auto hp = metadata.find("optimizer_hyperparameters");
  if (hp == metadata.end())
    return {"the file has no optimizer settings (metadata 'optimizer_hyperparameters')"};
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(hp->second);
  } catch (const std::exception&) {
    return {"optimizer_hyperparameters: not JSON"};
  }
  for (auto& [name, value] : opt.hyperparameters()) {
    if (name == "lr") continue;
    if (!saved.is_object() || !saved.contains(name) || !saved[name].is_number()) {
      out.push_back("optimizer setting " + name + ": not in the file");
    } else if (double v = saved[name].get<double>(); v != value) {
      std::ostringstream m;
      m << "optimizer setting " << name << ": " << v << " in the file, " << value << " in this "
        << opt.type_name();
      out.push_back(m.str());
    }
  }
  return out;
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
  // What load_checkpoint refuses is refused here too, so that no run writes a checkpoint it cannot resume.
  NG_CHECK(state.step >= 0, "save_checkpoint", path, ": expected a step count >= 0, got ", state.step);
  all.emplace_back("train.step", from_vector(std::vector<int64_t>{state.step}, Shape{}));
  if (state.tokenizer) {
    // An empty vocabulary could never be loaded (CharTokenizer::from_vocab refuses it): refuse it now, not
    // when the run is resumed.
    NG_CHECK(state.tokenizer->vocab_size() > 0, "save_checkpoint", path,
             ": the tokenizer has no vocabulary (build it with CharTokenizer::from_corpus first)");
    const int64_t V = config_vocab_size(meta);
    NG_CHECK(V < 0 || state.tokenizer->vocab_size() == V, "save_checkpoint", path, ": the tokenizer has ",
             state.tokenizer->vocab_size(), " symbols, but the model's config has vocab_size ", V);
    all.emplace_back("tokenizer.vocab", i64_tensor(state.tokenizer->vocab_bytes()));
  }
  io::save_safetensors(path, all, meta);
}

std::string read_checkpoint_config(const std::string& path) {
  const io::SafetensorsHeader header = io::read_safetensors_header(path);  // not the tensors
  auto it = header.metadata.find("config");
  NG_CHECK(it != header.metadata.end(), "read_checkpoint_config", path, ": the checkpoint has no config");
  return it->second;
}

bool is_checkpoint_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    const io::SafetensorsHeader header = io::read_safetensors_header(path);
    auto fmt = header.metadata.find("format");
    return fmt != header.metadata.end() && fmt->second == kFormat;
  } catch (const Error&) {
    return false;  // not safetensors, or a corrupt or truncated file
  }
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
  else if (int64_t k = step_t.to_vector<int64_t>()[0]; k < 0)
    problems.push_back("train.step: expected a count >= 0, got " + std::to_string(k));
  // The tokenizer is built here, before anything changes: a vocabulary it refuses (empty, a repeated byte)
  // must fail the load as a whole, not after the model has been overwritten. Its size must be the model's.
  std::optional<CharTokenizer> tokenizer;
  if (state.tokenizer && !vocab_t.defined()) problems.push_back("missing: tokenizer.vocab");
  if (vocab_t.defined() && (vocab_t.dtype() != DType::i64 || vocab_t.dim() != 1)) {
    problems.push_back("tokenizer.vocab: expected a 1-D I64 tensor, got " +
                       std::string(dtype_name(vocab_t.dtype())) + " " + shape_str(vocab_t.shape()));
  } else if (vocab_t.defined()) {
    try {
      tokenizer = CharTokenizer::from_vocab(vocab_t.to_vector<int64_t>());
    } catch (const Error& e) {
      problems.push_back(std::string("tokenizer.vocab: ") + e.what());
    }
    const int64_t V = config_vocab_size(data.metadata);
    if (tokenizer && V >= 0 && tokenizer->vocab_size() != V)
      problems.push_back("tokenizer.vocab: " + std::to_string(tokenizer->vocab_size()) +
                         " symbols, but the model's config has vocab_size " + std::to_string(V));
  }
  // The optimizer must be of the kind that saved the state, with the same settings (all but lr, which the
  // file restores): Adam and AdamW keep the same buffers, and an AdamW state loaded into Adam would go on
  // with L2 decay in place of decoupled decay, silently.
  if (state.optimizer && !optim_part.empty())
    for (const std::string& p : optimizer_differences(data.metadata, *state.optimizer)) problems.push_back(p);
  std::set<std::string> wanted_rng;
  for (auto& [name, gen] : state.generators) {
    wanted_rng.insert(name);
    auto it = rng_part.find(name);
    // (save_checkpoint refuses a null one too; here it crashed in set_state, after the model was loaded)
    if (gen == nullptr)
      problems.push_back("generator '" + name + "' is null");
    else if (it == rng_part.end())
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
  if (state.partial)  // the pieces this state leaves out are read past; a name of no piece still is not
    std::erase_if(unexpected, [&](const std::string& name) {
      return starts(name, "model.") || starts(name, "optim.") || starts(name, "rng.") ||
             name == "tokenizer.vocab";
    });
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
  if (state.tokenizer) *state.tokenizer = std::move(*tokenizer);
  for (auto& [k, v] : data.metadata) state.metadata[k] = v;
}

}  // namespace ng::nn
