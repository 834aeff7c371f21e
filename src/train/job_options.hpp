#pragma once
// The options of a training job, each declared once (job_options.cpp, an OptionTable of
// core/options.hpp): its flag, its --config key, its help, and how its value is read from the
// command line's text or from JSON into a JobConfig and written back. `dsp train`'s flags and
// --help are made from this table (tools/cmd_train.cpp),
// --config files and the Python package's dsp.train(dict) are read with it
// (JobConfig::from_json), and JobConfig::to_json writes it (a valid --config). What a value may
// be is checked once, in JobConfig::validate. Adding an option: one entry here, plus its use.
// Torch-free header.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "train/job.hpp"

namespace dsp {

using JobOption = Option<JobConfig>;  // core/options.hpp

const std::vector<JobOption>& job_options();

}  // namespace dsp
