// Writing output files so that an interrupted run never leaves a partial file
// that looks complete: write to "NAME.tmp.<pid>", then rename over NAME.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "emo/base/result.h"

namespace emo {

class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless commit() succeeded

  // "-" means standard output (written through, commit just flushes).
  Status open(const std::string& path);
  Status write(std::string_view data);
  Status commit();
  std::FILE* handle() { return f_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool stdout_ = false;
  bool failed_ = false;
};

// Whole-file convenience: atomically replaces `path` ("-": stdout) with `data`.
Status write_file_atomic(const std::string& path, std::string_view data);

// The whole file as text; a missing or unreadable file (or a directory) -> Error naming it.
Result<std::string> read_file(const std::string& path);

}  // namespace emo
