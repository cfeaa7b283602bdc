#include "fs/client/client_error.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace cudafs::client {
namespace {

thread_local std::string last_error;

}  // namespace

int Fail(int error, const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  last_error = text;
  return -error;
}

const char* LastError() { return last_error.c_str(); }

}  // namespace cudafs::client
