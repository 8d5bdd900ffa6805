#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace day0 {

/// What kind of failure an Error is; maps onto the CLI exit codes (DESIGN.md §3).
enum class ErrorCode {
    BadInput, ///< malformed or missing input, wrong usage (exit 2)
    CheckFailed, ///< a verification, validation or tolerance check failed (exit 1)
    Cancelled, ///< the user or a newer request cancelled the work
    Unsupported, ///< valid input that this build cannot handle (exit 2)
    Internal, ///< a bug or an environment failure (exit 3)
};

/// A failure with a message that names the file, tensor or field and says what is wrong.
struct Error {
    ErrorCode code = ErrorCode::Internal;
    std::string message;

    static Error badInput(std::string message)
    {
        return { ErrorCode::BadInput, std::move(message) };
    }
    static Error checkFailed(std::string message)
    {
        return { ErrorCode::CheckFailed, std::move(message) };
    }
    static Error cancelled() { return { ErrorCode::Cancelled, "cancelled" }; }
    static Error unsupported(std::string message)
    {
        return { ErrorCode::Unsupported, std::move(message) };
    }
    static Error internal(std::string message)
    {
        return { ErrorCode::Internal, std::move(message) };
    }

    /// Returns a copy whose message is prefixed by `context: ` (e.g. the file name).
    [[nodiscard]] Error withContext(const std::string& context) const
    {
        return { code, context + ": " + message };
    }
};

/// The CLI exit code for an error (1 check failed, 2 bad input, 3 internal).
inline int exitCodeFor(const Error& error)
{
    switch (error.code) {
    case ErrorCode::CheckFailed:
        return 1;
    case ErrorCode::BadInput:
    case ErrorCode::Unsupported:
    case ErrorCode::Cancelled:
        return 2;
    case ErrorCode::Internal:
        return 3;
    }
    return 3;
}

/// A value or an Error. Minimal stand-in for std::expected (C++23), which GCC 12 lacks in C++20.
template <typename T> class [[nodiscard]] Result {
public:
    Result(T value)
        : m_data(std::in_place_index<0>, std::move(value))
    {
    }
    Result(Error error)
        : m_data(std::in_place_index<1>, std::move(error))
    {
    }

    [[nodiscard]] bool ok() const { return m_data.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() &
    {
        assert(ok());
        return std::get<0>(m_data);
    }
    const T& value() const&
    {
        assert(ok());
        return std::get<0>(m_data);
    }
    T&& value() &&
    {
        assert(ok());
        return std::get<0>(std::move(m_data));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    [[nodiscard]] const Error& error() const
    {
        assert(!ok());
        return std::get<1>(m_data);
    }

private:
    std::variant<T, Error> m_data;
};

/// Success or an Error, for operations without a value.
template <> class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error)
        : m_error(std::move(error))
        , m_failed(true)
    {
    }

    [[nodiscard]] bool ok() const { return !m_failed; }
    explicit operator bool() const { return ok(); }
    [[nodiscard]] const Error& error() const
    {
        assert(m_failed);
        return m_error;
    }

private:
    Error m_error;
    bool m_failed = false;
};

/// Shorthand for a successful Result<void>.
inline Result<void> success() { return {}; }

} // namespace day0

/// Evaluates `expr` (a Result); on failure returns its Error from the enclosing function.
#define DAY0_TRY(expr)                                                                             \
    do {                                                                                           \
        auto&& day0TryResult_ = (expr);                                                            \
        if (!day0TryResult_.ok()) {                                                                \
            return day0TryResult_.error();                                                         \
        }                                                                                          \
    } while (false)
