#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace day0 {

/// Severity of a log message.
enum class LogLevel { Debug, Info, Warning, Error };

/// Receives every log message; the CLI prints to stderr, the GUI shows them in its log view.
using LogSink = std::function<void(LogLevel, std::string_view)>;

/// Replaces the process-wide sink (thread-safe) and returns the previous one.
LogSink setLogSink(LogSink sink);
/// Sets the lowest level that reaches the sink.
void setLogLevel(LogLevel level);
/// Sends a message to the sink (thread-safe).
void log(LogLevel level, std::string_view message);

inline void logInfo(std::string_view message) { log(LogLevel::Info, message); }
inline void logWarning(std::string_view message) { log(LogLevel::Warning, message); }
inline void logError(std::string_view message) { log(LogLevel::Error, message); }
inline void logDebug(std::string_view message) { log(LogLevel::Debug, message); }

} // namespace day0
