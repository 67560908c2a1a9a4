// Checkpoints: a full training state round trip, EXACT resume (20 straight steps == 10 + save + load into
// fresh objects + 10, bitwise), every kind of mismatch as an error with its message, atomic saves.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::error_of;
namespace fs = std::filesystem;

namespace {

// One scratch folder per test process, removed when the process exits.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("ng_checkpoint_" + std::to_string(::getpid()));
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
} scratch;

std::string temp_path(const std::string& name) {
  fs::create_directories(scratch.path);
  return (scratch.path / name).string();
}

const std::string kText = "to be, or not to be, that is the question: ";

nn::TinyLMConfig model_config(int64_t V) {
  nn::TinyLMConfig c;
  c.vocab_size = V;
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.dropout = 0.1;  // so the dropout generator's state matters
  c.seed = 5;
  return c;
}

// Everything a training run holds: model, optimizer, data sampler, schedule, step.
struct TrainingRun {
  nn::CharTokenizer tok;
  std::unique_ptr<nn::TinyLM> model;
  std::unique_ptr<optim::AdamW> opt;
  Generator data{77};
  optim::LRSchedule schedule = optim::cosine_with_warmup(3e-3, 3, 20, 3e-4);
  int64_t step = 0;

  explicit TrainingRun(uint64_t seed) {
    tok = nn::CharTokenizer::from_corpus(kText);
    auto c = model_config(tok.vocab_size());
    c.seed = seed;
    model = std::make_unique<nn::TinyLM>(c);
    opt = std::make_unique<optim::AdamW>(model->named_parameters());
  }
  // One training step: a random batch, forward, backward, clip, schedule, AdamW. Returns the loss.
  double train_step() {
    const int64_t B = 4, T = 8;
    std::vector<int64_t> ids = tok.encode(kText), x, y;
    for (int64_t s : randint(0, int64_t(ids.size()) - T - 1, {B}, data).to_vector<int64_t>())
      for (int64_t t = 0; t < T; ++t) x.push_back(ids[size_t(s + t)]), y.push_back(ids[size_t(s + t + 1)]);
    Tensor loss = model->loss(from_vector(x, Shape{B, T}), from_vector(y, Shape{B, T}));
    opt->zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model->parameters(), 1.0);
    opt->lr = schedule(step);
    opt->step();
    ++step;
    return loss.item();
  }
  nn::TrainState state() {
    nn::TrainState s;
    s.model = model.get();
    s.optimizer = opt.get();
    s.step = step;
    s.generators = {{"dropout", &model->dropout_generator()}, {"data", &data}};
    s.config_json = model->config.to_json();
    s.tokenizer = &tok;
    return s;
  }
  void load(const std::string& path) {
    nn::TrainState s = state();
    nn::load_checkpoint(path, s);
    step = s.step;
  }
};

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const uint8_t* p = static_cast<const uint8_t*>(c.raw_data());
  return std::vector<uint8_t>(p, p + c.numel() * int64_t(dtype_size(c.dtype())));
}

}  // namespace

TEST(Checkpoint, ExactResumeIsBitwise) {
  // A: 20 steps straight.
  TrainingRun a(5);
  std::vector<double> straight;
  for (int i = 0; i < 20; ++i) straight.push_back(a.train_step());

  // B: 10 steps, save; then a FRESH run (different init seed, so every value must come from the file),
  // load, 10 more.
  const std::string path = temp_path("resume.safetensors");
  std::vector<double> resumed;
  {
    TrainingRun b(5);
    for (int i = 0; i < 10; ++i) resumed.push_back(b.train_step());
    nn::save_checkpoint(path, b.state());
  }
  TrainingRun c(999);
  c.load(path);
  EXPECT_EQ(c.step, 10);
  for (int i = 0; i < 10; ++i) resumed.push_back(c.train_step());

  ASSERT_EQ(straight.size(), resumed.size());
  for (size_t i = 0; i < straight.size(); ++i) {
    uint64_t x, y;
    std::memcpy(&x, &straight[i], 8);
    std::memcpy(&y, &resumed[i], 8);
    EXPECT_EQ(x, y) << "step " << i << ": " << straight[i] << " vs " << resumed[i];
  }
  // And the final parameters agree bit for bit.
  auto pa = a.model->state_dict(), pc = c.model->state_dict();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(bytes_of(pa[i].second), bytes_of(pc[i].second)) << pa[i].first;
  EXPECT_LT(straight.back(), straight.front());  // and it did train
}

