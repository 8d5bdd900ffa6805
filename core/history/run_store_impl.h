#pragma once

// Internals of RunStore shared by its two source files; not part of the module's interface.

#include "history/run_store.h"
#include "history/schema.h"

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace day0::history {

namespace detail {

/// Hash for string maps that look up by string_view.
struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

/// Text → id of rows of the `names` table.
using NameIds = std::unordered_map<std::string, std::int64_t, TextHash, std::equal_to<>>;

/// The connection and caches behind a RunStore.
struct StoreState {
    Database db; // declared first so that the cached statements are finalised before it closes
    mutable std::mutex mutex;
    mutable std::unordered_map<std::string, Statement> statements;
    /// Names known to be committed. Rows of `names` are never changed nor deleted, so an id once
    /// committed stays valid for every connection; names met inside a transaction join only
    /// after it commits.
    NameIds committedNames;

    /// A prepared statement for `sql`, prepared once per store and reset before it is returned.
    Result<Statement*> statement(const std::string& sql) const;
};

/// The runs columns read into a RunInfo, in the order readInfo() expects.
extern const char* const kInfoColumns;
/// Reads a RunInfo from a row selected with kInfoColumns.
RunInfo readInfo(const Statement& row);

} // namespace detail

} // namespace day0::history
