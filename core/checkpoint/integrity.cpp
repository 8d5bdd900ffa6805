#include "base/file_util.h"
#include "base/sha256.h"
#include "base/thread_pool.h"
#include "checkpoint/manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

namespace day0::checkpoint {

namespace fs = std::filesystem;

std::string_view fileStatusName(FileStatus status)
{
    switch (status) {
    case FileStatus::Ok:
        return "ok";
    case FileStatus::HashMismatch:
        return "hash mismatch";
    case FileStatus::SizeMismatch:
        return "size mismatch";
    case FileStatus::Missing:
        return "missing";
    case FileStatus::Unreadable:
        return "unreadable";
    case FileStatus::Unlisted:
        return "not in manifest";
    }
    return "?";
}

bool IntegrityReport::ok() const { return failures() == 0; }

std::size_t IntegrityReport::failures() const
{
    return std::size_t(std::count_if(
        files.begin(), files.end(), [](const FileCheck& f) { return f.status != FileStatus::Ok; }));
}

Result<std::vector<FileHash>> hashFiles(const fs::path& root, const std::vector<std::string>& files,
    const HashOptions& options, Progress& progress, std::stop_token stop)
{
    std::vector<FileHash> out(files.size());
    std::int64_t total = 0;
    std::error_code ec;
    for (std::size_t i = 0; i < files.size(); ++i) {
        out[i].file = files[i];
        const auto size = fs::file_size(root / files[i], ec);
        out[i].size = ec ? 0 : size;
        total += std::int64_t(out[i].size);
    }
    // A new stage: the bar restarts at zero over the bytes to hash.
    progress.setDone(0);
    progress.setTotal(total);
    // Largest files first, so a big shard does not start last and leave the other threads idle.
    std::vector<std::size_t> order(files.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(),
        [&](std::size_t a, std::size_t b) { return out[a].size > out[b].size; });

    const auto hw = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t threads
        = std::min<std::size_t>(options.threads > 0 ? std::size_t(options.threads) : hw,
            std::max<std::size_t>(files.size(), 1));
    const auto hashOne = [&](std::size_t k) {
        auto& h = out[order[k]];
        if (stop.stop_requested()) {
            return;
        }
        progress.setStage(fmt::format("hashing {}", h.file));
        auto digest = sha256File(root / h.file, &progress, stop, options.chunkBytes);
        if (digest) {
            h.sha256 = std::move(*digest);
        } else {
            h.error = digest.error();
        }
    };
    if (threads <= 1) {
        for (std::size_t k = 0; k < order.size(); ++k) {
            hashOne(k);
        }
    } else {
        // parallelFor also runs work on the calling thread, so threads - 1 helpers.
        ThreadPool pool(threads - 1);
        pool.parallelFor(order.size(), hashOne);
    }
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    return out;
}

Result<IntegrityReport> verifyIntegrity(const fs::path& root, const Manifest& manifest,
    const std::vector<std::string>& mustBeListed, const HashOptions& options, Progress& progress,
    std::stop_token stop)
{
    const auto start = std::chrono::steady_clock::now();
    IntegrityReport report;
    report.manifest = manifest.source;
    std::vector<std::string> toHash;
    std::vector<const ManifestEntry*> hashedEntries;
    std::error_code ec;
    for (const auto& e : manifest.files) {
        FileCheck check;
        check.file = e.file;
        check.expectedSize = e.size;
        check.expectedSha256 = e.sha256;
        const auto path = root / e.file;
        const auto shown = displayPath(path);
        if (!fs::exists(path, ec)) {
            check.status = FileStatus::Missing;
            check.message = fmt::format("{}: missing (listed in {})", shown, manifest.source);
        } else if (!fs::is_regular_file(path, ec)) {
            check.status = FileStatus::Unreadable;
            check.message = fmt::format("{}: not a regular file", shown);
        } else {
            check.actualSize = fs::file_size(path, ec);
            if (e.size && *e.size != check.actualSize) {
                check.status = FileStatus::SizeMismatch;
                check.message = fmt::format("{}: size is {} bytes but {} says {} (truncated or "
                                            "replaced?)",
                    shown, check.actualSize, manifest.source, *e.size);
            } else {
                toHash.push_back(e.file);
                hashedEntries.push_back(&e);
            }
        }
        report.files.push_back(std::move(check));
    }
    for (const auto& f : mustBeListed) {
        if (manifest.find(f) == nullptr && fs::exists(root / f, ec)) {
            FileCheck check;
            check.file = f;
            check.status = FileStatus::Unlisted;
            check.actualSize = fs::file_size(root / f, ec);
            check.message = fmt::format("{}: not covered by {}, so it cannot be verified",
                displayPath(root / f), manifest.source);
            report.files.push_back(std::move(check));
        }
    }
    auto hashes = hashFiles(root, toHash, options, progress, stop);
    if (!hashes) {
        return hashes.error();
    }
    for (std::size_t i = 0; i < hashes->size(); ++i) {
        const auto& h = (*hashes)[i];
        auto it = std::find_if(report.files.begin(), report.files.end(),
            [&](const FileCheck& c) { return c.file == h.file; });
        it->actualSha256 = h.sha256;
        report.bytesHashed += h.size;
        if (h.error) {
            it->status = FileStatus::Unreadable;
            it->message = h.error->message;
        } else if (h.sha256 != hashedEntries[i]->sha256) {
            it->status = FileStatus::HashMismatch;
            it->message = fmt::format("{}: sha256 {} does not match {} in {}",
                displayPath(root / h.file), h.sha256, hashedEntries[i]->sha256, manifest.source);
        }
    }
    std::sort(report.files.begin(), report.files.end(),
        [](const FileCheck& a, const FileCheck& b) { return a.file < b.file; });
    report.seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

} // namespace day0::checkpoint