TEST(Checkpoint, RoundTripRestoresEveryPiece) {
  TrainingRun a(5);
  for (int i = 0; i < 3; ++i) a.train_step();
  const std::string path = temp_path("round.safetensors");
  auto st = a.state();
  st.metadata["run"] = "unit test";
  nn::save_checkpoint(path, st);

  // Build the model from the file's config, as a resuming program would.
  auto cfg = nn::TinyLMConfig::from_json(nn::read_checkpoint_config(path));
  EXPECT_EQ(cfg, a.model->config);
  TrainingRun b(123);
  b.tok = nn::CharTokenizer::from_corpus("xyz");  // replaced by the file's
  nn::TrainState sb = b.state();
  ASSERT_NE(bytes_of(a.model->state_dict()[0].second), bytes_of(b.model->state_dict()[0].second));
  nn::load_checkpoint(path, sb);
  EXPECT_EQ(sb.step, 3);
  EXPECT_TRUE(b.tok == a.tok);
  EXPECT_EQ(sb.metadata.at("run"), "unit test");
  EXPECT_EQ(sb.metadata.at("optimizer"), "AdamW");
  EXPECT_EQ(b.model->dropout_generator().offset(), a.model->dropout_generator().offset());
  EXPECT_EQ(b.data.offset(), a.data.offset());
  // the model's weights (b was initialised from seed 123, a from 5, and a trained 3 steps)
  const auto wa = a.model->state_dict(), wb = b.model->state_dict();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].first, wb[i].first);
    EXPECT_EQ(bytes_of(wa[i].second), bytes_of(wb[i].second)) << wa[i].first;
  }
  auto sa = a.opt->state_dict(), so = b.opt->state_dict();
  ASSERT_EQ(sa.size(), so.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, so[i].first);
    EXPECT_EQ(bytes_of(sa[i].second), bytes_of(so[i].second)) << sa[i].first;
  }
  // Python can read the file: it is plain safetensors with string metadata.
  auto raw = io::load_safetensors(path);
  EXPECT_EQ(raw.metadata.at("format"), "normgrad-checkpoint-v1");
}

