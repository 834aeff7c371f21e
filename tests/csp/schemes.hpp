#pragma once
// A sampling scheme by the command line's choices, for tests that run every scheme: --sampler
// KIND with the benches' --biased and --replace, built (and checked) as SamplerConfig::options
// builds it.
#include "csp/sampler_options.hpp"

namespace dsp {

inline SamplingScheme scheme_of(SamplerKind kind, bool biased = false, bool replace = false) {
  SamplerConfig c;
  c.kind = kind;
  c.biased = biased;
  c.replace = replace;
  return c.options().scheme;
}

}  // namespace dsp
