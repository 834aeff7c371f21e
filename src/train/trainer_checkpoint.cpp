#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "train/checkpoint_header.hpp"
#include "train/trainer.hpp"
#include "train/trainer_impl.hpp"

// Trainer's checkpoints: its parameters flat, the checkpoint written (every tensor and the
// optimizer's bytes checksummed), read back and verified, and an exported model's parameters.
namespace dsp {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string shape_str(at::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s.vec(), ", ")); }

std::string checksum_hex(const torch::Tensor& cpu_contiguous) {
  return checkpoint_checksum(cpu_contiguous.data_ptr(), cpu_contiguous.nbytes());
}

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

}  // namespace

int64_t TrainerState::num_parameters() const { return t_.impl_->numel; }

std::vector<float> TrainerState::flat_parameters() const {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(t_.impl_->numel));
  for (const auto& p : t_.impl_->params) {
    auto c = p.detach().to(torch::kCPU).contiguous();
    const float* d = c.data_ptr<float>();
    out.insert(out.end(), d, d + c.numel());
  }
  return out;
}

void TrainerState::set_flat_parameters(const std::vector<float>& flat) {
  DSP_CHECK_ARG(static_cast<int64_t>(flat.size()) == t_.impl_->numel,
                "{} parameter values for a model of {}", flat.size(), t_.impl_->numel);
  torch::NoGradGuard ng;
  int64_t off = 0;
  for (auto& p : t_.impl_->params) {
    auto src = torch::from_blob(const_cast<float*>(flat.data() + off), p.sizes(), torch::kFloat32);
    p.copy_(src);
    off += p.numel();
  }
}

