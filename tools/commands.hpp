#pragma once
// Each subcommand of `dsp` registers itself on the root app; its callback runs the command and
// throws dsp::Error on failure (main maps InvalidArgument to exit 2, other errors to exit 1).
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/options.hpp"

namespace dsp::cli {

// A command's option table (core/options.hpp) as flags of `sub`: each flag's text is kept as given
// and parsed by the table when the command runs (apply), so a flag has one parser and one message
// whether it comes from the command line, a --config file or Python.
template <class C>
class TableFlags {
 public:
  TableFlags(CLI::App* sub, const OptionTable<C>& table) : sub_(sub), table_(table) {
    for (const Option<C>& o : table_) {
      if (o.flag.empty()) continue;
      const std::string names = o.short_flag.empty() ? o.flag : o.flag + "," + o.short_flag;
      if (o.takes_value) {
        CLI::Option* opt = sub->add_option(names, text_[o.flag], o.help)->type_name(o.type);
        if (o.value_optional) opt->expected(0, 1);
      } else {
        sub->add_flag(names, o.help);
      }
    }
  }
  CLI::Option* option(const std::string& flag) const { return sub_->get_option(flag); }
  // The keys of the options given on the command line.
  std::set<std::string> given_keys() const {
    std::set<std::string> keys;
    for (const Option<C>& o : table_) {
      if (!o.flag.empty() && !o.key.empty() && sub_->count(o.flag)) keys.insert(o.key);
    }
    return keys;
  }
  // Writes the flags given on the command line into `c` (over what a --config file set).
  void apply(C& c) const {
    for (const Option<C>& o : table_) {
      if (!o.flag.empty() && sub_->count(o.flag)) o.parse(c, o.takes_value ? text_.at(o.flag) : "");
    }
  }

 private:
  CLI::App* sub_;
  const OptionTable<C>& table_;
  std::map<std::string, std::string> text_;
};

void add_convert(CLI::App& app);
void add_generate(CLI::App& app);
void add_info(CLI::App& app);
void add_partition(CLI::App& app);
void add_bench(CLI::App& app);
void add_train(CLI::App& app);
void add_predict(CLI::App& app);  // dsp predict and dsp embed
}  // namespace dsp::cli
