// The scheduler's sequences on a plan's served ranks (actions/serve_sharded.h).
#include "actions/serve_sharded.h"

#include <fmt/format.h>

namespace day0::actions {

namespace {

/// One sequence on a plan's served ranks; its caches are freed with it.
class ShardedSequence final : public serve::SteppedSequence {
public:
    ShardedSequence(
        std::shared_ptr<parallel::ServedRanks> ranks, std::int64_t id, std::int64_t capacity)
        : m_ranks(std::move(ranks))
        , m_id(id)
        , m_capacity(capacity)
    {
    }
    ~ShardedSequence() override { m_ranks->close(m_id); }
    ShardedSequence(const ShardedSequence&) = delete;
    ShardedSequence& operator=(const ShardedSequence&) = delete;

    Result<std::vector<double>> feed(
        std::span<const std::int64_t> ids, std::stop_token stop) override
    {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        DAY0_TRY(fits(std::int64_t(ids.size())));
        auto logits = m_ranks->feed(m_id, ids, m_position);
        if (logits) {
            m_position += std::int64_t(ids.size());
        }
        return logits;
    }
    [[nodiscard]] std::int64_t position() const override { return m_position; }

    /// Whether `n` more tokens fit its capacity.
    [[nodiscard]] Result<void> fits(std::int64_t n) const
    {
        if (m_position + n > m_capacity) {
            return Error::badInput(fmt::format("{} more token(s) after {} overflow the "
                                               "sequence's capacity of {}",
                n, m_position, m_capacity));
        }
        return success();
    }
    [[nodiscard]] std::int64_t id() const { return m_id; }
    void advance(std::int64_t n) { m_position += n; }

private:
    std::shared_ptr<parallel::ServedRanks> m_ranks;
    std::int64_t m_id = 0;
    std::int64_t m_capacity = 0;
    std::int64_t m_position = 0;
};

class ShardedSource final : public serve::SequenceSource {
public:
    explicit ShardedSource(std::shared_ptr<parallel::ServedRanks> ranks)
        : m_ranks(std::move(ranks))
    {
    }
    Result<std::unique_ptr<serve::SteppedSequence>> open(std::int64_t capacity) override
    {
        auto id = m_ranks->open(capacity);
        if (!id) {
            return id.error();
        }
        return std::unique_ptr<serve::SteppedSequence>(
            std::make_unique<ShardedSequence>(m_ranks, *id, capacity));
    }
    [[nodiscard]] std::string sequentialReason() const override
    {
        if (!m_ranks->batchRefusal().empty()) {
            return fmt::format("plan {}: {}", m_ranks->plan(), m_ranks->batchRefusal());
        }
        return {};
    }
    Result<std::vector<std::vector<double>>> feedBatch(
        std::span<serve::SteppedSequence* const> seqs,
        std::span<const std::span<const std::int64_t>> tokens, std::stop_token stop) override
    {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        if (tokens.size() != seqs.size()) {
            return Error::internal(fmt::format(
                "batched step: {} sequences for {} token lists", seqs.size(), tokens.size()));
        }
        std::vector<ShardedSequence*> sharded;
        std::vector<std::int64_t> ids;
        std::vector<std::int64_t> starts;
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            auto* seq = dynamic_cast<ShardedSequence*>(seqs[i]);
            if (seq == nullptr) {
                return Error::internal("batched step: a sequence not opened on the plan's ranks");
            }
            DAY0_TRY(seq->fits(std::int64_t(tokens[i].size())));
            sharded.push_back(seq);
            ids.push_back(seq->id());
            starts.push_back(seq->position());
        }
        auto rows = m_ranks->feedBatch(ids, tokens, starts);
        if (rows) {
            for (std::size_t i = 0; i < sharded.size(); ++i) {
                sharded[i]->advance(std::int64_t(tokens[i].size()));
            }
        }
        return rows;
    }

private:
    std::shared_ptr<parallel::ServedRanks> m_ranks;
};

} // namespace

std::shared_ptr<serve::SequenceSource> shardedSource(std::shared_ptr<parallel::ServedRanks> ranks)
{
    return std::make_shared<ShardedSource>(std::move(ranks));
}

} // namespace day0::actions