TEST(Checkpoint, MismatchesAreErrorsThatSayWhat) {
  TrainingRun a(5);
  a.train_step();
  const std::string path = temp_path("good.safetensors");
  nn::save_checkpoint(path, a.state());

  // A different model config.
  {
    auto tok = nn::CharTokenizer::from_corpus(kText);
    auto c = model_config(tok.vocab_size());
    c.dim = 32;
    nn::TinyLM other(c);
    nn::TrainState s;
    s.model = &other;
    s.config_json = c.to_json();
    std::string m = error_of([&] { nn::load_checkpoint(path, s); });
    EXPECT_NE(m.find("load_checkpoint: " + path + ": the model config differs"), std::string::npos) << m;
  }
  // No config given, but a differently shaped model: the model names the mismatched entries.
  {
    auto c = model_config(a.tok.vocab_size());
    c.n_layers = 1;
    c.ffn_hidden = 32;
    nn::TinyLM other(c);
    nn::TrainState s;
    s.model = &other;
    s.generators = {{"dropout", &other.dropout_generator()}, {"data", &a.data}};
    s.tokenizer = &a.tok;
    std::string m = error_of([&] { nn::load_checkpoint(path, s); });
    EXPECT_NE(m.find("unexpected:"), std::string::npos) << m;  // the optimizer's entries: no optimizer here
    EXPECT_NE(m.find("optim.lr"), std::string::npos) << m;
  }
  {
    auto c = model_config(a.tok.vocab_size());
    c.n_layers = 1;
    c.ffn_hidden = 32;
    nn::TinyLM other(c);
    optim::AdamW opt(other.named_parameters());
    nn::TrainState s;
    s.model = &other;
    s.optimizer = &opt;
    s.generators = {{"dropout", &other.dropout_generator()}, {"data", &a.data}};
    s.tokenizer = &a.tok;
    auto before = other.tok_emb->weight.to_vector<double>();
    std::string m = error_of([&] { nn::load_checkpoint(path, s); });
    EXPECT_NE(m.find("unexpected: blocks.1."), std::string::npos) << m;
    EXPECT_NE(m.find("wrong shape: blocks.0.ffn.fc1.weight: expected (32, 16), got (64, 16)"),
              std::string::npos)
        << m;
    EXPECT_EQ(other.tok_emb->weight.to_vector<double>(), before);  // nothing was changed
    EXPECT_EQ(opt.state()[0].step, 0);                             // the optimizer was rolled back
  }
  // Missing pieces: a generator the file does not have, and a tokenizer when none was saved.
  {
    TrainingRun b(5);
    Generator extra(1);
    nn::TrainState s = b.state();
    s.generators.push_back({"extra", &extra});
    std::string m = error_of([&] { nn::load_checkpoint(path, s); });
    EXPECT_NE(m.find("missing: rng.extra"), std::string::npos) << m;
  }
  // A tensor of the wrong dtype in the file (here: the model saved in f64, loaded into f32).
  {
    TrainingRun b(5);
    nn::cast_(*b.model, DType::f64);
    nn::TrainState s = b.state();
    s.optimizer = nullptr;
    const std::string p64 = temp_path("f64.safetensors");
    nn::save_checkpoint(p64, s);
    TrainingRun c(5);
    nn::TrainState sc = c.state();
    sc.optimizer = nullptr;
    std::string m = error_of([&] { nn::load_checkpoint(p64, sc); });
    EXPECT_NE(m.find("model.tok_emb.weight: dtype f64 in the file, the model has f32"), std::string::npos)
        << m;
  }
  // Not a checkpoint at all, and a truncated one.
  {
    const std::string plain = temp_path("plain.safetensors");
    io::save_safetensors(plain, {{"x", zeros({2})}});
    TrainingRun b(5);
    nn::TrainState s = b.state();
    std::string m = error_of([&] { nn::load_checkpoint(plain, s); });
    EXPECT_NE(m.find("not a normgrad checkpoint"), std::string::npos) << m;

    auto bytes = io::safetensors_serialize(io::load_safetensors(path).tensors);
    const std::string cut = temp_path("cut.safetensors");
    io::atomic_write_file(cut, bytes.substr(0, bytes.size() - 100));
    m = error_of([&] { nn::load_checkpoint(cut, s); });
    EXPECT_NE(m.find("load_safetensors: " + cut + ": entry"), std::string::npos) << m;
    EXPECT_NE(m.find("past the end"), std::string::npos) << m;
  }
}

