#include "exec/vision_input.h"

#include "base/json_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace day0::exec {

namespace {

/// Next whitespace-separated header field of a PPM, skipping '#' comments.
bool ppmField(std::istream& in, std::string& out)
{
    out.clear();
    char c = 0;
    while (in.get(c)) {
        if (c == '#') {
            std::string skip;
            std::getline(in, skip);
            continue;
        }
        if (std::isspace(static_cast<unsigned char>(c)) == 0) {
            out += c;
            break;
        }
    }
    while (in.get(c) && std::isspace(static_cast<unsigned char>(c)) == 0) {
        out += c;
    }
    return !out.empty();
}

} // namespace

Result<Image> readPpm(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return Error::badInput(fmt::format("{}: cannot open the image", path.string()));
    }
    std::string magic;
    std::string w;
    std::string h;
    std::string maxval;
    if (!ppmField(in, magic) || magic != "P6") {
        return Error::badInput(fmt::format("{}: not a binary PPM (expected magic 'P6', found '{}')",
            path.string(), magic.substr(0, 8)));
    }
    if (!ppmField(in, w) || !ppmField(in, h) || !ppmField(in, maxval)) {
        return Error::badInput(fmt::format("{}: truncated PPM header", path.string()));
    }
    Image img;
    try {
        img.width = std::stoll(w);
        img.height = std::stoll(h);
    } catch (const std::exception&) {
        return Error::badInput(
            fmt::format("{}: PPM size '{} {}' is not two integers", path.string(), w, h));
    }
    if (maxval != "255") {
        return Error::badInput(
            fmt::format("{}: PPM maxval is {}, only 8-bit (255) is read", path.string(), maxval));
    }
    if (img.width <= 0 || img.height <= 0 || img.width * img.height > (1 << 26)) {
        return Error::badInput(fmt::format(
            "{}: PPM size {}x{} is out of range", path.string(), img.width, img.height));
    }
    img.rgb.resize(std::size_t(img.width * img.height * 3));
    in.read(reinterpret_cast<char*>(img.rgb.data()), std::streamsize(img.rgb.size()));
    if (in.gcount() != std::streamsize(img.rgb.size())) {
        return Error::badInput(fmt::format("{}: PPM pixel data is truncated ({} of {} bytes)",
            path.string(), in.gcount(), img.rgb.size()));
    }
    return img;
}

Image syntheticImage(std::int64_t height, std::int64_t width)
{
    Image img;
    img.height = height;
    img.width = width;
    img.rgb.resize(std::size_t(height * width * 3));
    for (std::int64_t y = 0; y < height; ++y) {
        for (std::int64_t x = 0; x < width; ++x) {
            auto* p = &img.rgb[std::size_t((y * width + x) * 3)];
            p[0] = std::uint8_t((255 * x) / std::max<std::int64_t>(width - 1, 1));
            p[1] = std::uint8_t((255 * y) / std::max<std::int64_t>(height - 1, 1));
            p[2] = std::uint8_t(((x / 8 + y / 8) % 2) * 200 + (x * y) % 37);
        }
    }
    return img;
}

Result<ImageInput> loadImageInput(const std::filesystem::path& checkpoint, const std::string& spec)
{
    ImageInput input;
    constexpr std::string_view kSynthetic = "synthetic:";
    if (spec.starts_with(kSynthetic)) {
        const std::string size = spec.substr(kSynthetic.size());
        const auto x = size.find('x');
        std::int64_t h = 0;
        std::int64_t w = 0;
        try {
            h = std::stoll(size.substr(0, x));
            w = x == std::string::npos ? 0 : std::stoll(size.substr(x + 1));
        } catch (const std::exception&) {
        }
        if (h <= 0 || w <= 0 || h > 4096 || w > 4096) {
            return Error::badInput(
                fmt::format("--image '{}': expected synthetic:HxW with sides 1..4096", spec));
        }
        input.image = syntheticImage(h, w);
    } else {
        auto img = readPpm(spec);
        if (!img) {
            return img.error();
        }
        input.image = std::move(*img);
    }
    std::error_code ec;
    const auto config
        = std::filesystem::is_directory(checkpoint, ec) ? checkpoint / "config.json" : checkpoint;
    auto json = readJsonFile(config);
    if (!json) {
        return json.error();
    }
    const auto it = json->find("image_token_id");
    if (it == json->end() || !it->is_number_integer()) {
        return Error::badInput(
            fmt::format("{}: no integer 'image_token_id' (needed to place --image in the prompt)",
                config.string()));
    }
    input.imageTokenId = it->get<std::int64_t>();
    return input;
}

