#pragma once
// A choice among named values, typed once: an enum E and its names table, found by ADL as
// `const Names<E>& names_of(E)` beside the enum. The table is the one place the names are
// written: options::value gives a field of type E its --help ("TEXT:{a,b}"), its parser, its JSON
// and its message for an unknown name ("unknown optimizer 'x' (adam, sgd, adamw, adagrad)",
// which the CLI follows with "did you mean"); fmt prints an E by its name, and nlohmann::json
// reads and writes it by its name (never as a number). Code compares E values, never the names.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dsp {

template <class E>
class Names {
 public:
  struct Entry {
    E value;
    const char* name;
  };
  // `noun` names the choice in messages ("optimizer"); the entries in the order --help lists them.
  // A value's first entry is its name; later entries of the same value are accepted spellings
  // ("neighbour" for "neighbor") that --help and messages do not list. A value named "" is the
  // choice not made (an option without a default, as dsp convert --from): not listed either.
  Names(const char* noun, std::initializer_list<Entry> entries) : noun_(noun), entries_(entries) {}

  const char* operator[](E e) const {
    for (const Entry& x : entries_)
      if (x.value == e) return x.name;
    DSP_THROW("{}: value {} has no name", noun_, static_cast<int>(e));
  }
  // The value named `s`; InvalidArgument "unknown <noun> 's' (a, b, c)" otherwise.
  E parse(std::string_view s) const {
    if (const std::optional<E> v = find(s)) return *v;
    DSP_THROW_T(InvalidArgument, "unknown {} '{}' ({})", noun_, s, list(", "));
  }
  // The value named `s`, or none (a format's reader gives its own message).
  std::optional<E> find(std::string_view s) const {
    for (const Entry& x : entries_)
      if (s == x.name) return x.value;
    return std::nullopt;
  }
  std::string list(const char* sep) const {
    std::string out;
    for (const Entry& x : entries_) {
      if (operator[](x.value) == x.name && *x.name != '\0') {
        out += (out.empty() ? "" : sep) + std::string(x.name);
      }
    }
    return out;
  }
  const char* noun() const { return noun_; }

 private:
  const char* noun_;
  std::vector<Entry> entries_;
};

// E is a choice: names_of(E) is declared beside it.
template <class E, class = void>
struct IsChoice : std::false_type {};
template <class E>
struct IsChoice<E, std::void_t<decltype(names_of(std::declval<E>()))>> : std::is_enum<E> {};
template <class E>
inline constexpr bool is_choice_v = IsChoice<E>::value;

template <class E, class = std::enable_if_t<is_choice_v<E>>>
const char* name_of(E e) {
  return names_of(e)[e];
}

template <class E>
E parse_choice(std::string_view s) {
  return names_of(E{}).parse(s);
}

}  // namespace dsp

template <class E>
struct fmt::formatter<E, char, std::enable_if_t<dsp::is_choice_v<E>>>
    : fmt::formatter<fmt::string_view> {
  template <class Context>
  auto format(E e, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(dsp::name_of(e), ctx);
  }
};

// A choice in JSON is its name: {"loss": "bce"}, never the enum's number.
template <class E>
struct nlohmann::adl_serializer<E, std::enable_if_t<dsp::is_choice_v<E>>> {
  static void to_json(nlohmann::json& j, E e) { j = dsp::name_of(e); }
  static void from_json(const nlohmann::json& j, E& e) {
    e = dsp::parse_choice<E>(j.get<std::string>());
  }
};
