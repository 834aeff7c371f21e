#include "usage.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

namespace dsp::cli {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  // d[i][j]: distance of a's first i characters to b's first j, rows kept as needed.
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

namespace {
// What users of DGL, PyG and PyTorch type for a value dsp spells otherwise, where the spelling
// alone would suggest another value ("graphsage" is nearer "hsage", "gpu" nearer "cpu").
const std::vector<std::pair<std::string, std::string>>& known_spellings() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"graphsage", "sage"}, {"sageconv", "sage"}, {"graphconv", "gcn"},
      {"gcnconv", "gcn"},    {"gatconv", "gat"},   {"relgraphconv", "rgcn"},
      {"rgcnconv", "rgcn"},  {"gpu", "cuda"},      {"gpu:0", "cuda:0"}};
  return m;
}
}  // namespace

std::vector<std::string> nearest(const std::string& word,
                                 const std::vector<std::string>& candidates) {
  constexpr std::size_t kMost = 4;
  if (word.empty()) return {};
  std::string lower = word;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& [typed, meant] : known_spellings()) {
    if (lower == typed &&
        std::find(candidates.begin(), candidates.end(), meant) != candidates.end())
      return {meant};
  }
  const std::size_t limit = std::min(std::max<std::size_t>(1, word.size() / 3), word.size() - 1);
  std::size_t best = limit + 1;
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    if (c == word) continue;
    const std::size_t d = edit_distance(word, c);
    if (d < best) out.clear(), best = d;
    if (d == best && out.size() < kMost && std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  }
  if (!out.empty() || word.size() < 3) return out;
  for (const std::string& c : candidates) {
    if (c.size() > word.size() && c.compare(0, word.size(), word) == 0 && out.size() < kMost &&
        std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  }
  return out;
}

std::string did_you_mean(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string s = "did you mean";
  for (std::size_t i = 0; i < names.size(); ++i) {
    s += i == 0 ? " " : i + 1 == names.size() ? " or " : ", ";
    s += "'" + names[i] + "'";
  }
  return s + "?";
}

namespace {

// The deepest command the command line selected: root, or "train" in `dsp train ...`, "sample" in
// `dsp bench sample ...` (as far as the parse got before its error).
const CLI::App* selected(const CLI::App& root) {
  const CLI::App* app = &root;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return app;
}

// "dsp", "dsp train", "dsp bench sample": how the user names `app`.
std::string command_path(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* p = app->get_parent(); p; p = p->get_parent())
    path = p->get_name() + " " + path;
  return path;
}

// The long flags `app` accepts, its own and those it hands to the commands above it, without
// their dashes.
std::vector<std::string> long_flags(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a; a = a->get_fallthrough() ? a->get_parent() : nullptr) {
    for (const CLI::Option* o : a->get_options())
      for (const std::string& n : o->get_lnames()) names.push_back(n);
  }
  return names;
}

// The names of the commands under `app`.
std::vector<std::string> command_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; }))
    if (!s->get_name().empty()) names.push_back(s->get_name());
  return names;
}

bool is_flag(const std::string& token) {
  return token.size() > 1 && token[0] == '-' && token != "--";
}

// "unknown option '--epoch' (did you mean '--epochs'?)" for the first unknown flag among the
// arguments nothing took; "" when there is none.
std::string unknown_flag(const CLI::App& root, const CLI::App* app) {
  for (const std::string& token : root.remaining(true)) {
    if (!is_flag(token)) continue;
    const std::string flag = token.substr(0, token.find('='));
    const std::string bare = flag.substr(flag.find_first_not_of('-'));
    std::vector<std::string> near = nearest(bare, long_flags(app));
    for (std::string& n : near) n = "--" + n;
    const std::string hint =
        near.empty() ? command_path(app) + " --help lists the options" : did_you_mean(near);
    return "unknown option '" + flag + "' (" + hint + ")";
  }
  return "";
}

