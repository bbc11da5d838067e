// Errors. Two kinds, kept apart on purpose:
//  - xsa::Error: bad input from the user (a file, a value). Carries one line that names the file or
//    value and what is wrong; the CLI prints it and exits non-zero. Nothing is written after it.
//  - XSA_CHECK: a broken internal contract (a bug). Always on; reports file, line and the
//  condition.
#pragma once

#include <stdexcept>
#include <string>

#include "xsa/util/fmt.h"

namespace xsa {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& msg);

}  // namespace xsa

#define XSA_CHECK(cond, ...)                                                               \
  do {                                                                                     \
    if (!(cond)) ::xsa::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)
