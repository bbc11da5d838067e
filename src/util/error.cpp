#include "xsa/util/error.h"

#include <cstdio>
#include <cstdlib>

namespace xsa {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "xsa: internal error at %s:%d: check '%s' failed: %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace xsa