// For a command that needs a command under it and got none (`dsp trian`, `dsp bench`): the
// unknown command named with the nearest known ones, or the list of commands; "" otherwise.
std::string missing_command(const CLI::App& root, const CLI::App* app) {
  if (app->get_require_subcommand_min() == 0) return "";
  const std::vector<std::string> names = command_names(app);
  for (const std::string& token : root.remaining(true)) {
    if (is_flag(token)) continue;
    const std::vector<std::string> near = nearest(token, names);
    const std::string hint =
        near.empty() ? command_path(app) + " --help lists the commands" : did_you_mean(near);
    return "unknown command '" + token + "' (" + hint + ")";
  }
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return command_path(app) + " needs a command: " + list;
}

// Splits a list written "a, b or c", "a|b|c" or "a,b" into its words; empty if any item is not
// one plain word (a placeholder like "cuda:<index>" is dropped, not a reason to give up).
std::vector<std::string> choice_words(std::string list) {
  for (std::size_t p; (p = list.find(" or ")) != std::string::npos;) list.replace(p, 4, ",");
  std::replace(list.begin(), list.end(), '|', ',');
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string w = list.substr(start, end - start);
    w.erase(0, w.find_first_not_of(' '));
    w.erase(w.find_last_not_of(' ') + 1);
    if (w.find('<') == std::string::npos) {
      if (w.empty() ||
          w.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_:.-") != std::string::npos)
        return {};
      words.push_back(w);
    }
    start = end + 1;
  }
  return words;
}

// The rejected value and the choices of "... '<value>' (a, b, c)"; false if not that shape.
bool value_then_list(const std::string& m, std::string& value, std::vector<std::string>& choices) {
  const std::size_t open = m.rfind("' (");
  if (m.empty() || m.back() != ')' || open == std::string::npos || open == 0) return false;
  const std::size_t quote = m.rfind('\'', open - 1);
  if (quote == std::string::npos) return false;
  value = m.substr(quote + 1, open - quote - 1);
  choices = choice_words(m.substr(open + 3, m.size() - open - 4));
  return true;
}

// The rejected value and the choices of "... must be a, b or c, got '<value>'"; false if not that
// shape.
bool list_then_value(const std::string& m, std::string& value, std::vector<std::string>& choices) {
  const std::size_t got = m.rfind(", got '");
  if (m.empty() || m.back() != '\'' || got == std::string::npos) return false;
  const std::size_t must = m.rfind("must be ", got);
  if (must == std::string::npos) return false;
  value = m.substr(got + 7, m.size() - got - 8);
  choices = choice_words(m.substr(must + 8, got - must - 8));
  return true;
}

// "unexpected argument 'x' (dsp train --help lists the arguments)" for the first argument nothing
// took; "" when there is none.
std::string unexpected_argument(const CLI::App& root, const CLI::App* app) {
  const std::vector<std::string> left = root.remaining(true);
  if (left.empty()) return "";
  return "unexpected argument '" + left.front() + "' (" + command_path(app) +
         " --help lists the arguments)";
}

}  // namespace

std::string parse_error_message(const CLI::App& root, const CLI::ParseError& e) {
  const CLI::App* app = selected(root);
  std::string m = missing_command(root, app);
  if (m.empty()) m = unknown_flag(root, app);
  if (m.empty() && dynamic_cast<const CLI::ExtrasError*>(&e)) m = unexpected_argument(root, app);
  return m.empty() ? e.what() : m;
}

std::string with_choice_hint(const std::string& message) {
  std::string value;
  std::vector<std::string> choices;
  if (!value_then_list(message, value, choices) && !list_then_value(message, value, choices))
    return message;
  if (choices.size() < 2 || std::find(choices.begin(), choices.end(), value) != choices.end())
    return message;
  const std::string hint = did_you_mean(nearest(value, choices));
  return hint.empty() ? message : message + "; " + hint;
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::atoi(v);
  }
  return 0;
}

int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::max(1, std::atoi(v));
  }
  return 1;
}

}  // namespace dsp::cli
