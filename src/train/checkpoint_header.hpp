#pragma once
// The header of a dsp checkpoint and the checks made against it, without LibTorch (the fuzz build
// has none: fuzz/fuzz_checkpoint.cpp feeds these functions bytes). A checkpoint
// (Trainer::save_checkpoint) is a LibTorch archive of tensors: "header", a uint8 tensor holding
// the JSON document below; "header_checksum" (version 2 on), the header bytes' checksum; p<i> the
// parameters, feature_mean and feature_inv_std (normalize_features standard) and "optimizer" (the
// optimizer's own archive as uint8 bytes). The header:
//   {"format": "dsp-checkpoint", "version": 1 or 2, "config": TrainConfig::to_json(),
//    "epoch": E, "step": S, "world_size": P, "params": [{"name": N, "shape": [...]}, ...],
//    "extra": {...}, "checksums": {key: 16 hex digits, ...} (version 2)}
// The loader in trainer.cpp takes the tensors out of the archive and hands their bytes here.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/config.hpp"

namespace dsp {

inline constexpr const char* kCheckpointFormat = "dsp-checkpoint";
// 2: a checksum of the header and of every tensor and the optimizer's bytes (1: none; still read).
inline constexpr int kCheckpointVersion = 2;

// The checksum the header records for `bytes` bytes: Hasher's digest as 16 hex digits.
std::string checkpoint_checksum(const void* data, size_t bytes);

// The header of checkpoint `path` from its bytes. `checksum` holds the bytes of its
// header_checksum tensor (nullptr: the archive has none, as a version 1 file), checked before
// the header is parsed. The header must then be a JSON object naming a dsp checkpoint of version
// 1 to kCheckpointVersion whose fields have the types the loaders read (a version 2 header with
// its checksum and a "checksums" object of strings). FormatError naming the file and the fault.
nlohmann::json parse_checkpoint_header(const std::string& path, const std::string& head,
                                       const std::string* checksum);

// A tensor of the archive that verify_checkpoint reads: its key and its name in messages.
struct CheckpointTensor {
  std::string key;
  std::string what;  // "parameter 'NAME' (p<i>)", "the optimizer state", or the key
};
// The tensors a parsed header vouches for: those it records a checksum of (version 2), else the
// parameters it lists (version 1, read whole only).
std::vector<CheckpointTensor> checkpoint_tensors(const nlohmann::json& header);

// FormatError "PATH: WHAT fails its checksum: the file is damaged" unless `bytes` bytes at `data`
// are what the parsed header records for tensor `key` (version 1 records nothing: no check).
void verify_checkpoint_tensor(const std::string& path, const nlohmann::json& header,
                              const std::string& key, const std::string& what, const void* data,
                              size_t bytes);

// A parsed header against a model (its parameters' names and shapes, in order, and its config):
// FormatError naming the file and the first difference. Returns the world size that wrote it.
int64_t check_checkpoint_params(const std::string& path, const nlohmann::json& header,
                                const std::vector<std::string>& names,
                                const std::vector<std::vector<int64_t>>& shapes,
                                const ModelConfig& model);
// The parsed header records `optimizer`'s state: FormatError naming both otherwise.
void check_checkpoint_optimizer(const std::string& path, const nlohmann::json& header,
                                OptimizerKind optimizer);

// The training configuration a parsed header records (model, optimizer, rates, seed, feature
// normalisation): FormatError naming the file and the fault.
TrainConfig checkpoint_train_config(const std::string& path, const nlohmann::json& header);

}  // namespace dsp