TEST(Checkpoint, FailedSaveLeavesTheOldCheckpoint) {
  TrainingRun a(5);
  a.train_step();
  const std::string path = temp_path("atomic.safetensors");
  nn::save_checkpoint(path, a.state());
  auto before = io::load_safetensors(path);
  a.train_step();
  io::testing::fail_next_write_after(1000);
  const std::string msg = error_of([&] { nn::save_checkpoint(path, a.state()); });
  EXPECT_NE(msg.find("save_safetensors: writing '" + path + "' failed: injected fault after 1000 bytes"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(the old file, if any, is untouched)"), std::string::npos) << msg;
  auto after = io::load_safetensors(path);
  ASSERT_EQ(before.tensors.size(), after.tensors.size());
  for (size_t i = 0; i < before.tensors.size(); ++i)
    EXPECT_EQ(bytes_of(before.tensors[i].second), bytes_of(after.tensors[i].second))
        << before.tensors[i].first;
}

// What a load must refuse before it changes anything, because the run would not go on as the one that saved
// it: another optimizer kind or other settings, a negative step, a vocabulary the tokenizer refuses or of
// another size than the model's. And a save that could never be loaded (an empty tokenizer) is refused.
TEST(Checkpoint, RefusesStatesThatWouldNotResumeTheRun) {
  TrainingRun a(5);
  a.train_step();
  const std::string path = temp_path("refuse.safetensors");
  nn::save_checkpoint(path, a.state());
  const io::SafetensorsData good = io::load_safetensors(path);

  // Each case loads into a fresh run and must leave its model, optimizer and tokenizer as they were.
  auto expect_refused = [&](const std::string& file, auto&& make_optimizer, const std::string& expected) {
    TrainingRun b(123);
    b.opt = make_optimizer(*b.model);
    const auto weight = b.model->tok_emb->weight.to_vector<double>();
    const nn::CharTokenizer tok = b.tok;
    nn::TrainState s = b.state();
    const std::string m = error_of([&] { nn::load_checkpoint(file, s); });
    EXPECT_NE(m.find("load_checkpoint: " + file), std::string::npos) << m;
    EXPECT_NE(m.find(expected), std::string::npos) << m;
    EXPECT_EQ(b.model->tok_emb->weight.to_vector<double>(), weight) << expected;
    EXPECT_EQ(b.opt->state()[0].step, 0) << expected;
    EXPECT_TRUE(b.tok == tok) << expected;
    EXPECT_EQ(s.step, 0) << expected;
  };
  auto adamw = [](nn::TinyLM& m, double wd = 0.01) {
    optim::AdamWOptions o;
    o.weight_decay = wd;
    return std::make_unique<optim::AdamW>(m.named_parameters(), o);
  };
  // Adam keeps AdamW's buffers, so only the metadata tells them apart.
  {
    TrainingRun b(123);
    optim::Adam adam(b.model->named_parameters());
    nn::TrainState s = b.state();
    s.optimizer = &adam;
    const auto weight = b.model->tok_emb->weight.to_vector<double>();
    const std::string m = error_of([&] { nn::load_checkpoint(path, s); });
    EXPECT_NE(m.find("optimizer: the state was saved by AdamW, this optimizer is Adam"), std::string::npos)
        << m;
    EXPECT_EQ(b.model->tok_emb->weight.to_vector<double>(), weight);
  }
  expect_refused(
      path, [&](nn::TinyLM& m) { return adamw(m, 0.5); },
      "optimizer setting weight_decay: 0.01 in the file, 0.5 in this AdamW");
  // The same settings load (the lr is the file's to restore, whatever the optimizer was built with).
  {
    TrainingRun b(123);
    optim::AdamWOptions o;
    o.lr = 0.5;
    b.opt = std::make_unique<optim::AdamW>(b.model->named_parameters(), o);
    b.load(path);
    EXPECT_EQ(b.step, 1);
    EXPECT_EQ(b.opt->lr, a.opt->lr);
  }

  // Files edited one entry at a time.
  auto edited = [&](const std::string& name, const std::string& entry, Tensor value) {
    nn::NamedTensors t = good.tensors;
    for (auto& [k, v] : t)
      if (k == entry) v = value;
    const std::string p = temp_path(name);
    io::save_safetensors(p, t, good.metadata);
    return p;
  };
  expect_refused(
      edited("neg_step.safetensors", "train.step", from_vector(std::vector<int64_t>{-3}, Shape{})),
      [&](nn::TinyLM& m) { return adamw(m); }, "train.step: expected a count >= 0, got -3");
  std::vector<int64_t> vocab = a.tok.vocab_bytes();
  std::vector<int64_t> repeated = vocab;
  repeated[1] = repeated[0];
  expect_refused(
      edited("repeated.safetensors", "tokenizer.vocab", from_vector(repeated, Shape{int64_t(vocab.size())})),
      [&](nn::TinyLM& m) { return adamw(m); }, "tokenizer.vocab: ");
  std::vector<int64_t> shorter(vocab.begin(), vocab.end() - 1);
  expect_refused(
      edited("short.safetensors", "tokenizer.vocab", from_vector(shorter, Shape{int64_t(shorter.size())})),
      [&](nn::TinyLM& m) { return adamw(m); },
      "tokenizer.vocab: " + std::to_string(shorter.size()) +
          " symbols, but the model's config has vocab_size " + std::to_string(vocab.size()));

  // Metadata without the optimizer's kind or settings: refused, naming what is missing.
  for (const auto& [key, expected] :
       {std::pair<std::string, std::string>{"optimizer",
                                            "the file has no optimizer kind (metadata 'optimizer')"},
        {"optimizer_hyperparameters",
         "the file has no optimizer settings (metadata 'optimizer_hyperparameters')"}}) {
    auto meta = good.metadata;
    meta.erase(key);
    const std::string p = temp_path("no_" + key + ".safetensors");
    io::save_safetensors(p, good.tensors, meta);
    expect_refused(
        p, [&](nn::TinyLM& m) { return adamw(m); }, expected);
  }

  // An empty tokenizer is refused at save time, and the file is not written.
  nn::CharTokenizer empty_tok;
  nn::TrainState s = a.state();
  s.tokenizer = &empty_tok;
  const std::string never = temp_path("never.safetensors");
  const std::string m = error_of([&] { nn::save_checkpoint(never, s); });
  EXPECT_NE(m.find("save_checkpoint: " + never + ": the tokenizer has no vocabulary"), std::string::npos)
      << m;
  EXPECT_FALSE(fs::exists(never));

  // So are the two other states the load refuses: a negative step, and a tokenizer of another size than the
  // config's vocab_size (both were written, and then no run could load them).
  nn::TrainState neg = a.state();
  neg.step = -1;
  const std::string m_neg = error_of([&] { nn::save_checkpoint(never, neg); });
  EXPECT_NE(m_neg.find("save_checkpoint: " + never + ": expected a step count >= 0, got -1"),
            std::string::npos)
      << m_neg;
  nn::CharTokenizer small = nn::CharTokenizer::from_corpus("abc");
  nn::TrainState other = a.state();
  other.tokenizer = &small;
  const std::string m_tok = error_of([&] { nn::save_checkpoint(never, other); });
  EXPECT_NE(m_tok.find("save_checkpoint: " + never +
                       ": the tokenizer has 3 symbols, but the model's config has "
                       "vocab_size " +
                       std::to_string(a.tok.vocab_size())),
            std::string::npos)
      << m_tok;
  EXPECT_FALSE(fs::exists(never));
}

// Every TinyLM variant (the four norm positions with each norm, MiniMind's preset with tied weights, GQA and
// QK-norm, learned positions, an f64 model) goes through a model-only checkpoint: built again from the
// file's config with another seed and loaded, it has the saved state and computes the same logits, bit for
// bit.
TEST(Checkpoint, EveryTinyLMVariantRoundTrips) {
  struct Variant {
    std::string name;
    nn::TinyLMConfig config;
    bool f64 = false;
  };
  std::vector<Variant> variants;
  for (const char* position : {"pre", "post", "none", "deepnorm"})
    for (const char* norm : {"layernorm", "rmsnorm"}) {
      nn::TinyLMConfig c = model_config(9);
      c.norm_position = position;
      c.norm = norm;
      variants.push_back({std::string(position) + "/" + norm, c});
    }
  nn::TinyLMConfig minimind = nn::TinyLMConfig::minimind(9, 16, 2, 4, 2);
  minimind.max_seq_len = 8;
  variants.push_back({"minimind", minimind});
  nn::TinyLMConfig learned = model_config(9);
  learned.position = "learned";
  learned.max_seq_len = 8;
  learned.ffn = "swiglu";
  variants.push_back({"learned/swiglu", learned});
  variants.push_back({"pre/f64", model_config(9), true});

  const Tensor tokens = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 0, 1}, Shape{2, 5});
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    nn::TinyLM saved(v.config);
    if (v.f64) nn::cast_(saved, DType::f64);
    saved.eval();
    const std::string path = temp_path("variant.safetensors");
    nn::TrainState out;
    out.model = &saved;
    out.config_json = saved.config.to_json();
    nn::save_checkpoint(path, out);

    nn::TinyLMConfig c = nn::TinyLMConfig::from_json(nn::read_checkpoint_config(path));
    EXPECT_EQ(c, v.config);
    c.seed = v.config.seed + 1;  // other initial values, which the load overwrites
    nn::TinyLM loaded(c);
    if (v.f64) nn::cast_(loaded, DType::f64);
    loaded.eval();
    ASSERT_NE(bytes_of(loaded(tokens)), bytes_of(saved(tokens)));
    nn::TrainState in;
    in.model = &loaded;
    in.config_json = loaded.config.to_json();
    nn::load_checkpoint(path, in);

    const nn::NamedTensors a = saved.state_dict(), b = loaded.state_dict();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_EQ(bytes_of(a[i].second), bytes_of(b[i].second)) << a[i].first;
    }
    EXPECT_EQ(bytes_of(loaded(tokens)), bytes_of(saved(tokens)));
  }
}

