#include "train/checkpoint_header.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>

#include "core/error.hpp"
#include "core/hash.hpp"

namespace dsp {

namespace {

using nlohmann::json;

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

bool is_list_of_integers(const json& j) {
  if (!j.is_array()) return false;
  for (const json& x : j) {
    if (!x.is_number_integer()) return false;
  }
  return true;
}

bool is_params_list(const json& j) {
  if (!j.is_array()) return false;
  for (const json& p : j) {
    if (!p.is_object()) return false;
    const auto name = p.find("name"), shape = p.find("shape");
    if (name == p.end() || !name->is_string() || shape == p.end() || !is_list_of_integers(*shape)) {
      return false;
    }
  }
  return true;
}

bool is_checksums(const json& j) {
  if (!j.is_object()) return false;
  for (const json& s : j) {
    if (!s.is_string()) return false;
  }
  return true;
}

// FormatError naming the file unless the header's `field`, where present, passes `ok`.
template <class Ok>
void check_field(const std::string& path, const json& h, const char* field, Ok ok,
                 const char* want) {
  const auto it = h.find(field);
  DSP_CHECK_FORMAT(it == h.end() || ok(*it),
                   "{} is not a dsp checkpoint: its header's '{}' is not {} (it is {})", path,
                   field, want, it == h.end() ? "" : it->type_name());
}

// The fields the loaders read have the types they read them as: FormatError otherwise.
void check_fields(const std::string& path, const json& h) {
  const auto is_integer = [](const json& j) { return j.is_number_integer(); };
  check_field(path, h, "epoch", is_integer, "an integer");
  check_field(path, h, "step", is_integer, "an integer");
  check_field(path, h, "world_size", is_integer, "an integer");
  check_field(path, h, "params", is_params_list, "a list of {name, shape}");
  check_field(
      path, h, "extra", [](const json& j) { return j.is_object(); }, "an object");
  check_field(path, h, "checksums", is_checksums, "an object of strings");
  check_field(
      path, h, "config", [](const json& j) { return j.is_object(); }, "an object");
  const auto c = h.find("config");
  if (c == h.end()) return;
  const auto model = c->find("model"), optimizer = c->find("optimizer");
  DSP_CHECK_FORMAT(model == c->end() || model->is_object(),
                   "{} is not a dsp checkpoint: its header's 'config.model' is not an object",
                   path);
  DSP_CHECK_FORMAT(optimizer == c->end() || optimizer->is_string(),
                   "{} is not a dsp checkpoint: its header's 'config.optimizer' is not a string",
                   path);
}

int64_t version_of(const json& h) {
  const auto v = h.find("version");
  return v != h.end() && v->is_number_integer() ? v->get<int64_t>() : 0;
}

}  // namespace

std::string checkpoint_checksum(const void* data, size_t bytes) {
  Hasher h;
  h.update(data, bytes);
  return fmt::format("{:016x}", h.digest());
}

nlohmann::json parse_checkpoint_header(const std::string& path, const std::string& head,
                                       const std::string* checksum) {
  if (checksum != nullptr) {
    DSP_CHECK_FORMAT(*checksum == checkpoint_checksum(head.data(), head.size()),
                     "{}: the header fails its checksum: the file is damaged", path);
  }
  json h;
  try {
    h = json::parse(head);
  } catch (const json::exception& e) {
    DSP_THROW_T(FormatError, "{} is not a dsp checkpoint: bad header ({})", path, e.what());
  }
  DSP_CHECK_FORMAT(h.is_object(), "{} is not a dsp checkpoint: its header is a JSON {}", path,
                   h.type_name());
  const auto format = h.find("format");
  const int64_t version = version_of(h);
  DSP_CHECK_FORMAT(format != h.end() && *format == kCheckpointFormat && version >= 1 &&
                       version <= kCheckpointVersion,
                   "{} is not a dsp checkpoint of version 1 to {}", path, kCheckpointVersion);
  check_fields(path, h);
  if (version >= 2) {
    DSP_CHECK_FORMAT(checksum != nullptr && h.contains("checksums"),
                     "{}: a version {} header without its {}: the file is damaged", path, version,
                     checksum == nullptr ? "header_checksum" : "checksums");
  }
  return h;
}

std::vector<CheckpointTensor> checkpoint_tensors(const nlohmann::json& header) {
  const json params = header.value("params", json::array());
  auto what = [&](const std::string& key) -> std::string {
    if (key == "optimizer") return "the optimizer state";
    if (key.size() < 2 || key.size() > 10 || key[0] != 'p') return key;
    for (size_t i = 1; i < key.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(key[i]))) return key;
    }
    const size_t i = std::stoul(key.substr(1));
    if (i >= params.size()) return key;
    return fmt::format("parameter '{}' ({})", params[i].at("name").get<std::string>(), key);
  };
  std::vector<CheckpointTensor> out;
  const auto sums = header.find("checksums");
  if (sums != header.end()) {
    for (auto it = sums->begin(); it != sums->end(); ++it)
      out.push_back({it.key(), what(it.key())});
  } else {  // version 1: the parameters, each read whole
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string key = "p" + std::to_string(i);
      out.push_back({key, what(key)});
    }
  }
  return out;
}

