// TempOutput and removeStaleTemporaries: how an output is written under a locked temporary,
// and how a later writer tells the leftovers of a killed process from a live writer's work.
#include "base/temp_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using day0::TempOutput;

namespace {

fs::path freshDir(const std::string& name)
{
    const fs::path dir = fs::temp_directory_path()
        / ("day0_temp_output_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::vector<std::string> names(const fs::path& dir)
{
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// As old as a leftover of a process killed a minute ago.
void age(const fs::path& path)
{
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::minutes(1));
}

} // namespace

TEST(TempOutput, IsHiddenBesideItsTargetAndRemovedUnlessReleased)
{
    const fs::path dir = freshDir("basic");
    {
        auto file = TempOutput::create(dir / "out.bin", TempOutput::Kind::File);
        ASSERT_TRUE(file) << file.error().message;
        EXPECT_EQ(file->path().parent_path(), dir);
        EXPECT_TRUE(day0::isTemporaryName(file->path().filename().string()));
        EXPECT_EQ(file->path().filename().string().rfind(".out.bin.day0-tmp-", 0), 0u);
        EXPECT_TRUE(fs::is_regular_file(file->path()));
        auto folder = TempOutput::create(dir / "ckpt", TempOutput::Kind::Folder);
        ASSERT_TRUE(folder) << folder.error().message;
        EXPECT_TRUE(fs::is_directory(folder->path()));
        std::ofstream(folder->path() / "inside") << "x";
    }
    EXPECT_TRUE(names(dir).empty());

    auto kept = TempOutput::create(dir / "kept", TempOutput::Kind::File);
    ASSERT_TRUE(kept);
    fs::rename(kept->path(), dir / "kept");
    kept->release();
    EXPECT_EQ(names(dir), std::vector<std::string> { "kept" });
}

TEST(TempOutput, AFolderMovesOverItsTargetReplacingAnOldOne)
{
    const fs::path dir = freshDir("move_over");
    for (const char* content : { "first", "second" }) {
        auto folder = TempOutput::create(dir / "ckpt", TempOutput::Kind::Folder);
        ASSERT_TRUE(folder) << folder.error().message;
        std::ofstream(folder->path() / "inside") << content;
        if (std::string(content) == "second") {
            std::ofstream(folder->path() / "only-new") << "y";
        }
        const auto moved = folder->moveOver(dir / "ckpt");
        ASSERT_TRUE(moved) << moved.error().message;
        EXPECT_FALSE(folder->active());
    }
    // Only the new folder is left, under the name; no temporary or old folder beside it.
    EXPECT_EQ(names(dir), std::vector<std::string> { "ckpt" });
    EXPECT_EQ(names(dir / "ckpt"), (std::vector<std::string> { "inside", "only-new" }));
    std::string text;
    std::ifstream(dir / "ckpt" / "inside") >> text;
    EXPECT_EQ(text, "second");
    TempOutput none;
    const auto twice = none.moveOver(dir / "ckpt");
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message.find("ckpt"), std::string::npos);
}

TEST(TempOutput, AMissingFolderIsAnErrorNamingTheTarget)
{
    auto r
        = TempOutput::create(fs::path("/nonexistent-day0-folder/out.bin"), TempOutput::Kind::File);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("out.bin"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("No such file or directory"), std::string::npos)
        << r.error().message;
}

TEST(TempOutput, LeftoversOfKilledWritersGoLiveOnesAndOtherFilesStay)
{
    const fs::path dir = freshDir("stale");
    // A killed writer's file and folder: unlocked, old.
    std::ofstream(dir / ".a.safetensors.day0-tmp-0123456789ab") << "half";
    fs::create_directories(dir / ".ckpt.day0-tmp-00000000beef" / "sub");
    std::ofstream(dir / ".ckpt.day0-tmp-00000000beef" / "sub" / "x") << "x";
    age(dir / ".a.safetensors.day0-tmp-0123456789ab");
    age(dir / ".ckpt.day0-tmp-00000000beef");
    // A live writer's: locked by an open description (this process stands for the writer).
    std::ofstream(dir / ".live.day0-tmp-aaaaaaaaaaaa") << "busy";
    age(dir / ".live.day0-tmp-aaaaaaaaaaaa");
    const int fd = ::open((dir / ".live.day0-tmp-aaaaaaaaaaaa").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);
    // Just created and not yet locked: too young to be taken for a leftover.
    std::ofstream(dir / ".young.day0-tmp-bbbbbbbbbbbb") << "new";
    // Not ours: other hidden files and look-alikes.
    std::ofstream(dir / ".hidden") << "keep";
    std::ofstream(dir / ".x.tmp-123456") << "keep";
    std::ofstream(dir / "plain.day0-tmp-cccccccccccc") << "keep";
    age(dir / ".x.tmp-123456");
    age(dir / "plain.day0-tmp-cccccccccccc");

    const auto done = day0::removeStaleTemporaries(dir);
    ::close(fd);
    EXPECT_EQ(done.size(), 2u);
    EXPECT_EQ(names(dir),
        (std::vector<std::string> { ".hidden", ".live.day0-tmp-aaaaaaaaaaaa", ".x.tmp-123456",
            ".young.day0-tmp-bbbbbbbbbbbb", "plain.day0-tmp-cccccccccccc" }));
    // Once per folder and process.
    age(dir / ".young.day0-tmp-bbbbbbbbbbbb");
    EXPECT_TRUE(day0::removeStaleTemporaries(dir).empty());
}

TEST(TempOutput, AFolderSetAsideByAnInterruptedReplacementIsPutBack)
{
    const fs::path dir = freshDir("aside");
    // Killed between the two renames of a --force replacement: the old output aside, no new one.
    const fs::path aside = day0::asideSibling(dir / "model");
    fs::create_directories(aside);
    std::ofstream(aside / "config.json") << "{}";
    // Killed after the new one was in place: the old one aside is garbage.
    fs::create_directories(dir / "other");
    fs::create_directories(day0::asideSibling(dir / "other"));

    // A new writer in the folder cleans up first.
    auto next = TempOutput::create(dir / "unrelated", TempOutput::Kind::File);
    ASSERT_TRUE(next);
    next->discard();
    EXPECT_EQ(names(dir), (std::vector<std::string> { "model", "other" }));
    EXPECT_TRUE(fs::exists(dir / "model" / "config.json"));
}
