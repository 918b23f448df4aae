// AtomicFile: temporary name + rename, so readers never see half a file.
#include "emo/base/file_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace emo {

AtomicFile::~AtomicFile() {
  if (f_ && !stdout_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

Status AtomicFile::open(const std::string& path) {
  path_ = path;
  if (path == "-") {
    f_ = stdout;
    stdout_ = true;
    return {};
  }
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) return make_error(path, std::string("cannot write: ") + std::strerror(errno));
  return {};
}

Status AtomicFile::write(std::string_view data) {
  if (!f_) return make_error(path_, "file is not open");
  if (std::fwrite(data.data(), 1, data.size(), f_) != data.size()) {
    failed_ = true;
    return make_error(path_, std::string("write failed: ") + std::strerror(errno));
  }
  return {};
}

Status AtomicFile::commit() {
  if (!f_) return make_error(path_, "file is not open");
  if (stdout_) {
    std::fflush(f_);
    f_ = nullptr;
    return {};
  }
  bool ok = !failed_ && std::fflush(f_) == 0;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    return make_error(path_, "write failed (disk full?)");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    std::remove(tmp_.c_str());
    return make_error(path_, std::string("cannot rename into place: ") + std::strerror(err));
  }
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view data) {
  AtomicFile f;
  EMO_RETURN_IF_ERROR(f.open(path));
  EMO_RETURN_IF_ERROR(f.write(data));
  return f.commit();
}

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return make_error(path, "is a directory, not a file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(path, std::string("cannot open: ") + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return make_error(path, "read error");
  return out;
}

}  // namespace emo