namespace detail {

Result<ImagePatches> patchify(const Image& image, const model::VisionSpec& vision)
{
    const std::int64_t p = vision.patchSize;
    const std::int64_t m = vision.spatialMergeSize;
    const std::int64_t tp = vision.temporalPatchSize;
    const std::int64_t c = vision.inChannels;
    if (c != 3) {
        return Error::unsupported(
            fmt::format("vision tower with {} input channels (RGB images only)", c));
    }
    if (image.height % (p * m) != 0 || image.width % (p * m) != 0 || image.height == 0
        || image.width == 0) {
        return Error::badInput(fmt::format(
            "image is {}x{} (HxW); this vision tower needs sides that are multiples of {} "
            "(patch {} × merge {}); resize it first",
            image.height, image.width, p * m, p, m));
    }
    ImagePatches out;
    out.gridH = image.height / p;
    out.gridW = image.width / p;
    const std::int64_t row = c * tp * p * p;
    out.values.resize(std::size_t(out.patches() * row));
    // The processors rescale by 1/255, then normalise per channel: Qwen3-VL with mean = std =
    // 0.5, Qwen2-VL and Qwen2.5-VL with OpenAI CLIP's mean and std.
    std::array<double, 3> mean { 0.5, 0.5, 0.5 };
    std::array<double, 3> stdev { 0.5, 0.5, 0.5 };
    if (vision.kind == "qwen2_vl" || vision.kind == "qwen2_5_vl") {
        mean = { 0.48145466, 0.4578275, 0.40821073 };
        stdev = { 0.26862954, 0.26130258, 0.27577711 };
    }
    const auto norm = [&](std::uint8_t v, std::int64_t ch) {
        return (double(v) / 255.0 - mean[std::size_t(ch)]) / stdev[std::size_t(ch)];
    };
    std::int64_t index = 0;
    for (std::int64_t bh = 0; bh < out.gridH / m; ++bh) {
        for (std::int64_t bw = 0; bw < out.gridW / m; ++bw) {
            for (std::int64_t mh = 0; mh < m; ++mh) {
                for (std::int64_t mw = 0; mw < m; ++mw, ++index) {
                    const std::int64_t py0 = (bh * m + mh) * p;
                    const std::int64_t px0 = (bw * m + mw) * p;
                    double* dst = &out.values[std::size_t(index * row)];
                    for (std::int64_t ch = 0; ch < c; ++ch) {
                        for (std::int64_t t = 0; t < tp; ++t) {
                            for (std::int64_t y = 0; y < p; ++y) {
                                for (std::int64_t x = 0; x < p; ++x) {
                                    const auto px = image.rgb[std::size_t(
                                        ((py0 + y) * image.width + px0 + x) * 3 + ch)];
                                    *dst++ = norm(px, ch);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    return out;
}

Result<ImagePatches> patchifyGemma4(const Image& image, const model::VisionSpec& vision)
{
    const std::int64_t p = vision.patchSize;
    const std::int64_t k = std::max<std::int64_t>(vision.poolingKernel, 1);
    if (vision.inChannels != 3) {
        return Error::unsupported(fmt::format(
            "vision tower with {} input channels (RGB images only)", vision.inChannels));
    }
    if (image.height % (p * k) != 0 || image.width % (p * k) != 0 || image.height == 0
        || image.width == 0) {
        return Error::badInput(fmt::format(
            "image is {}x{} (HxW); the Gemma-4 vision tower needs sides that are multiples of {} "
            "(patch {} × pooling kernel {}); resize it first (Gemma4ImageProcessor's "
            "aspect-ratio-preserving resize is not reproduced)",
            image.height, image.width, p * k, p, k));
    }
    ImagePatches out;
    out.gridH = image.height / p;
    out.gridW = image.width / p;
    if (std::max(out.gridH, out.gridW) > vision.positionTableSize) {
        return Error::badInput(fmt::format("image is {}x{} patches; the vision position table has "
                                           "{} positions per axis",
            out.gridH, out.gridW, vision.positionTableSize));
    }
    const std::int64_t row = 3 * p * p;
    out.values.resize(std::size_t(out.patches() * row));
    double* dst = out.values.data();
    for (std::int64_t py = 0; py < out.gridH; ++py) {
        for (std::int64_t px = 0; px < out.gridW; ++px) {
            for (std::int64_t y = 0; y < p; ++y) {
                for (std::int64_t x = 0; x < p; ++x) {
                    const auto* pixel
                        = &image.rgb[std::size_t(((py * p + y) * image.width + px * p + x) * 3)];
                    for (std::int64_t ch = 0; ch < 3; ++ch) {
                        *dst++ = double(pixel[ch]) / 255.0;
                    }
                }
            }
        }
    }
    return out;
}

Result<ImagePatches> imagePatches(const Image& image, const model::VisionSpec& vision)
{
    return vision.kind == "gemma4" ? patchifyGemma4(image, vision) : patchify(image, vision);
}

std::int64_t imageTokenSide(const model::VisionSpec& vision)
{
    return vision.kind == "gemma4" ? std::max<std::int64_t>(vision.poolingKernel, 1)
                                   : vision.spatialMergeSize;
}

Result<Gemma4ImageRules> gemma4ImageRules(const model::ModelSpec& spec)
{
    std::error_code ec;
    const std::filesystem::path origin(spec.origin);
    const auto path = std::filesystem::is_directory(origin, ec) ? origin / "config.json" : origin;
    if (!std::filesystem::is_regular_file(path, ec)) {
        return Error::badInput(fmt::format("'{}': no config.json to read the Gemma-4 image "
                                           "settings from (use_bidirectional_attention, "
                                           "pad_token_id, vision rms_norm_eps)",
            spec.origin));
    }
    auto json = readJsonFile(path);
    if (!json) {
        return json.error();
    }
    Gemma4ImageRules rules;
    const auto text = json->find("text_config");
    const nlohmann::json& t = text != json->end() && text->is_object() ? *text : *json;
    if (const auto it = t.find("use_bidirectional_attention"); it != t.end() && it->is_string()) {
        rules.imageBidirectional = it->get<std::string>() == "vision";
    }
    if (const auto it = t.find("pad_token_id"); it != t.end() && it->is_number_integer()) {
        rules.padTokenId = it->get<std::int64_t>();
    }
    const auto vision = json->find("vision_config");
    if (vision != json->end() && vision->is_object()) {
        if (const auto it = vision->find("rms_norm_eps"); it != vision->end() && it->is_number()) {
            rules.visionEps = it->get<double>();
        }
        const auto rope = vision->find("rope_parameters");
        if (rope != vision->end() && rope->is_object()) {
            if (const auto it = rope->find("rope_theta"); it != rope->end() && it->is_number()) {
                rules.visionRopeTheta = it->get<double>();
            }
        }
    }
    if (rules.padTokenId < 0 || rules.padTokenId >= spec.vocabSize) {
        return Error::badInput(fmt::format("{}: text pad_token_id {} is outside the vocabulary "
                                           "({})",
            path.string(), rules.padTokenId, spec.vocabSize));
    }
    return rules;
}

Result<MropeLayout> mropeLayout(std::span<const std::int64_t> prompt, std::int64_t imageTokenId,
    std::int64_t mergedH, std::int64_t mergedW)
{
    const std::int64_t tokens = mergedH * mergedW;
    const auto count = std::count(prompt.begin(), prompt.end(), imageTokenId);
    MropeLayout out;
    if (count == 1) {
        for (const auto id : prompt) {
            if (id == imageTokenId) {
                out.ids.insert(out.ids.end(), std::size_t(tokens), imageTokenId);
            } else {
                out.ids.push_back(id);
            }
        }
    } else if (count == tokens) {
        out.ids.assign(prompt.begin(), prompt.end());
    } else {
        return Error::badInput(fmt::format(
            "the prompt has {} image-pad tokens (id {}); the image needs {} (or one, which is "
            "expanded)",
            count, imageTokenId, tokens));
    }
    const auto n = std::int64_t(out.ids.size());
    out.positions3.assign(std::size_t(3 * n), 0);
    std::int64_t next = 0;
    for (std::int64_t i = 0; i < n;) {
        if (out.ids[std::size_t(i)] != imageTokenId) {
            for (int c = 0; c < 3; ++c) {
                out.positions3[std::size_t(c * n + i)] = next;
            }
            ++next;
            ++i;
            continue;
        }
        const std::int64_t start = next;
        for (std::int64_t k = 0; k < tokens; ++k, ++i) {
            out.imageRows.push_back(i);
            out.positions3[std::size_t(i)] = start;
            out.positions3[std::size_t(n + i)] = start + k / mergedW;
            out.positions3[std::size_t(2 * n + i)] = start + k % mergedW;
        }
        next = start + std::max(mergedH, mergedW);
    }
    out.delta = next - n;
    return out;
}

} // namespace detail

} // namespace day0::exec