// A null generator in the state to load into: save_checkpoint refused it, load_checkpoint dereferenced it
// (a segfault, after the model had been overwritten). It is a problem listed before anything changes.
TEST(Checkpoint, LoadRefusesANullGeneratorBeforeChangingAnything) {
  TrainingRun a(5);
  a.train_step();
  const std::string path = temp_path("null_generator.safetensors");
  nn::save_checkpoint(path, a.state());

  TrainingRun b(123);
  const std::vector<double> weight = b.model->tok_emb->weight.to_vector<double>();
  nn::TrainState s = b.state();
  s.generators[1].second = nullptr;  // "data"
  const std::string m = error_of([&] { nn::load_checkpoint(path, s); });
  EXPECT_NE(m.find("load_checkpoint: " + path +
                   ": the checkpoint does not match the training state. "
                   "generator 'data' is null;"),
            std::string::npos)
      << m;
  EXPECT_EQ(b.model->tok_emb->weight.to_vector<double>(), weight);
  EXPECT_EQ(s.step, 0);
}

// Only the model (and the tokenizer) of a full checkpoint, as a program that samples from a trained model
// loads it: `partial` reads past the optimizer and the generators (the step is still read). A resume (partial
// false) still refuses the same file into the same state, and a partial load checks what it loads as
// strictly.
TEST(Checkpoint, PartialLoadTakesOnlyTheModel) {
  TrainingRun a(5);
  for (int i = 0; i < 2; ++i) a.train_step();
  const std::string path = temp_path("partial.safetensors");
  nn::save_checkpoint(path, a.state());

  nn::TinyLM model(nn::TinyLMConfig::from_json(nn::read_checkpoint_config(path)));
  nn::CharTokenizer tok;
  nn::TrainState s;
  s.model = &model;
  s.tokenizer = &tok;
  s.config_json = model.config.to_json();
  const std::string m = error_of([&] { nn::load_checkpoint(path, s); });
  EXPECT_NE(m.find("unexpected: optim."), std::string::npos) << m;
  EXPECT_NE(m.find("rng.data"), std::string::npos) << m;

  s.partial = true;
  nn::load_checkpoint(path, s);
  EXPECT_EQ(s.step, 2);
  EXPECT_TRUE(tok == a.tok);
  const auto wa = a.model->state_dict(), wb = model.state_dict();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    EXPECT_EQ(bytes_of(wa[i].second), bytes_of(wb[i].second)) << wa[i].first;

  // A name that belongs to no piece of a checkpoint is still refused: only the pieces left out are read past.
  {
    io::SafetensorsData d = io::load_safetensors(path);
    d.tensors.emplace_back("junk.x", from_vector(std::vector<float>{1}, Shape{1}));
    const std::string odd = temp_path("partial_junk.safetensors");
    io::save_safetensors(odd, d.tensors, d.metadata);
    const std::string mj = error_of([&] { nn::load_checkpoint(odd, s); });
    EXPECT_NE(mj.find("unexpected: junk.x"), std::string::npos) << mj;
  }

  // What it loads is still checked: a model of another shape, without a config to compare, is refused
  // by its names and shapes, and is left as it was.
  auto c = model_config(a.tok.vocab_size());
  c.n_layers = 1;
  nn::TinyLM other(c);
  const std::vector<double> before = other.tok_emb->weight.to_vector<double>();
  nn::TrainState so;
  so.model = &other;
  so.partial = true;
  const std::string mo = error_of([&] { nn::load_checkpoint(path, so); });
  EXPECT_NE(mo.find("load_checkpoint: " + path), std::string::npos) << mo;
  EXPECT_NE(mo.find("unexpected: blocks.1."), std::string::npos) << mo;
  EXPECT_EQ(other.tok_emb->weight.to_vector<double>(), before);
}

