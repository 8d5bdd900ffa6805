#include "checkpoint/manifest.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/sha256.h"
#include "checkpoint/strict_json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace day0::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s)
{
    std::transform(
        s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

Result<void> checkEntry(const ManifestEntry& e, const std::string& origin, const std::string& where)
{
    if (findInvalidUtf8(e.file) != std::string_view::npos) {
        return Error::badInput(fmt::format("{}{}: file name is not valid UTF-8", origin, where));
    }
    if (e.file.empty() || fs::path(e.file).is_absolute()) {
        return Error::badInput(
            fmt::format("{}{}: file name '{}' must be relative", origin, where, e.file));
    }
    for (const auto& part : fs::path(e.file)) {
        if (part == "..") {
            return Error::badInput(
                fmt::format("{}{}: file '{}' leaves the folder", origin, where, e.file));
        }
    }
    if (!isSha256Hex(e.sha256)) {
        return Error::badInput(
            fmt::format("{}{}: file '{}': sha256 must be 64 hex digits", origin, where, e.file));
    }
    return success();
}

Result<Manifest> finish(Manifest m, const std::string& origin)
{
    std::sort(m.files.begin(), m.files.end(),
        [](const auto& a, const auto& b) { return a.file < b.file; });
    for (std::size_t i = 1; i < m.files.size(); ++i) {
        if (m.files[i].file == m.files[i - 1].file) {
            return Error::badInput(
                fmt::format("{}: file '{}' listed twice", origin, m.files[i].file));
        }
    }
    return m;
}

/// Undoes GNU sha256sum's escaping of names holding '\' or a newline.
std::string unescapeName(std::string_view s)
{
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            out += s[i + 1] == 'n' ? '\n' : s[i + 1];
            ++i;
        } else {
            out += s[i];
        }
    }
    return out;
}

} // namespace

const ManifestEntry* Manifest::find(std::string_view file) const
{
    const auto it = std::lower_bound(files.begin(), files.end(), file,
        [](const ManifestEntry& e, std::string_view f) { return e.file < f; });
    return it != files.end() && it->file == file ? &*it : nullptr;
}

Result<Manifest> parseManifest(std::string_view text, const std::string& origin)
{
    auto parsed = parseStrictJson(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    const auto& root = *parsed;
    if (!root.is_object() || !root.contains("files") || !root["files"].is_array()) {
        return Error::badInput(fmt::format("{}: must be an object with an array 'files'", origin));
    }
    if (root.contains("version") && root["version"] != 1) {
        return Error::unsupported(fmt::format(
            "{}: manifest version {} (this build reads 1)", origin, dumpJson(root["version"])));
    }
    Manifest m;
    m.source = fs::path(origin).filename().string();
    std::size_t i = 0;
    for (const auto& f : root["files"]) {
        const auto where = fmt::format(": files[{}]", i++);
        if (!f.is_object() || !f.contains("file") || !f["file"].is_string() || !f.contains("sha256")
            || !f["sha256"].is_string()) {
            return Error::badInput(
                fmt::format("{}{}: needs string 'file' and 'sha256'", origin, where));
        }
        ManifestEntry e { f["file"].get<std::string>(), std::nullopt,
            lower(f["sha256"].get<std::string>()) };
        if (f.contains("size")) {
            if (!f["size"].is_number_unsigned()) {
                return Error::badInput(fmt::format(
                    "{}{}: file '{}': size must be a non-negative integer", origin, where, e.file));
            }
            e.size = f["size"].get<std::uint64_t>();
        }
        DAY0_TRY(checkEntry(e, origin, where));
        m.files.push_back(std::move(e));
    }
    return finish(std::move(m), origin);
}

Result<Manifest> parseSha256Sums(std::string_view text, const std::string& origin)
{
    Manifest m;
    m.source = fs::path(origin).filename().string();
    std::size_t lineNo = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto end = std::min(text.find('\n', pos), text.size());
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++lineNo;
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (line.empty() || line.front() == '#') {
            continue;
        }
        const auto where = fmt::format(":{}", lineNo);
        ManifestEntry e;
        if (line.rfind("SHA256 (", 0) == 0) {
            const auto close = line.rfind(") = ");
            if (close == std::string_view::npos || close < 8) {
                return Error::badInput(
                    fmt::format("{}{}: expected 'SHA256 (FILE) = HASH'", origin, where));
            }
            e.file = std::string(line.substr(8, close - 8));
            e.sha256 = lower(std::string(line.substr(close + 4)));
        } else {
            const bool escaped = line.front() == '\\';
            if (escaped) {
                line.remove_prefix(1);
            }
            if (line.size() < 66 || line[64] != ' ' || (line[65] != ' ' && line[65] != '*')) {
                return Error::badInput(
                    fmt::format("{}{}: expected 'HASH  FILE' (sha256sum format)", origin, where));
            }
            e.sha256 = lower(std::string(line.substr(0, 64)));
            const auto name = line.substr(66);
            e.file = escaped ? unescapeName(name) : std::string(name);
            if (e.file.rfind("./", 0) == 0) {
                e.file = e.file.substr(2);
            }
        }
        DAY0_TRY(checkEntry(e, origin, where));
        m.files.push_back(std::move(e));
    }
    return finish(std::move(m), origin);
}

std::string serializeManifest(const Manifest& manifest)
{
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const auto& e : manifest.files) {
        nlohmann::ordered_json entry;
        entry["file"] = e.file;
        if (e.size) {
            entry["size"] = *e.size;
        }
        entry["sha256"] = e.sha256;
        files.push_back(std::move(entry));
    }
    nlohmann::ordered_json root;
    root["format"] = "day0-manifest";
    root["version"] = 1;
    root["files"] = std::move(files);
    return dumpJson(root, 2) + "\n";
}

Result<std::optional<Manifest>> findManifest(const fs::path& dir)
{
    std::error_code ec;
    for (const auto name : { kManifestName, kSha256SumsName }) {
        const auto path = dir / name;
        if (!fs::exists(path, ec)) {
            continue;
        }
        auto text = readFile(path);
        if (!text) {
            return text.error();
        }
        auto m = name == kManifestName ? parseManifest(*text, displayPath(path))
                                       : parseSha256Sums(*text, displayPath(path));
        if (!m) {
            return m.error();
        }
        return std::optional<Manifest>(std::move(*m));
    }
    return std::optional<Manifest>();
}

std::vector<std::string> manifestCandidates(const fs::path& dir)
{
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const auto name = entry.path().filename().string();
        // A name that is not UTF-8 cannot be written to the JSON manifest; such files are left out.
        if (name.empty() || name.front() == '.' || name == kManifestName || name == kSha256SumsName
            || findInvalidUtf8(name) != std::string_view::npos || !entry.is_regular_file(ec)) {
            continue;
        }
        out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Result<Manifest> buildManifest(const fs::path& root, const std::vector<std::string>& files,
    const HashOptions& options, Progress& progress, std::stop_token stop)
{
    auto hashes = hashFiles(root, files, options, progress, stop);
    if (!hashes) {
        return hashes.error();
    }
    Manifest m;
    m.source = std::string(kManifestName);
    for (auto& h : *hashes) {
        if (h.error) {
            return *h.error;
        }
        m.files.push_back({ h.file, h.size, h.sha256 });
    }
    return finish(std::move(m), std::string(kManifestName));
}

Result<void> writeManifest(const fs::path& root, const Manifest& manifest)
{
    return writeFileAtomic(root / kManifestName, serializeManifest(manifest));
}

} // namespace day0::checkpoint
