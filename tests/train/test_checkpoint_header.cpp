// The checkpoint header's checks (train/checkpoint_header.cpp) on crafted headers: each fault is
// refused with one FormatError naming the file, never another exception (a version 1 file has no
// checksum, so any header bytes can reach these checks; fuzz/fuzz_checkpoint.cpp fuzzes them).
#include <gtest/gtest.h>

#include <string>

#include "error_of.hpp"
#include "train/checkpoint_header.hpp"

namespace dsp {
namespace {
using test::error_of;

const std::string kFile = "ck.pt";

// A version 2 header as Trainer::save_checkpoint writes it, for a model of one 2x3 parameter.
nlohmann::json good_header() {
  TrainConfig c;
  nlohmann::json h = {{"format", kCheckpointFormat},
                      {"version", 2},
                      {"config", c.to_json()},
                      {"epoch", 1},
                      {"step", 5},
                      {"world_size", 1},
                      {"params", {{{"name", "w"}, {"shape", {2, 3}}}}},
                      {"extra", nlohmann::json::object()}};
  const float w[6] = {1, 2, 3, 4, 5, 6};
  h["checksums"] = {{"p0", checkpoint_checksum(w, sizeof w)}};
  return h;
}

// The header's bytes with their checksum, as the loader reads them: parsed, or the refusal.
std::string refusal(const nlohmann::json& h) {
  const std::string head = h.dump(), sum = checkpoint_checksum(head.data(), head.size());
  return error_of<FormatError>([&] { parse_checkpoint_header(kFile, head, &sum); });
}

TEST(CheckpointHeader, AGoodHeaderParses) {
  const nlohmann::json h = good_header();
  EXPECT_EQ(refusal(h), "no error");
  const std::string head = h.dump(), sum = checkpoint_checksum(head.data(), head.size());
  const nlohmann::json got = parse_checkpoint_header(kFile, head, &sum);
  EXPECT_EQ(got, h);
  const float w[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_NO_THROW(verify_checkpoint_tensor(kFile, got, "p0", "w", w, sizeof w));
  EXPECT_EQ(check_checkpoint_params(kFile, got, {"w"}, {{2, 3}}, TrainConfig().model), 1);
  EXPECT_EQ(checkpoint_train_config(kFile, got).to_json(), TrainConfig().to_json());
}

TEST(CheckpointHeader, TheHeaderChecksumIsCheckedBeforeTheParse) {
  const std::string head = good_header().dump(), sum(16, '0');
  EXPECT_EQ(error_of<FormatError>([&] { parse_checkpoint_header(kFile, head, &sum); }),
            "ck.pt: the header fails its checksum: the file is damaged");
  EXPECT_EQ(error_of<FormatError>([&] { parse_checkpoint_header(kFile, "{", &sum); }),
            "ck.pt: the header fails its checksum: the file is damaged");
  // A version 2 header whose checksum tensor is missing is damaged, not version 1.
  EXPECT_EQ(error_of<FormatError>([&] { parse_checkpoint_header(kFile, head, nullptr); }),
            "ck.pt: a version 2 header without its header_checksum: the file is damaged");
  nlohmann::json h = good_header();
  h.erase("checksums");
  EXPECT_EQ(refusal(h), "ck.pt: a version 2 header without its checksums: the file is damaged");
}

TEST(CheckpointHeader, NotACheckpointsHeader) {
  EXPECT_EQ(refusal(nlohmann::json::array()),
            "ck.pt is not a dsp checkpoint: its header is a JSON array");
  for (const char* field : {"format", "version"}) {
    nlohmann::json h = good_header();
    h[field] = field == std::string("format") ? nlohmann::json(7) : nlohmann::json("2");
    EXPECT_EQ(refusal(h), "ck.pt is not a dsp checkpoint of version 1 to 2") << field;
  }
  nlohmann::json h = good_header();
  h["version"] = 3;
  EXPECT_EQ(refusal(h), "ck.pt is not a dsp checkpoint of version 1 to 2");
  const std::string sum = checkpoint_checksum("{", 1);
  EXPECT_EQ(error_of<FormatError>([&] {
              parse_checkpoint_header(kFile, "{", &sum);
            }).rfind("ck.pt is not a dsp checkpoint: bad header ([json.exception.parse_error", 0),
            0u);
}

// A field of the wrong type is refused when parsed, not when some reader trips over it.
TEST(CheckpointHeader, AFieldOfTheWrongTypeIsRefusedNamingIt) {
  const auto with = [](const char* field, nlohmann::json v) {
    nlohmann::json h = good_header();
    h[field] = std::move(v);
    return refusal(h);
  };
  EXPECT_EQ(with("epoch", "1"),
            "ck.pt is not a dsp checkpoint: its header's 'epoch' is not an integer (it is string)");
  EXPECT_EQ(with("world_size", 1.5),
            "ck.pt is not a dsp checkpoint: its header's 'world_size' "
            "is not an integer (it is number)");
  EXPECT_EQ(with("extra", 3),
            "ck.pt is not a dsp checkpoint: its header's 'extra' is not an object (it is number)");
  EXPECT_EQ(with("checksums", {{"p0", 1}}),
            "ck.pt is not a dsp checkpoint: its header's "
            "'checksums' is not an object of strings (it is object)");
  const std::string params =
      "ck.pt is not a dsp checkpoint: its header's 'params' is not a list "
      "of {name, shape} ";
  EXPECT_EQ(with("params", {{{"name", 1}, {"shape", {2}}}}), params + "(it is array)");
  EXPECT_EQ(with("params", {{{"name", "w"}, {"shape", {"2"}}}}), params + "(it is array)");
  EXPECT_EQ(with("params", {nullptr}), params + "(it is array)");
  EXPECT_EQ(with("config", "adam"),
            "ck.pt is not a dsp checkpoint: its header's 'config' is not an object (it is string)");
  nlohmann::json h = good_header();
  h["config"]["model"] = 1;
  EXPECT_EQ(refusal(h),
            "ck.pt is not a dsp checkpoint: its header's 'config.model' is not an "
            "object");
  h = good_header();
  h["config"]["optimizer"] = nullptr;
  EXPECT_EQ(refusal(h),
            "ck.pt is not a dsp checkpoint: its header's 'config.optimizer' is not a "
            "string");
}

TEST(CheckpointHeader, TensorsAreNamedAndVerified) {
  nlohmann::json h = good_header();
  h["checksums"]["optimizer"] = "0";
  h["checksums"]["p99999999999999999999"] = "0";  // no parameter of that index: named by its key
  h["checksums"]["p7"] = "0";
  const auto tensors = checkpoint_tensors(h);
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_EQ(tensors[0].key, "optimizer");
  EXPECT_EQ(tensors[0].what, "the optimizer state");
  EXPECT_EQ(tensors[1].what, "parameter 'w' (p0)");
  EXPECT_EQ(tensors[2].what, "p7");
  EXPECT_EQ(tensors[3].what, "p99999999999999999999");
  const float w[6] = {1, 2, 3, 4, 5, 7};
  EXPECT_EQ(
      error_of<FormatError>([&] { verify_checkpoint_tensor(kFile, h, "p0", "w (p0)", w, 24); }),
      "ck.pt: w (p0) fails its checksum: the file is damaged");
  EXPECT_EQ(error_of<FormatError>([&] { verify_checkpoint_tensor(kFile, h, "q", "q", w, 24); }),
            "ck.pt: q fails its checksum: the file is damaged");
  // Version 1: the parameters, unchecked.
  h.erase("checksums");
  h["version"] = 1;
  ASSERT_EQ(checkpoint_tensors(h).size(), 1u);
  EXPECT_EQ(checkpoint_tensors(h)[0].what, "parameter 'w' (p0)");
  EXPECT_NO_THROW(verify_checkpoint_tensor(kFile, h, "p0", "w", w, 24));
}

TEST(CheckpointHeader, TheModelAndTrainingConfigurationAreCheckedNamingTheFile) {
  nlohmann::json h = good_header();
  EXPECT_EQ(
      error_of<FormatError>([&] { check_checkpoint_optimizer(kFile, h, OptimizerKind::kSgd); }),
      "checkpoint ck.pt holds adam optimizer state but this trainer uses sgd");
  h["config"]["model"].erase("hidden");
  EXPECT_EQ(error_of<FormatError>([&] {
              checkpoint_train_config(kFile, h);
            }).rfind("ck.pt: bad training configuration in the header (bad model config", 0),
            0u);
  h = good_header();
  h["config"]["lr"] = "fast";
  EXPECT_EQ(error_of<FormatError>([&] {
              checkpoint_train_config(kFile, h);
            }).rfind("ck.pt: bad training configuration in the header ([json.exception", 0),
            0u);
  h = good_header();
  h.erase("world_size");
  EXPECT_EQ(error_of<FormatError>([&] {
              check_checkpoint_params(kFile, h, {"w"}, {{2, 3}}, TrainConfig().model);
            }).rfind("ck.pt is not a dsp checkpoint: bad header ([json.exception.out_of_range", 0),
            0u);
}

}  // namespace
}  // namespace dsp
