#pragma once
// Usage errors as one line each, with a suggestion where the user probably mistyped: an unknown
// flag or command gets the nearest known one ("did you mean '--epochs'?"), a value outside a
// choice list the nearest choice. Also who prints a usage error in a multi-rank job.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace dsp::cli {

// The optimal-string-alignment distance of a and b: insertions, deletions, substitutions and
// transpositions of adjacent characters, each 1 ("trian" -> "train" is 1).
std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidates nearest to `word`: those at the smallest edit distance, if it is at most
// max(1, |word| / 3) and below |word|; else those `word` (3 characters or more) begins. At most 4,
// in the candidates' order. Empty when nothing is near.
std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates);

// "did you mean 'a'?", "did you mean 'a' or 'b'?", or "" when `names` is empty.
std::string did_you_mean(const std::vector<std::string>& names);

// The one-line message for a parse error of `root` (an error whose exit code is not 0: not --help
// or --version): an unknown flag or command named with the nearest known ones, else CLI11's
// message.
std::string parse_error_message(const CLI::App& root, const CLI::ParseError& e);

// `message` with "; did you mean 'x'?" appended when it rejects a value from a list it gives, in
// either of the shapes the option checks use: "... '<value>' (a, b, c)" (or "(a|b|c)") and
// "... must be a, b or c, got '<value>'". Otherwise `message` unchanged.
std::string with_choice_hint(const std::string& message);

// This process's rank as its launcher numbered it (OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK),
// read from the environment without initialising MPI; 0 when it was not started as a rank.
int launcher_rank();
// The number of ranks its launcher started (OMPI_COMM_WORLD_SIZE or PMI_SIZE); 1 when unknown.
int launcher_size();

}  // namespace dsp::cli
