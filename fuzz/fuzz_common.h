// Shared by the fuzz targets. A reader's refusal (xsa::Error, one line naming what is wrong) is a
// right answer to any input; a crash, a sanitizer report, another exception escaping, a hang or a
// huge allocation is a finding. Properties that must hold are checked with XSA_FUZZ_EXPECT, which
// aborts so that libFuzzer keeps the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "xsa/util/error.h"

#define XSA_FUZZ_EXPECT(cond)                                                          \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

namespace xsa::fuzz {

// Runs fn; an xsa::Error is a refusal and returns false.
template <typename Fn>
bool accepts(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const xsa::Error&) {
    return false;
  }
}

}  // namespace xsa::fuzz
