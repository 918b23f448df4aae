// Result<T>: a value or an Error, returned by every library entry point.
// Exceptions never cross the library API; only the CLI prints. An Error names
// where it happened (file[:where]), what went wrong and, optionally, a note
// that tells the user the fix, as `error: FILE:WHERE: WHAT` / `note: NOTE`.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace emo {

struct Error {
  std::string where;  // "trace.json" or "trace.json:event 12"; may be empty
  std::string what;   // one line, no trailing period
  std::string note;   // optional hint naming the fix

  // "where: what" (or just "what").
  std::string message() const { return where.empty() ? what : where + ": " + what; }
};

inline Error make_error(std::string where, std::string what, std::string note = {}) {
  return Error{std::move(where), std::move(what), std::move(note)};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}        // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace emo

// Propagate an error from an expression yielding Status or Result<T>.
#define EMO_RETURN_IF_ERROR(expr)                     \
  do {                                                \
    auto emo_status_ = (expr);                        \
    if (!emo_status_.ok()) return emo_status_.error(); \
  } while (0)
