#pragma once

// Internal: accounting for every key of a config (DESIGN.md: never silently wrong). A key is
// understood (the reader read it), inert (it changes no structure or parameter count: token
// ids, dropout, generation settings; a documented list), or unknown: structure Day0 does not
// model, which is an error unless the reading is partial.

#include "model/config_sections.h"
#include "model/model_spec.h"

#include <string>
#include <vector>

namespace day0::model::detail {

/// True if `key` is inert in every family (config_audit.cpp lists them with the reason).
bool isInertKey(const std::string& key);

/// Classifies every key of every section of `accounting` into spec.keys and spec.ignored.
/// `familyInert` adds keys the family's own modeling code ignores. `what` names the reader in
/// messages ("the deepseek_v3 reader", "the generic Llama-style decoder"). With unknown keys:
/// an error naming the file, the model_type and every key (with its reason), unless `partial`,
/// which sets spec.partial instead.
Result<void> auditKeys(const Accounting& accounting, const std::vector<std::string>& familyInert,
    const std::string& what, bool partial, ModelSpec& spec);

/// Checks what every family reader must leave behind: one LayerSpec per decoder and MTP layer,
/// and the dimensions every layer kind it names needs (a linear-attention layer needs
/// spec.linearAttention, a Mamba layer spec.mamba, ...). A failure is a reader bug
/// (Error::internal naming the layer).
Result<void> checkConsistency(const ModelSpec& spec);

} // namespace day0::model::detail