// is_checkpoint_file reads the header only and answers false, never an error, for anything that is not a
// normgrad checkpoint: the trainers ask it before a --save replaces a file that is already there.
TEST(Checkpoint, IsCheckpointFileAnswersFromTheHeader) {
  TrainingRun a(5);
  const std::string path = temp_path("is_checkpoint.safetensors");
  nn::save_checkpoint(path, a.state());
  EXPECT_TRUE(nn::is_checkpoint_file(path));

  auto write = [](const std::string& p, const std::string& bytes) { io::atomic_write_file(p, bytes); };
  const std::string other = temp_path("other");
  EXPECT_FALSE(nn::is_checkpoint_file(temp_path("missing")));
  EXPECT_FALSE(nn::is_checkpoint_file(scratch.path.string()));  // a folder
  write(other, kText);
  EXPECT_FALSE(nn::is_checkpoint_file(other));  // text: its first 8 bytes make a length past the end
  write(other, "");
  EXPECT_FALSE(nn::is_checkpoint_file(other));
  // safetensors, but not a checkpoint: no metadata, another format, a format that is not a string
  const Tensor t = from_vector(std::vector<float>{1, 2}, Shape{2});
  write(other, io::safetensors_serialize({{"w", t}}));
  EXPECT_FALSE(nn::is_checkpoint_file(other));
  write(other, io::safetensors_serialize({{"w", t}}, {{"format", "pt"}}));
  EXPECT_FALSE(nn::is_checkpoint_file(other));
  // a checkpoint cut short: its header no longer matches its size, as loading it would say
  const std::string whole = io::read_whole_file(path, "test");
  write(other, whole.substr(0, whole.size() - 1));
  EXPECT_FALSE(nn::is_checkpoint_file(other));
  write(other, whole);
  EXPECT_TRUE(nn::is_checkpoint_file(other));
  std::string bytes = io::safetensors_serialize({{"w", t}}, {{"format", "normgrad-checkpoint-v1"}});
  write(other, bytes);
  EXPECT_TRUE(nn::is_checkpoint_file(other));  // the header is all it reads
  const size_t at = bytes.find("\"normgrad-checkpoint-v1\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 24, "[1,2,3,4,5,6,7,8,9,1000]");  // as long, and still JSON, but not a string
  ASSERT_EQ(bytes.size(),
            io::safetensors_serialize({{"w", t}}, {{"format", "normgrad-checkpoint-v1"}}).size());
  write(other, bytes);
  EXPECT_FALSE(nn::is_checkpoint_file(other));
  // the real checkpoint cut inside its header, and with its header's JSON broken
  const std::string full = io::read_whole_file(path, "test");
  write(other, full.substr(0, 40));
  EXPECT_FALSE(nn::is_checkpoint_file(other));
  std::string broken = full;
  broken[8] = 'x';  // the header's opening brace
  write(other, broken);
  EXPECT_FALSE(nn::is_checkpoint_file(other));
}
