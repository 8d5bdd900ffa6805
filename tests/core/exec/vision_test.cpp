// Inputs of the vision path: image reading, patch order, M-RoPE positions, checkpoint layouts.
#include "exec/engine.h"
#include "exec/layout_weights.h"
#include "exec/vision_input.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace day0;

namespace {

model::VisionSpec smallVision()
{
    model::VisionSpec v;
    v.kind = "qwen3_vl";
    v.patchSize = 2;
    v.spatialMergeSize = 2;
    v.temporalPatchSize = 2;
    v.inChannels = 3;
    return v;
}

double norm(std::uint8_t v) { return (double(v) / 255.0 - 0.5) / 0.5; }

} // namespace

TEST(Vision, MropePositionsFollowTheImageGrid)
{
    // [text, text, <image_pad>, text] with a 2 x 3 merged grid: the pad is expanded to 6 rows.
    const std::vector<std::int64_t> prompt { 1, 2, 99, 3 };
    const auto l = exec::detail::mropeLayout(prompt, 99, 2, 3);
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->ids, (std::vector<std::int64_t> { 1, 2, 99, 99, 99, 99, 99, 99, 3 }));
    EXPECT_EQ(l->imageRows, (std::vector<std::int64_t> { 2, 3, 4, 5, 6, 7 }));
    const std::vector<std::int64_t> t { 0, 1, 2, 2, 2, 2, 2, 2, 5 };
    const std::vector<std::int64_t> h { 0, 1, 2, 2, 2, 3, 3, 3, 5 };
    const std::vector<std::int64_t> w { 0, 1, 2, 3, 4, 2, 3, 4, 5 };
    std::vector<std::int64_t> expected = t;
    expected.insert(expected.end(), h.begin(), h.end());
    expected.insert(expected.end(), w.begin(), w.end());
    EXPECT_EQ(l->positions3, expected);
    EXPECT_EQ(l->delta, 6 - 9); // the next token (row 9) sits at position 6
    // Already expanded prompts are kept; other pad counts are refused with both numbers.
    EXPECT_TRUE(exec::detail::mropeLayout(l->ids, 99, 2, 3).ok());
    const auto bad = exec::detail::mropeLayout(std::vector<std::int64_t> { 99, 99 }, 99, 2, 3);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("2 image-pad tokens"), std::string::npos);
    EXPECT_NE(bad.error().message.find("needs 6"), std::string::npos);
}

TEST(Vision, PatchesComeInMergeWindowOrder)
{
    exec::Image img;
    img.height = 4;
    img.width = 8;
    img.rgb.resize(4 * 8 * 3);
    for (std::size_t i = 0; i < img.rgb.size(); ++i) {
        img.rgb[i] = std::uint8_t(i % 251);
    }
    const auto px = [&](int y, int x, int c) { return img.rgb[std::size_t((y * 8 + x) * 3 + c)]; };
    const auto p = exec::detail::patchify(img, smallVision());
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->gridH, 2);
    EXPECT_EQ(p->gridW, 4);
    const std::size_t row = 3 * 2 * 2 * 2; // channels x frames x patch x patch
    ASSERT_EQ(p->values.size(), 8 * row);
    // patch 1 = window (0, 0), inner (0, 1): pixels from (0, 2); patch 4 = window (0, 1): (0, 4);
    // patch 2 = inner (1, 0): (2, 0). Within a row: channel, frame, y, x.
    EXPECT_DOUBLE_EQ(p->values[1 * row + 0], norm(px(0, 2, 0)));
    EXPECT_DOUBLE_EQ(p->values[4 * row + 0], norm(px(0, 4, 0)));
    EXPECT_DOUBLE_EQ(p->values[2 * row + 0], norm(px(2, 0, 0)));
    EXPECT_DOUBLE_EQ(p->values[0 * row + 3], norm(px(1, 1, 0))); // y 1, x 1 of frame 0
    EXPECT_DOUBLE_EQ(p->values[0 * row + 4], norm(px(0, 0, 0))); // frame 1 repeats the image
    EXPECT_DOUBLE_EQ(p->values[0 * row + 8], norm(px(0, 0, 1))); // channel 1 starts at 8

    img.height = 6; // 6 is not a multiple of patch x merge = 4
    img.rgb.resize(6 * 8 * 3);
    const auto bad = exec::detail::patchify(img, smallVision());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("multiples of 4"), std::string::npos);
}

