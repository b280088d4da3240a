// What every C++ shim of indolm shares: an error message handed to Rust (which frees it with the
// shim's free function), and `guarded`, which turns any C++ exception into that message and a
// false return (a c10::Error crossing `extern "C"` would abort the process).
#pragma once

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace indolm_shim {

// A malloc'ed copy of `message` for the Rust side.
inline char* copy_message(const std::string& message) {
  char* out = static_cast<char*>(std::malloc(message.size() + 1));
  if (out != nullptr) {
    std::memcpy(out, message.c_str(), message.size() + 1);
  }
  return out;
}

// Runs `body`, turning any exception into *error and a return of false. c10::Error's what()
// carries a C++ backtrace after its first line; only the message is kept.
template <typename Body>
bool guarded(char** error, Body body) {
  try {
    body();
    return true;
  } catch (const c10::Error& e) {
    *error = copy_message(e.msg());
  } catch (const std::exception& e) {
    *error = copy_message(e.what());
  } catch (...) {
    *error = copy_message("unknown C++ exception in libtorch");
  }
  return false;
}

}  // namespace indolm_shim