void verify_checkpoint_tensor(const std::string& path, const nlohmann::json& header,
                              const std::string& key, const std::string& what, const void* data,
                              size_t bytes) {
  const auto sums = header.find("checksums");
  if (sums == header.end()) return;
  const auto sum = sums->find(key);
  DSP_CHECK_FORMAT(sum != sums->end() && *sum == checkpoint_checksum(data, bytes),
                   "{}: {} fails its checksum: the file is damaged", path, what);
}

int64_t check_checkpoint_params(const std::string& path, const nlohmann::json& header,
                                const std::vector<std::string>& names,
                                const std::vector<std::vector<int64_t>>& shapes,
                                const ModelConfig& model) {
  try {
    const std::string ck_model = header.at("config").at("model").dump();
    const std::string my_model = model.to_json().dump();
    const auto& ck_params = header.at("params");
    DSP_CHECK_FORMAT(ck_params.size() == names.size(),
                     "checkpoint {} holds {} parameter tensors but this model has {} "
                     "(checkpoint model {}, this model {})",
                     path, ck_params.size(), names.size(), ck_model, my_model);
    for (size_t i = 0; i < names.size(); ++i) {
      const auto name = ck_params[i].at("name").get<std::string>();
      const auto shape = ck_params[i].at("shape").get<std::vector<int64_t>>();
      DSP_CHECK_FORMAT(name == names[i],
                       "checkpoint {}: parameter {} is '{}' but this model's is '{}' (checkpoint "
                       "model {}, this model {})",
                       path, i, name, names[i], ck_model, my_model);
      DSP_CHECK_FORMAT(shape == shapes[i],
                       "checkpoint {}: parameter '{}' has shape {} in the checkpoint but {} in "
                       "this model (checkpoint model {}, this model {})",
                       path, name, shape_str(shape), shape_str(shapes[i]), ck_model, my_model);
    }
    return header.at("world_size").get<int64_t>();
  } catch (const json::exception& e) {
    DSP_THROW_T(FormatError, "{} is not a dsp checkpoint: bad header ({})", path, e.what());
  }
}

void check_checkpoint_optimizer(const std::string& path, const nlohmann::json& header,
                                OptimizerKind optimizer) {
  std::string ck_opt;
  try {
    ck_opt = header.at("config").at("optimizer").get<std::string>();
  } catch (const json::exception& e) {
    DSP_THROW_T(FormatError, "{} is not a dsp checkpoint: bad header ({})", path, e.what());
  }
  DSP_CHECK_FORMAT(ck_opt == name_of(optimizer),
                   "checkpoint {} holds {} optimizer state but this trainer uses {}", path, ck_opt,
                   optimizer);
}

TrainConfig checkpoint_train_config(const std::string& path, const nlohmann::json& header) {
  TrainConfig c;
  try {
    const auto& j = header.at("config");
    c.model = ModelConfig::from_json(j.at("model"));
    c.optimizer = parse_choice<OptimizerKind>(j.at("optimizer").get<std::string>());
    c.lr = j.at("lr").get<double>();
    c.weight_decay = j.at("weight_decay").get<double>();
    c.momentum = j.at("momentum").get<double>();
    c.seed = j.at("seed").get<uint64_t>();
    // absent before --normalize-features
    c.normalize_features = parse_choice<FeatureNorm>(j.value("normalize_features", "none"));
  } catch (const json::exception& e) {
    DSP_THROW_T(FormatError, "{}: bad training configuration in the header ({})", path, e.what());
  } catch (const FormatError& e) {  // ModelConfig::from_json's, which knows no file
    DSP_THROW_T(FormatError, "{}: bad training configuration in the header ({})", path, e.what());
  } catch (const InvalidArgument& e) {  // a name outside a choice's table
    DSP_THROW_T(FormatError, "{}: bad training configuration in the header ({})", path, e.what());
  }
  return c;
}

}  // namespace dsp