TEST(Vision, ReadsBinaryPpmAndNamesBadFiles)
{
    const auto dir = std::filesystem::temp_directory_path() / "day0_vision_ppm";
    std::filesystem::create_directories(dir);
    {
        std::ofstream f(dir / "ok.ppm", std::ios::binary);
        f << "P6\n# a comment\n2 1\n255\n";
        f.write("\x01\x02\x03\xfa\xfb\xfc", 6);
        std::ofstream(dir / "short.ppm", std::ios::binary) << "P6 4 4 255\n\x01\x02";
        std::ofstream(dir / "ascii.ppm", std::ios::binary) << "P3 1 1 255\n1 2 3\n";
    }
    const auto img = exec::readPpm(dir / "ok.ppm");
    ASSERT_TRUE(img.ok()) << img.error().message;
    EXPECT_EQ(img->width, 2);
    EXPECT_EQ(img->height, 1);
    EXPECT_EQ(img->rgb, (std::vector<std::uint8_t> { 1, 2, 3, 250, 251, 252 }));
    for (const char* name : { "short.ppm", "ascii.ppm", "missing.ppm" }) {
        const auto bad = exec::readPpm(dir / name);
        ASSERT_FALSE(bad.ok()) << name;
        EXPECT_NE(bad.error().message.find(name), std::string::npos) << bad.error().message;
    }
    std::filesystem::remove_all(dir);
}

TEST(Vision, FusedExpertsAreSlicedIntoLinearWeights)
{
    // E = 2 experts, H = 3, I = 2: gate_up_proj [E, H, 2I] (gate first), down_proj [E, I, H].
    std::vector<float> gateUp(2 * 3 * 4);
    std::vector<float> down(2 * 2 * 3);
    for (std::size_t i = 0; i < gateUp.size(); ++i) {
        gateUp[i] = float(i);
    }
    for (std::size_t i = 0; i < down.size(); ++i) {
        down[i] = 100.0f + float(i);
    }
    std::map<std::string, numerics::Tensor> tensors;
    tensors["model.language_model.layers.0.mlp.experts.gate_up_proj"]
        = numerics::Tensor::fromFloats({ 2, 3, 4 }, gateUp);
    tensors["model.language_model.layers.0.mlp.experts.down_proj"]
        = numerics::Tensor::fromFloats({ 2, 2, 3 }, down);
    tensors["lm_head.weight"] = numerics::Tensor::fromFloats({ 1, 1 }, std::vector<float> { 7 });
    exec::MemoryWeights source(tensors);
    model::ModelSpec spec;
    spec.hiddenSize = 3;
    spec.layout.textPrefix = "model.language_model";
    spec.moe = model::MoeSpec {};
    spec.moe->numExperts = 2;
    spec.moe->expertIntermediate = 2;
    spec.moe->packedExperts = true;
    exec::detail::LayoutWeights w(source, spec);
    EXPECT_TRUE(w.has("model.layers.0.mlp.experts.1.gate_proj.weight"));
    EXPECT_TRUE(w.has("lm_head.weight"));
    EXPECT_FALSE(w.has("model.layers.1.mlp.experts.0.up_proj.weight"));
    const auto up = w.read("model.layers.0.mlp.experts.1.up_proj.weight");
    ASSERT_TRUE(up.ok()) << up.error().message;
    ASSERT_EQ(up->shape(), (numerics::Shape { 2, 3 }));
    // up[i][h] = gate_up[1][h][2 + i]
    EXPECT_EQ(up->item(0), gateUp[12 + 0 * 4 + 2]);
    EXPECT_EQ(up->item(1), gateUp[12 + 1 * 4 + 2]);
    EXPECT_EQ(up->item(3), gateUp[12 + 0 * 4 + 3]);
    const auto gate = w.read("model.layers.0.mlp.experts.0.gate_proj.weight");
    ASSERT_TRUE(gate.ok());
    EXPECT_EQ(gate->item(1), gateUp[1 * 4 + 0]); // gate[0][1] = gate_up[0][1][0]
    const auto d = w.read("model.layers.0.mlp.experts.1.down_proj.weight");
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->shape(), (numerics::Shape { 3, 2 }));
    EXPECT_EQ(d->item(1), down[6 + 1 * 3 + 0]); // down_w[h 0][i 1] = down[1][1][0]
    const auto outOfRange = w.read("model.layers.0.mlp.experts.5.down_proj.weight");
    ASSERT_FALSE(outOfRange.ok());
    EXPECT_NE(outOfRange.error().message.find("expert 5"), std::string::npos);
}
