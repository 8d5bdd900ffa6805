#pragma once

// Internals of RunStore shared by its two source files; not part of the module's interface.

#include "history/run_store.h"
#include "history/sqlite_db.h"

#include <mutex>
#include <string>
#include <unordered_map>

namespace day0::history {

namespace detail {

/// The connection and statement cache behind a RunStore.
struct StoreState {
    Database db; // declared first so that the cached statements are finalised before it closes
    mutable std::mutex mutex;
    mutable std::unordered_map<std::string, Statement> statements;

    /// A prepared statement for `sql`, prepared once per store and reset before it is returned.
    Result<Statement*> statement(const std::string& sql) const;
};

/// The runs columns read into a RunInfo, in the order readInfo() expects.
extern const char* const kInfoColumns;
/// Reads a RunInfo from a row selected with kInfoColumns.
RunInfo readInfo(const Statement& row);

} // namespace detail

} // namespace day0::history
