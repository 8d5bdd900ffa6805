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

/// Gemma-4 (Gemma4ImageProcessor with an image already sized to multiples of patch × pooling
/// kernel, so that it is not resized): pixels rescaled to [0, 1] without normalisation, patches
/// in raster order, each row (y, x, channel) flattened (convert_image_to_patches). Error
/// (BadInput) when a side is not such a multiple or the grid passes the position table.
Result<ImagePatches> patchifyGemma4(const Image& image, const model::VisionSpec& vision);

/// The patches of `image` for `vision`'s tower: patchifyGemma4 for Gemma-4, patchify otherwise.
Result<ImagePatches> imagePatches(const Image& image, const model::VisionSpec& vision);

/// Patches per image-token side: Gemma-4's pooling kernel, the Qwen towers' spatial merge.
std::int64_t imageTokenSide(const model::VisionSpec& vision);

/// What a Gemma-4 image run reads from the config beside the spec: the text tower's
/// use_bidirectional_attention ("vision": image tokens attend both ways within their run), its
/// pad_token_id (the id the image rows are embedded with before the features replace them) and
/// vision_config.rms_norm_eps (the tower's and embed_vision's norms) and rope_parameters'
/// rope_theta (the tower's 2-D rotary), which the spec reads but does not keep.
struct Gemma4ImageRules {
    bool imageBidirectional = false;
    std::int64_t padTokenId = 0;
    double visionEps = 1e-6;
    double visionRopeTheta = 100.0;
};

/// Reads those keys from the config the spec was read from (`spec.origin`: a config.json or
/// its folder); an error naming the file when it cannot be read.
Result<Gemma4ImageRules> gemma4ImageRules(const model::ModelSpec& spec);

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
