#pragma once
// The options of a training job, each declared once (job_options.cpp): its flag, its --config key,
// its help, and how its value is read from the command line's text or from JSON into a JobConfig
// and written back. `dsp train`'s flags and --help are made from this table (tools/cmd_train.cpp),
// --config files and the Python package's dsp.train(dict) are read with it
// (JobConfig::from_json), and JobConfig::to_json writes it (a valid --config). What a value may
// be is checked once, in JobConfig::validate. Adding an option: one entry here, plus its use.
// Torch-free header.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/job.hpp"

namespace dsp {

struct JobOption {
  std::string flag;  // "--batch-size"; empty: a --config key only
  std::string key;   // "batch_size"; empty: a command-line flag only
  std::string help;
  std::string type;         // the value in --help: INT, UINT, FLOAT, TEXT, LIST, TEXT:{a,b}, ...
  bool takes_value = true;  // false: a switch (--resume), `parse` gets ""
  std::function<void(JobConfig&, const std::string&)> parse;    // the flag's text
  std::function<void(JobConfig&, const nlohmann::json&)> read;  // the key's JSON value
  std::function<nlohmann::json(const JobConfig&)> write;        // the key's JSON value
};

const std::vector<JobOption>& job_options();

}  // namespace dsp
