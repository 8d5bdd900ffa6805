// Stop conditions of day0 serve (stop_checker.h): stop strings found across token boundaries and
// cut before, text held back while it may start a stop string, stop token ids, UTF-8 pieces.
#include "serve/stop_checker.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

using namespace day0::serve;

namespace {

/// A tokenizer whose token i decodes to pieces[i] (bytes, concatenated).
class PieceTokenizer : public day0::tokenizer::Tokenizer {
public:
    explicit PieceTokenizer(std::vector<std::string> pieces)
        : m_pieces(std::move(pieces))
    {
    }
    [[nodiscard]] day0::Result<std::vector<std::int64_t>> encode(
        std::string_view, bool, bool) const override
    {
        return day0::Error::badInput("not used");
    }
    [[nodiscard]] std::string decode(std::span<const std::int64_t> ids) const override
    {
        std::string out;
        for (const auto id : ids) {
            out += m_pieces.at(std::size_t(id));
        }
        return out;
    }
    [[nodiscard]] std::string describe() const override { return "pieces"; }
    [[nodiscard]] std::size_t vocabSize() const override { return m_pieces.size(); }

private:
    std::vector<std::string> m_pieces;
};

const PieceTokenizer kPieces({ "Hel", "lo W", "orld", "ait", "<eos>", "\xC3", "\xA9", "!" });

struct Outcome {
    std::vector<std::string> pieces; ///< released per token
    std::string text;
    bool stopped = false;
    StopReason reason;
};

Outcome feed(StopChecker& c, const std::vector<std::int64_t>& tokens, bool flushAtEnd = true)
{
    Outcome o;
    for (const auto t : tokens) {
        auto step = c.add(t);
        o.pieces.push_back(step.text);
        o.text += step.text;
        if (step.stopped) {
            o.stopped = true;
            o.reason = step.reason;
            return o;
        }
    }
    if (flushAtEnd) {
        o.text += c.flush();
    }
    return o;
}

} // namespace

TEST(StopChecker, AStopStringAcrossTokensCutsTheTextBeforeIt)
{
    StopChecker c(&kPieces, { "o Wor" }, {});
    const auto o = feed(c, { 0, 1, 2, 7 });
    ASSERT_TRUE(o.stopped);
    EXPECT_EQ(std::get<std::string>(o.reason), "o Wor");
    EXPECT_EQ(o.text, "Hell");
    // "Hello W" ends with "o W", the start of "o Wor": only "l" is released until "orld" settles
    // it.
    EXPECT_EQ(o.pieces, (std::vector<std::string> { "Hel", "l", "" }));
}

TEST(StopChecker, AHeldBackTailIsReleasedWhenItTurnsOutNotToBeAStop)
{
    StopChecker c(&kPieces, { "o Wor", "xyz" }, {});
    const auto o = feed(c, { 0, 1, 3 });
    EXPECT_FALSE(o.stopped);
    EXPECT_EQ(o.pieces, (std::vector<std::string> { "Hel", "l", "o Wait" }));
    EXPECT_EQ(o.text, "Hello Wait");
    // At the end by length the held-back tail is flushed.
    StopChecker d(&kPieces, { "o Wor" }, {});
    EXPECT_EQ(feed(d, { 0, 1 }).text, "Hello W");
}

TEST(StopChecker, TheEarliestStopStringWins)
{
    StopChecker c(&kPieces, { "World", "lo" }, {});
    const auto o = feed(c, { 0, 1, 2 });
    ASSERT_TRUE(o.stopped);
    EXPECT_EQ(std::get<std::string>(o.reason), "lo");
    EXPECT_EQ(o.text, "Hel");
}

TEST(StopChecker, AStopTokenEndsWithoutItsTextButWithWhatWasHeld)
{
    StopChecker c(&kPieces, { "o W!" }, { 4 });
    const auto o = feed(c, { 0, 1, 4, 2 });
    ASSERT_TRUE(o.stopped);
    EXPECT_EQ(std::get<std::int64_t>(o.reason), 4);
    EXPECT_EQ(o.text, "Hello W"); // "<eos>" is not output; the held "o W" is
    // Without a tokenizer there is no text, and stop ids still end the sequence.
    StopChecker bare(nullptr, {}, { 7 });
    const auto b = feed(bare, { 0, 1, 7, 2 });
    ASSERT_TRUE(b.stopped);
    EXPECT_EQ(b.text, "");
    EXPECT_EQ(b.pieces.size(), 3U);
}

TEST(StopChecker, PiecesEndOnCompleteUtf8Characters)
{
    StopChecker c(&kPieces, {}, {});
    const auto o = feed(c, { 0, 5, 6, 7 });
    EXPECT_EQ(o.pieces, (std::vector<std::string> { "Hel", "", "\xC3\xA9", "!" }));
    // A stop string made of a multi-byte character is found when its bytes complete.
    StopChecker d(&kPieces, { "\xC3\xA9" }, {});
    const auto s = feed(d, { 0, 5, 6, 7 });
    ASSERT_TRUE(s.stopped);
    EXPECT_EQ(s.text, "Hel");
}