void TrainerState::save_checkpoint(const std::string& path, int64_t epoch,
                                   const nlohmann::json& extra) const {
  auto& I = *t_.impl_;
  nlohmann::json params = nlohmann::json::array();
  for (size_t i = 0; i < I.params.size(); ++i) {
    params.push_back({{"name", I.names[i]}, {"shape", I.params[i].sizes().vec()}});
  }
  // The RNG position: dropout and sampling are pure functions of (seed, epoch, batch, rank), so
  // (seed, next epoch, world size) pins every later draw; Adam's step count is in its state.
  nlohmann::json header = {{"format", kCheckpointFormat},
                           {"version", kCheckpointVersion},
                           {"config", t_.cfg_.to_json()},
                           {"epoch", epoch},
                           {"step", t_.step_},
                           {"world_size", t_.comm_.size()},
                           {"params", params},
                           {"extra", extra}};
  std::string buffer;
  try {
    // Every tensor and the optimizer's bytes with a checksum in the header, and the header's own
    // beside it: a damaged byte anywhere is refused at load, naming what it hit.
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (size_t i = 0; i < I.params.size(); ++i) {
      tensors.emplace_back("p" + std::to_string(i),
                           I.params[i].detach().to(torch::kCPU).clone());  // not a view
    }
    // The input's column statistics (normalize_features standard), so that a model loaded from
    // the checkpoint alone (dsp.load_model) sees its inputs as training did.
    if (I.mean.defined()) {
      tensors.emplace_back("feature_mean", I.mean.to(torch::kCPU).contiguous());
      tensors.emplace_back("feature_inv_std", I.inv_std.to(torch::kCPU).contiguous());
    }
    torch::serialize::OutputArchive opt;
    I.flat->save_into(*I.optimizer);  // the state as LibTorch's optimizer holds it
    I.optimizer->save(opt);
    std::string opt_bytes;
    opt.save_to([&opt_bytes](const void* data, size_t n) {
      opt_bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    tensors.emplace_back("optimizer", bytes_tensor(opt_bytes));
    nlohmann::json sums = nlohmann::json::object();
    for (const auto& [key, t] : tensors) sums[key] = checksum_hex(t);
    header["checksums"] = sums;
    const std::string head = header.dump();
    torch::serialize::OutputArchive ar;
    ar.write("header", bytes_tensor(head));
    ar.write("header_checksum", bytes_tensor(checkpoint_checksum(head.data(), head.size())));
    for (const auto& [key, t] : tensors) ar.write(key, t);
    ar.save_to([&buffer](const void* data, size_t n) {
      buffer.append(static_cast<const char*>(data), n);
      return n;
    });
  } catch (const c10::Error& e) {
    DSP_THROW_T(IoError, "cannot serialise checkpoint {}: {}", path, e.what_without_backtrace());
  }
  write_file_atomic(path, buffer);
}

namespace {

// The model's parameter shapes, as check_checkpoint_params compares them.
std::vector<std::vector<int64_t>> shapes_of(const std::vector<torch::Tensor>& params) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& p : params) out.push_back(p.sizes().vec());
  return out;
}

// Opens a checkpoint archive and parses its header; FormatError naming the file.
nlohmann::json open_checkpoint(const std::string& path, torch::serialize::InputArchive& ar) {
  const std::string data = read_file(path);
  try {
    ar.load_from(data.data(), data.size());
    torch::Tensor h, sum;
    ar.read("header", h);
    const std::string head(reinterpret_cast<const char*>(h.data_ptr<uint8_t>()), h.numel());
    if (!ar.try_read("header_checksum", sum)) return parse_checkpoint_header(path, head, nullptr);
    const std::string s(reinterpret_cast<const char*>(sum.data_ptr<uint8_t>()), sum.numel());
    return parse_checkpoint_header(path, head, &s);
  } catch (const c10::Error& e) {
    // what() of a LibTorch error carries a multi-line C++ backtrace: one line is the message.
    DSP_THROW_T(FormatError, "{} is not a dsp checkpoint: {}", path,
                first_line(e.what_without_backtrace()));
  }
}

// A LibTorch error reading a checkpoint's contents, as the FormatError naming the file.
[[noreturn]] void throw_damaged(const std::string& path, const c10::Error& e) {
  DSP_THROW_T(FormatError, "checkpoint {} is damaged: {}", path,
              first_line(e.what_without_backtrace()));
}

// Tensor `key` of the archive, verified against the header's checksum (version 2; version 1 has
// none): FormatError naming the file and what the damage hit.
torch::Tensor read_verified(const std::string& path, const nlohmann::json& header,
                            torch::serialize::InputArchive& ar, const std::string& key,
                            const std::string& what) {
  torch::Tensor t;
  try {
    ar.read(key, t);
  } catch (const c10::Error& e) {
    throw_damaged(path, e);
  }
  if (!header.contains("checksums")) return t;
  t = t.contiguous();
  verify_checkpoint_tensor(path, header, key, what, t.data_ptr(), t.nbytes());
  return t;
}

void read_parameters(const std::string& path, const nlohmann::json& header,
                     torch::serialize::InputArchive& ar, const std::vector<std::string>& names,
                     std::vector<torch::Tensor>& params) {
  torch::NoGradGuard ng;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string key = "p" + std::to_string(i);
    params[i].copy_(
        read_verified(path, header, ar, key, fmt::format("parameter '{}' ({})", names[i], key)));
  }
}

// The optimizer's state: version 2 stores its archive as checksummed bytes, version 1 nested.
void read_optimizer(const std::string& path, const nlohmann::json& header,
                    torch::serialize::InputArchive& ar, torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive opt;
  if (header.value("version", 0) >= 2) {
    const torch::Tensor b = read_verified(path, header, ar, "optimizer", "the optimizer state");
    try {
      opt.load_from(reinterpret_cast<const char*>(b.data_ptr<uint8_t>()),
                    static_cast<size_t>(b.numel()));
    } catch (const c10::Error& e) {
      throw_damaged(path, e);
    }
  } else {
    try {
      ar.read("optimizer", opt);
    } catch (const c10::Error& e) {
      throw_damaged(path, e);
    }
  }
  try {
    optimizer.load(opt);
  } catch (const c10::Error& e) {
    throw_damaged(path, e);
  }
}

}  // namespace

