#include "nn/tinylm.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/loss.h"

namespace ng::nn {

TinyLMConfig TinyLMConfig::minimind(int64_t V, int64_t dim, int64_t n_layers, int64_t n_heads,
                                    int64_t n_kv_heads) {
  TinyLMConfig c;
  c.vocab_size = V;
  c.dim = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.norm_position = "pre";
  c.norm = "rmsnorm";
  c.norm_eps = 1e-5;
  c.final_norm = true;
  c.ffn = "swiglu";
  c.ffn_bias = false;
  c.attn_bias = false;
  c.causal = true;
  c.qk_norm = true;
  c.position = "rope";
  c.rope_theta = 1e6;
  c.tie_weights = true;
  return c;
}

BlockConfig TinyLMConfig::block_config() const {
  BlockConfig b;
  b.attn.dim = dim;
  b.attn.n_heads = n_heads;
  b.attn.n_kv_heads = n_kv_heads;
  b.attn.causal = causal;
  b.attn.bias = attn_bias;
  b.attn.rope = position == "rope";
  b.attn.rope_theta = rope_theta;
  b.attn.qk_norm = qk_norm;
  b.attn.norm_eps = norm_eps;
  b.attn.dropout = dropout;
  b.ffn.dim = dim;
  b.ffn.kind = ffn;
  b.ffn.hidden = ffn_hidden;
  b.ffn.activation = activation;
  b.ffn.bias = ffn_bias;
  b.ffn.dropout = dropout;
  b.norm_position = norm_position;
  b.norm = norm;
  b.norm_eps = norm_eps;
  b.n_layers = n_layers;
  return b;
}

void TinyLMConfig::validate() const {
  const char* op = "TinyLMConfig";
  NG_CHECK(vocab_size > 0, op, "vocab_size must be > 0, got ", vocab_size);
  NG_CHECK(dim > 0 && n_layers >= 1 && n_heads > 0, op, "expected dim > 0, n_layers >= 1, n_heads > 0, got ",
           dim, ", ", n_layers, ", ", n_heads);
  NG_CHECK(position == "rope" || position == "learned" || position == "none", op, "unknown position '",
           position, "', expected rope, learned or none");
  NG_CHECK(position != "learned" || max_seq_len > 0, op, "learned positions need max_seq_len > 0, got ",
           max_seq_len);
  NG_CHECK(dropout >= 0 && dropout < 1, op, "dropout must be in [0, 1), got ", dropout);
  // checked here, not only at the first forward (rope_tables): a checkpoint's config is refused on load
  NG_CHECK(position != "rope" || (rope_theta > 0 && std::isfinite(rope_theta)), op,
           "rope_theta must be finite and > 0, got ", rope_theta);
  // Finite whatever the model uses: to_json writes inf and NaN as null, which from_json refuses, so a model
  // with position "none" and rope_theta NaN (or no norm and norm_eps inf) saved a checkpoint that
  // read_checkpoint_config could not read back.
  NG_CHECK(std::isfinite(rope_theta), op,
           "rope_theta must be finite (the config's JSON cannot hold inf or NaN), got ", rope_theta);
  NG_CHECK(std::isfinite(norm_eps), op,
           "norm_eps must be finite (the config's JSON cannot hold inf or NaN), got ", norm_eps);
}

// ---- JSON: every field, by its C++ name ----------------------------------------------------------------
// clang-format off
#define NG_TINYLM_FIELDS(X) \
  X(vocab_size) X(dim) X(n_layers) X(n_heads) X(n_kv_heads) \
  X(norm_position) X(norm) X(norm_eps) X(final_norm) \
  X(ffn) X(ffn_hidden) X(activation) X(ffn_bias) \
  X(attn_bias) X(causal) X(qk_norm) X(position) X(rope_theta) X(max_seq_len) \
  X(dropout) X(tie_weights) X(seed)
// clang-format on

namespace {
// A field's JSON value: itself, except final_norm, whose unset state (decided by the norm position) is null.
template <typename T>
nlohmann::ordered_json json_value(const T& v) {
  return v;
}
nlohmann::ordered_json json_value(const std::optional<bool>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}
}  // namespace

std::string TinyLMConfig::to_json() const {
  nlohmann::ordered_json j;
#define NG_TO_JSON(f) j[#f] = json_value(f);
  NG_TINYLM_FIELDS(NG_TO_JSON)
#undef NG_TO_JSON
  return j.dump();
}

namespace {
// One field from its JSON value. nlohmann's get_to converts a JSON float into an integer field with a cast:
// "dim": 64.9 became 64, "vocab_size": 1e30 was undefined behaviour, "seed": -1 became 2^64 - 1. Integer
// fields therefore take JSON integers only, in their type's range.
template <typename T>
void read_field(const nlohmann::json& v, const char* key, T& out) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    NG_CHECK(v.is_number_integer(), "TinyLMConfig::from_json", "key '", key, "' must be an integer, got ",
             v.dump());
    if constexpr (std::is_unsigned_v<T>)
      NG_CHECK(v.is_number_unsigned(), "TinyLMConfig::from_json", "key '", key,
               "' must be an integer >= 0, got ", v.dump());
    else
      NG_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max()),
               "TinyLMConfig::from_json", "key '", key, "' is out of range: ", v.dump());
  }
  v.get_to(out);
}
// final_norm: true, false, or null (unset: decided by the norm position). Checkpoints written before stop 45
// hold true or false, and load as those.
void read_field(const nlohmann::json& v, const char* key, std::optional<bool>& out) {
  NG_CHECK(v.is_null() || v.is_boolean(), "TinyLMConfig::from_json", "key '", key,
           "' must be true, false or null, got ", v.dump());
  out = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
}
}  // namespace

