// AtomicFile: temporary name + rename, so readers never see half a file.
#include "emo/base/file_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

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

}  // namespace emo