nlohmann::json checkpoint_header(const std::string& path) {
  torch::serialize::InputArchive ar;
  return open_checkpoint(path, ar);
}

void verify_checkpoint(const std::string& path) {
  torch::serialize::InputArchive ar;
  const nlohmann::json header = open_checkpoint(path, ar);
  for (const CheckpointTensor& t : checkpoint_tensors(header)) {
    read_verified(path, header, ar, t.key, t.what);
  }
}

TrainConfig checkpoint_config(const std::string& path) {
  torch::serialize::InputArchive ar;
  return checkpoint_train_config(path, open_checkpoint(path, ar));
}

namespace {

// An exported model's parameters (dsp.export_model: DIR/state_dict.pt, torch.save of a dict
// name -> tensor) copied into `params` by name; FormatError naming the file and the first fault.
void read_exported(const std::string& dir, const std::vector<std::string>& names,
                   std::vector<torch::Tensor>& params) {
  const std::string file = dir + "/state_dict.pt";
  const std::string data = read_file(file);
  c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
  try {
    const c10::IValue v = torch::jit::pickle_load(std::vector<char>(data.begin(), data.end()));
    DSP_CHECK_FORMAT(v.isGenericDict(), "{} is not a state dict (dsp.export_model writes one)",
                     file);
    dict = v.toGenericDict();
  } catch (const c10::Error& e) {
    DSP_THROW_T(FormatError, "{} is not a state dict: {}", file,
                first_line(e.what_without_backtrace()));
  }
  torch::NoGradGuard ng;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = dict.find(names[i]);
    DSP_CHECK_FORMAT(it != dict.end() && it->value().isTensor(),
                     "{} has no parameter '{}' (this model's: {})", file, names[i],
                     fmt::join(names, ", "));
    const torch::Tensor t = it->value().toTensor();
    DSP_CHECK_FORMAT(t.sizes() == params[i].sizes(),
                     "{}: parameter '{}' has shape {} there but {} in this model", file, names[i],
                     shape_str(t.sizes()), shape_str(params[i].sizes()));
    params[i].copy_(t);
  }
}

}  // namespace

void TrainerState::init_parameters(const std::string& path) {
  DSP_CHECK_T(IoError, path_exists(path), "{}: no such checkpoint or exported model directory",
              path);
  if (std::filesystem::is_directory(path))
    return read_exported(path, t_.impl_->names, t_.impl_->params);
  load_parameters(path);
}

void TrainerState::load_parameters(const std::string& path) {
  torch::serialize::InputArchive ar;
  const nlohmann::json header = open_checkpoint(path, ar);
  check_checkpoint_params(path, header, t_.impl_->names, shapes_of(t_.impl_->params),
                          t_.cfg_.model);
  read_parameters(path, header, ar, t_.impl_->names, t_.impl_->params);
}

CheckpointInfo TrainerState::load_checkpoint(const std::string& path) {
  auto& I = *t_.impl_;
  torch::serialize::InputArchive ar;
  const nlohmann::json header = open_checkpoint(path, ar);
  CheckpointInfo info;
  try {
    const int64_t ck_world =
        check_checkpoint_params(path, header, I.names, shapes_of(I.params), t_.cfg_.model);
    check_checkpoint_optimizer(path, header, t_.cfg_.optimizer);
    if (ck_world != t_.comm_.size()) {
      DSP_WARN("train",
               "checkpoint {} was written by {} rank(s), resuming on {}: training continues, but "
               "not bit-identically (dropout masks and batch shares depend on the rank)",
               path, ck_world, t_.comm_.size());
    }
    info.epoch = header.at("epoch").get<int64_t>();
    info.step = header.at("step").get<int64_t>();
    info.extra = header.value("extra", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    DSP_THROW_T(FormatError, "{} is not a dsp checkpoint: bad header ({})", path, e.what());
  }
  read_parameters(path, header, ar, I.names, I.params);
  read_optimizer(path, header, ar, *I.optimizer);
  I.flat->load_from(*I.optimizer);
  t_.step_ = info.step;
  return info;
}

}  // namespace dsp
