#pragma once
// A command's options, each declared once: its flag, its JSON key (also the Python keyword), its
// help, and how its value is read from the command line's text or from JSON into the command's
// config struct C and written back. The CLI's flags and --help (tools/option_cli.hpp), --config
// files and the Python bindings' keywords (read_options) and the config's JSON (write_options) are
// all made from one table, so a new option is one entry plus its use. What a value may be is
// checked once, by the config's own validate(), not here.
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "core/choice.hpp"
#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/memory.hpp"

namespace dsp {

template <class C>
struct Option {
  std::string flag;        // "--batch-size"; empty: a JSON key only
  std::string key;         // "batch_size"; empty: a command-line flag only
  std::string short_flag;  // "-n": another spelling of the flag on the command line
  std::string help;
  std::string type;         // the value in --help: INT, UINT, FLOAT, TEXT, LIST, TEXT:{a,b}, ...
  bool takes_value = true;  // false: a switch (--preaggregate), `parse` gets ""
  // With takes_value: the value may be left out on the command line (--resume [auto]); `parse`
  // then gets "".
  bool value_optional = false;
  // dsp train --resume: the value may differ from the resumed run's (--epochs, the paths, ...);
  // any other given option must equal the recorded one (resume_config).
  bool may_change_on_resume = false;
  std::function<void(C&, const std::string&)> parse;    // the flag's text
  std::function<void(C&, const nlohmann::json&)> read;  // the key's JSON value
  std::function<nlohmann::json(const C&)> write;        // the key's JSON value
};

template <class C>
using OptionTable = std::vector<Option<C>>;

namespace options {

// A type read from text by its own parse and written by str() (Device, Transport).
template <class T, class = void>
struct Parsed : std::false_type {};
template <class T>
struct Parsed<T, std::void_t<decltype(T::parse(std::string())), decltype(std::declval<T>().str())>>
    : std::true_type {};

// A list of choices (--preaggregate-kinds mean,gcn): each name read by the choice's table.
template <class T>
struct ChoiceList : std::false_type {};
template <class E>
struct ChoiceList<std::vector<E>> : std::bool_constant<is_choice_v<E>> {};

// A value of type T from a flag's text, one way for every option of that type.
template <class T>
T from_text(const std::string& s, const std::string& flag) {
  if constexpr (std::is_same_v<T, std::string>) {
    return s;
  } else if constexpr (Parsed<T>::value) {
    return T::parse(s);
  } else if constexpr (is_choice_v<T>) {
    return parse_choice<T>(s);
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    return parse_int_list(s, flag.c_str());
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return split_list(s);
  } else if constexpr (ChoiceList<T>::value) {
    T out;
    for (const std::string& name : split_list(s))
      out.push_back(parse_choice<typename T::value_type>(name));
    return out;
  } else if constexpr (std::is_same_v<T, bool>) {
    DSP_CHECK_ARG(s == "true" || s == "false", "{} must be true or false, got '{}'", flag, s);
    return s == "true";
  } else if constexpr (std::is_floating_point_v<T>) {
    return parse_double(s, flag.c_str());
  } else if constexpr (std::is_unsigned_v<T>) {  // "-1" must not wrap to 2^64 - 1
    DSP_CHECK_ARG(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos,
                  "{}: must be a non-negative integer, got '{}'", flag, s);
    const uint64_t v = std::stoull(s);
    DSP_CHECK_ARG(v <= std::numeric_limits<T>::max(), "{}: {} is out of range", flag, v);
    return static_cast<T>(v);
  } else {
    const int64_t v = parse_int(s, flag.c_str());
    DSP_CHECK_ARG(v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max(),
                  "{}: {} is out of range", flag, v);
    return static_cast<T>(v);
  }
}

// The value in --help: "INT", ..., "TEXT:{a,b}" for a choice.
template <class T>
std::string type_of() {
  if constexpr (is_choice_v<T>) return "TEXT:{" + names_of(T{}).list(",") + "}";
  if constexpr (ChoiceList<T>::value) {
    return "LIST:{" + names_of(typename T::value_type{}).list(",") + "}";
  }
  if constexpr (std::is_same_v<T, std::string> || Parsed<T>::value) return "TEXT";
  if constexpr (std::is_same_v<T, std::vector<int>>) return "LIST";
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "LIST";
  if constexpr (std::is_floating_point_v<T>) return "FLOAT";
  if constexpr (std::is_unsigned_v<T>) return "UINT";
  return "INT";
}

template <class C>
Option<C> declare(std::string flag, std::string key, std::string help, bool takes_value = true) {
  Option<C> o;
  o.flag = std::move(flag);
  o.key = std::move(key);
  o.help = std::move(help);
  o.takes_value = takes_value;
  return o;
}

// A field of C read and written as it is; `get(C&)` returns a reference to it. A choice (an enum
// with its names table, core/choice.hpp) is read and written by its names, and its parser refuses
// any other. `choices` only shows in --help for a text field: the config's validate() checks it.
template <class C, class Get>
Option<C> value(std::string flag, std::string key, std::string help, Get get,
                const std::string& choices = "") {
  using T = std::decay_t<decltype(get(std::declval<C&>()))>;
  Option<C> o = declare<C>(flag, std::move(key), std::move(help));
  o.type = choices.empty() ? type_of<T>() : "TEXT:{" + choices + "}";
  o.parse = [get, flag](C& c, const std::string& s) { get(c) = from_text<T>(s, flag); };
  if constexpr (Parsed<T>::value) {
    o.read = [get](C& c, const nlohmann::json& v) { get(c) = T::parse(v.get<std::string>()); };
    o.write = [get](const C& c) { return nlohmann::json(get(const_cast<C&>(c)).str()); };
  } else if constexpr (is_choice_v<T>) {
    o.read = [get](C& c, const nlohmann::json& v) {
      get(c) = parse_choice<T>(v.get<std::string>());
    };
    o.write = [get](const C& c) { return nlohmann::json(name_of(get(const_cast<C&>(c)))); };
  } else if constexpr (ChoiceList<T>::value) {  // ["mean", "gcn"] or the flag's "mean,gcn"
    o.read = [get, flag](C& c, const nlohmann::json& v) {
      get(c) = v.is_string() ? from_text<T>(v.get<std::string>(), flag) : v.get<T>();
    };
    o.write = [get](const C& c) { return nlohmann::json(get(const_cast<C&>(c))); };
  } else if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
    o.read = [get, key = o.key](C& c, const nlohmann::json& v) {
      DSP_CHECK_FORMAT(v.is_number_unsigned(), "'{}' must be a non-negative integer", key);
      get(c) = v.get<T>();
    };
    o.write = [get](const C& c) { return nlohmann::json(get(const_cast<C&>(c))); };
  } else {
    o.read = [get](C& c, const nlohmann::json& v) { get(c) = v.get<T>(); };
    o.write = [get](const C& c) { return nlohmann::json(get(const_cast<C&>(c))); };
  }
  return o;
}

// `o`, which dsp train --resume lets differ from the resumed run's (Option::may_change_on_resume).
template <class C>
Option<C> resumable(Option<C> o) {
  o.may_change_on_resume = true;
  return o;
}

// A switch: given on the command line means true; a boolean in JSON.
template <class C, class Get>
Option<C> toggle(std::string flag, std::string key, std::string help, Get get) {
  Option<C> o = value<C>(std::move(flag), std::move(key), std::move(help), get);
  o.takes_value = false;
  o.parse = [get](C& c, const std::string&) { get(c) = true; };
  return o;
}

// A byte count: "8G", "512M", "1000" on the command line; a number or such a text in JSON.
template <class C, class Get>
Option<C> bytes(std::string flag, std::string key, std::string help, Get get) {
  Option<C> o = value<C>(flag, std::move(key), std::move(help), get);
  o.type = "SIZE";
  o.parse = [get, flag](C& c, const std::string& s) {
    get(c) = static_cast<std::decay_t<decltype(get(c))>>(parse_bytes(flag, s));
  };
  o.read = [get, flag](C& c, const nlohmann::json& v) {  // 8589934592 or "8G"
    using T = std::decay_t<decltype(get(c))>;
    get(c) = v.is_string() ? static_cast<T>(parse_bytes(flag, v.get<std::string>())) : v.get<T>();
  };
  return o;
}

// The options of a part S of C (a module's own options struct inside a command's config): the
// same flags, keys and checks, reading and writing `get(c)`.
template <class C, class S, class Get>
Option<C> embed(const Option<S>& o, Get get) {
  Option<C> e;
  e.flag = o.flag;
  e.key = o.key;
  e.short_flag = o.short_flag;
  e.help = o.help;
  e.type = o.type;
  e.takes_value = o.takes_value;
  e.value_optional = o.value_optional;
  e.may_change_on_resume = o.may_change_on_resume;
  if (o.parse) e.parse = [p = o.parse, get](C& c, const std::string& s) { p(get(c), s); };
  if (o.read) e.read = [r = o.read, get](C& c, const nlohmann::json& v) { r(get(c), v); };
  if (o.write) e.write = [w = o.write, get](const C& c) { return w(get(const_cast<C&>(c))); };
  return e;
}

// Every option of a part's table, embedded (see embed).
template <class C, class S, class Get>
OptionTable<C> embed_all(const OptionTable<S>& table, Get get) {
  OptionTable<C> out;
  for (const Option<S>& o : table) out.push_back(embed<C>(o, get));
  return out;
}

// `part`'s entries appended to `table` (a command's own entries, then its modules' tables
// embedded whole).
template <class C>
void append(OptionTable<C>& table, OptionTable<C> part) {
  for (Option<C>& o : part) table.push_back(std::move(o));
}

// The entry of `table` with that key (a programming error if there is none).
template <class C>
const Option<C>& find(const OptionTable<C>& table, const std::string& key) {
  for (const Option<C>& o : table)
    if (o.key == key) return o;
  DSP_THROW("no option '{}' in the table", key);
}

}  // namespace options

// JSON of every keyed option of `c`.
template <class C>
nlohmann::json write_options(const OptionTable<C>& table, const C& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const Option<C>& o : table)
    if (!o.key.empty()) j[o.key] = o.write(c);
  return j;
}

// Reads the keys of JSON object `j` into `c`; FormatError "<what>: unknown key 'k'" or "<what>:
// key 'k' has the wrong type" (typos are never silently ignored).
template <class C>
void read_options(const OptionTable<C>& table, const nlohmann::json& j, C& c,
                  const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object(), "{}: expected a JSON object", what);
  std::map<std::string, const Option<C>*> by_key;
  for (const Option<C>& o : table)
    if (!o.key.empty()) by_key[o.key] = &o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto o = by_key.find(it.key());
    DSP_CHECK_FORMAT(o != by_key.end(), "{}: unknown key '{}'", what, it.key());
    try {
      o->second->read(c, it.value());
    } catch (const nlohmann::json::exception&) {
      DSP_THROW_T(FormatError, "{}: key '{}' has the wrong type", what, it.key());
    } catch (const FormatError& e) {
      DSP_THROW_T(FormatError, "{}: {}", what, e.what());
    }
  }
}

}  // namespace dsp
