#pragma once
// The message of the exception of type E (dsp::Error by default) that f throws, "no error" when
// it throws none: for tests that compare a message exactly.
#include <string>

#include "core/error.hpp"

namespace dsp::test {

template <class E = Error, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace dsp::test