TinyLMConfig TinyLMConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("TinyLMConfig::from_json", "invalid JSON: ", e.what());
  }
  NG_CHECK(j.is_object(), "TinyLMConfig::from_json", "expected a JSON object, got ", j.type_name());
  TinyLMConfig c;
  size_t known = 0;
#define NG_FROM_JSON(f)                                                             \
  if (!j.contains(#f)) fail("TinyLMConfig::from_json", "missing key '" #f "'");     \
  try {                                                                             \
    read_field(j.at(#f), #f, c.f);                                                  \
  } catch (const Error&) {                                                          \
    throw;                                                                          \
  } catch (const std::exception& e) {                                               \
    fail("TinyLMConfig::from_json", "key '" #f "' has the wrong type: ", e.what()); \
  }                                                                                 \
  ++known;
  NG_TINYLM_FIELDS(NG_FROM_JSON)
#undef NG_FROM_JSON
  if (known != j.size())
    for (auto& [key, _] : j.items()) {
      bool ok = false;
#define NG_IS_KEY(f) ok = ok || key == #f;
      NG_TINYLM_FIELDS(NG_IS_KEY)
#undef NG_IS_KEY
      if (!ok) fail("TinyLMConfig::from_json", "unexpected key '", key, "'");
    }
  return c;
}

// ---- the model -----------------------------------------------------------------------------------------
TinyLM::TinyLM(const TinyLMConfig& cfg) : TinyLM(cfg, Generator(cfg.seed)) {}
TinyLM::TinyLM(const TinyLMConfig& cfg, Generator&& gen) : TinyLM(cfg, gen) {}

TinyLM::TinyLM(const TinyLMConfig& cfg, Generator& gen)
    : config(cfg), dropout_gen_(cfg.seed ^ 0x9E3779B97F4A7C15ull) {  // a stream apart from the init's
  cfg.validate();
  const int64_t V = cfg.vocab_size, C = cfg.dim;
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(V, C, gen));
  if (cfg.position == "learned")
    pos_emb = register_module("pos_emb", std::make_shared<Embedding>(cfg.max_seq_len, C, gen));
  const BlockConfig bc = cfg.block_config();
  stack_ =
      register_module("blocks", std::make_shared<Sequential>());  // names "blocks.0.attn.q_proj.weight"...
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    blocks.push_back(std::make_shared<Block>(bc, gen, dropout_gen_));
    stack_->push_back(blocks.back());
  }
  if (cfg.has_final_norm()) norm = register_module("norm", make_norm(cfg.norm, C, cfg.norm_eps));
  if (cfg.tie_weights) {
    // The shared (V, C) matrix starts as a Linear(C, V) weight would: U(-1/sqrt(C), 1/sqrt(C)).
    NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(double(C));
    uniform_(tok_emb->weight, -bound, bound, gen);
  } else {
    lm_head = register_module("lm_head", std::make_shared<Linear>(C, V, false, gen));
  }
}

Tensor TinyLM::forward(const Tensor& tokens) {
  check_defined("TinyLM", "tokens", tokens);
  NG_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::i64, "TinyLM",
           "expected tokens (B, T) of dtype i64, got ", dtype_name(tokens.dtype()), " ",
           shape_str(tokens.shape()));
  const int64_t T = tokens.size(1);
  Tensor h = tok_emb->forward(tokens);  // (B, T, C)
  if (pos_emb) {
    NG_CHECK(T <= config.max_seq_len, "TinyLM", "sequence length ", T, " exceeds max_seq_len ",
             config.max_seq_len, " of the learned position table");
    h = h + pos_emb->forward(arange(T).to(tokens.device()));  // (T, C), broadcast over B
  }
  for (auto& block : blocks) h = block->forward(h);
  if (norm) h = norm->forward(h);
  return lm_head ? lm_head->forward(h) : F::linear(h, tok_emb->weight);  // (B, T, V)
}

Tensor TinyLM::loss(const Tensor& tokens, const Tensor& targets, int64_t ignore_index) {
  NG_CHECK(targets.shape() == tokens.shape(), "TinyLM::loss", "targets have shape ",
           shape_str(targets.shape()), ", expected the tokens' shape ", shape_str(tokens.shape()));
  return cross_entropy(forward(tokens), targets, ignore_index);
}

}  // namespace ng::nn
