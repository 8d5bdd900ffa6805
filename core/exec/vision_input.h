#pragma once

// Internal to core/exec: turning an image into the Qwen VL vision tower's patch rows, and the
// M-RoPE position ids of a prompt with image tokens (HF get_rope_index).

#include "base/result.h"
#include "exec/engine.h"
#include "model/model_spec.h"

#include <cstdint>
#include <span>
#include <vector>

namespace day0::exec::detail {

/// An image cut into patches, in the processor's order: merge windows in raster order, the
/// patches of a window in raster order; each row is (channel, frame, y, x) flattened.
struct ImagePatches {
    std::vector<double> values; ///< [patches, channels × temporal × patch × patch]
    std::int64_t gridT = 1;
    std::int64_t gridH = 0; ///< patches per column
    std::int64_t gridW = 0; ///< patches per row
    [[nodiscard]] std::int64_t patches() const { return gridT * gridH * gridW; }
};

/// Normalises (Qwen3-VL: mean 0.5, std 0.5; Qwen2-VL and Qwen2.5-VL: CLIP's) and patchifies `image`
/// for `vision`; the still image fills every temporal frame. Error (BadInput) when a side is not a
/// multiple of patch × merge.
Result<ImagePatches> patchify(const Image& image, const model::VisionSpec& vision);

/// The image tokens of a prompt and their M-RoPE positions.
struct MropeLayout {
    std::vector<std::int64_t> ids; ///< the prompt with one image-pad token expanded if needed
    std::vector<std::int64_t> imageRows; ///< rows holding image tokens, in order
    std::vector<std::int64_t> positions3; ///< [3, ids.size()] (t, h, w) positions
    std::int64_t delta = 0; ///< decode step i (0-based row) gets position i + delta
};

/// Places an image of `tokens` merged tokens (grid mergedH × mergedW, one frame) at the runs of
/// `imageTokenId` in `prompt`: text tokens count up from the previous maximum + 1, image tokens
/// get (t, h, w) = start + (0, row, column). A single pad token is expanded to `tokens`; any
/// other count that differs from `tokens` is an error naming both.
Result<MropeLayout> mropeLayout(std::span<const std::int64_t> prompt, std::int64_t imageTokenId,
    std::int64_t mergedH, std::int64_t mergedW);

} // namespace day0::exec::detail
