// A training run's gradient dumps (actions/train_grad_dump.h).
#include "actions/train_grad_dump.h"

#include "checkpoint/tensor_file.h"
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/forward.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace day0::actions {

namespace fs = std::filesystem;

namespace {

constexpr const char* kArtifactKind = "grad_dump";
constexpr const char* kStepsSyntax = "last, a list of 0-based steps (0,4,9) or every=K";

bool parseWhole(std::string_view text, std::int64_t& value)
{
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return !text.empty() && ec == std::errc() && end == text.data() + text.size() && value >= 0;
}

/// "step-N" or "step-N-dpR" back to (step, replica); false for another name.
bool parseDumpName(const std::string& name, std::int64_t& step, int& dpRank)
{
    if (!name.starts_with("step-")) {
        return false;
    }
    std::string_view rest = std::string_view(name).substr(5);
    std::int64_t replica = 0;
    if (const auto dash = rest.find("-dp"); dash != std::string_view::npos) {
        if (!parseWhole(rest.substr(dash + 3), replica)) {
            return false;
        }
        rest = rest.substr(0, dash);
    }
    dpRank = int(replica);
    return parseWhole(rest, step);
}

/// `parts` stacked along their first (token) axis, each multiplied by its scale, in `dtype`.
numerics::Tensor stackTokens(
    const std::vector<const numerics::Tensor*>& parts, const std::vector<double>& scales)
{
    numerics::Shape shape = parts.front()->shape();
    shape[0] = 0;
    std::vector<double> values;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        shape[0] += parts[i]->dim(0);
        for (const double v : parts[i]->toDoubles()) {
            values.push_back(v * scales[i]);
        }
    }
    if (parts.front()->dtype() == DType::F64) {
        return numerics::Tensor::fromDoubles(shape, values);
    }
    const std::vector<float> floats(values.begin(), values.end());
    return numerics::Tensor::fromFloats(shape, floats);
}

} // namespace

Result<GradDumpSteps> GradDumpSteps::parse(const std::string& text)
{
    GradDumpSteps s;
    if (text.empty() || text == "last") {
        return s;
    }
    const auto bad = [&] {
        return Error::badInput(fmt::format("--grad-steps '{}': expected {}", text, kStepsSyntax));
    };
    if (text.starts_with("every=")) {
        s.kind = Kind::Every;
        if (!parseWhole(std::string_view(text).substr(6), s.every) || s.every < 1) {
            return bad();
        }
        return s;
    }
    s.kind = Kind::List;
    std::string_view rest = text;
    while (true) {
        const auto comma = rest.find(',');
        std::int64_t step = 0;
        if (!parseWhole(rest.substr(0, comma), step)) {
            return bad();
        }
        s.list.push_back(step);
        if (comma == std::string_view::npos) {
            break;
        }
        rest = rest.substr(comma + 1);
    }
    return s;
}

Result<std::vector<std::int64_t>> GradDumpSteps::resolve(std::int64_t steps) const
{
    std::set<std::int64_t> chosen;
    switch (kind) {
    case Kind::Last:
        chosen.insert(steps - 1);
        break;
    case Kind::Every:
        for (std::int64_t s = every - 1; s < steps; s += every) {
            chosen.insert(s);
        }
        chosen.insert(steps - 1);
        break;
    case Kind::List:
        for (const auto s : list) {
            if (s >= steps) {
                return Error::badInput(fmt::format("--grad-steps: step {} is past the run's "
                                                   "last step {} (steps count from 0)",
                    s, steps - 1));
            }
            chosen.insert(s);
        }
        break;
    }
    return std::vector<std::int64_t>(chosen.begin(), chosen.end());
}

std::string gradDumpName(std::int64_t step, int dpRank, int dp)
{
    return dp > 1 ? fmt::format("step-{}-dp{}", step, dpRank) : fmt::format("step-{}", step);
}

Result<std::unique_ptr<TrainGradientDumps>> TrainGradientDumps::open(const model::ModelSpec& spec,
    const std::vector<train::ParameterSpec>& parameters, const fs::path& checkpoint,
    const fs::path& dir, train::TrainPrecision precision)
{
    std::unique_ptr<TrainGradientDumps> d(new TrainGradientDumps);
    d->m_spec = spec;
    d->m_parameters = parameters;
    d->m_fp64 = precision == train::TrainPrecision::F64;
    d->m_emulated = precision == train::TrainPrecision::MixedBf16 ? exec::PrecisionMode::BF16
                                                                  : exec::PrecisionMode::F32;
    std::set<std::string> trained;
    for (const auto& p : parameters) {
        trained.insert(p.name);
    }
    auto weights = exec::openCheckpointWeights(checkpoint);
    if (!weights) {
        return weights.error();
    }
    for (const auto& req : exec::detail::requiredWeights(spec)) {
        if (trained.contains(req.name) || !(*weights)->has(req.name)) {
            continue;
        }
        // Read as CheckpointTrainable reads its fixed tensors (block FP8 dequantised).
        bool exactFp8 = false;
        auto t = exec::detail::loadForwardWeight(**weights, req, spec, DType::F64, exactFp8);
        if (!t) {
            return t.error();
        }
        d->m_fixed.emplace(req.name, std::move(*t));
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return Error::badInput(fmt::format(
            "--grad-dump {}: cannot create the folder: {}", dir.string(), ec.message()));
    }
    d->m_dir = dir;
    d->m_staging = dir / fmt::format(".partial-{}", ::getpid());
    fs::remove_all(d->m_staging, ec);
    fs::create_directories(d->m_staging, ec);
    if (ec) {
        return Error::badInput(fmt::format("--grad-dump {}: cannot create {}: {}", dir.string(),
            d->m_staging.string(), ec.message()));
    }
    return d;
}

TrainGradientDumps::~TrainGradientDumps()
{
    std::error_code ec;
    fs::remove_all(m_staging, ec);
}

Result<void> TrainGradientDumps::write(const train::TappedGradient& g)
{
    const auto layout = train::FlatLayout::of(m_parameters);
    if (std::int64_t(g.weights.size()) != layout.total
        || std::int64_t(g.gradient.size()) != layout.total) {
        return Error::internal(fmt::format("gradient dump: {} weights and {} gradients for {} "
                                           "parameters",
            g.weights.size(), g.gradient.size(), layout.total));
    }
    std::map<std::string, numerics::Tensor> weights = m_fixed;
    exec::GradientResult dumped;
    for (std::size_t i = 0; i < m_parameters.size(); ++i) {
        const auto& p = m_parameters[i];
        const numerics::Shape shape(p.shape.begin(), p.shape.end());
        const auto w = layout.slice(g.weights, i);
        const auto grad = layout.slice(g.gradient, i);
        if (m_fp64) {
            weights.emplace(p.name, numerics::Tensor::fromDoubles(shape, w));
            dumped.parameters.emplace(p.name, numerics::Tensor::fromDoubles(shape, grad));
        } else {
            // The trainer rounded both to fp32: the conversions are exact.
            weights.emplace(p.name,
                numerics::Tensor::fromFloats(shape, std::vector<float>(w.begin(), w.end())));
            dumped.parameters.emplace(p.name,
                numerics::Tensor::fromFloats(shape, std::vector<float>(grad.begin(), grad.end())));
        }
    }
    // The replica's sequences through the step's backward, activation gradients on.
    exec::GradientOptions options;
    options.fp64 = m_fp64;
    options.emulated = m_emulated;
    options.activations = true;
    std::vector<exec::GradientResult> passes;
    std::vector<std::int64_t> ids;
    std::vector<std::int64_t> targets;
    std::int64_t counted = 0;
    double lossSum = 0.0;
    for (std::size_t s = 0; s < g.batch->sequences.size(); ++s) {
        const auto& seq = g.batch->sequences[s];
        const std::vector<std::int64_t> seqIds(seq.begin(), seq.end());
        const auto seqTargets = exec::nextTokenTargets(seqIds);
        auto r = exec::lossAndGradients(m_spec, weights, seqIds, seqTargets, options, {});
        if (!r) {
            return r.error().withContext(fmt::format("batch sequence {}", s));
        }
        ids.insert(ids.end(), seqIds.begin(), seqIds.end());
        targets.insert(targets.end(), seqTargets.begin(), seqTargets.end());
        counted += r->counted;
        lossSum += r->loss * double(r->counted);
        passes.push_back(std::move(*r));
    }
    if (counted == 0) {
        return Error::badInput(
            "gradient dump: the replica's sequences have no position to predict");
    }
    const double loss = lossSum / double(counted);
    const double tolerance = m_fp64 ? 1e-9 : 1e-4;
    if (!(std::abs(loss - g.replicaLoss) <= tolerance * std::max(1.0, std::abs(g.replicaLoss)))) {
        return Error::internal(fmt::format("gradient dump of step {}: the pass gives loss {} on "
                                           "the replica's sequences, the step's was {}",
            g.step, loss, g.replicaLoss));
    }
    std::vector<double> scales;
    std::vector<double> ones;
    for (const auto& pass : passes) {
        scales.push_back(double(pass.counted) / double(counted) / double(g.dp));
        ones.push_back(1.0);
    }
    std::vector<const numerics::Tensor*> parts;
    for (const auto& pass : passes) {
        parts.push_back(&pass.logits);
    }
    dumped.logits = stackTokens(parts, ones);
    for (std::size_t a = 0; a < passes.front().activations.size(); ++a) {
        const std::string& name = passes.front().activations[a].first;
        parts.clear();
        for (const auto& pass : passes) {
            if (a >= pass.activations.size() || pass.activations[a].first != name) {
                return Error::internal(
                    fmt::format("gradient dump: the sequences' passes differ at '{}'", name));
            }
            parts.push_back(&pass.activations[a].second);
        }
        dumped.activations.emplace_back(name, stackTokens(parts, scales));
    }
    dumped.loss = loss;
    dumped.counted = counted;
    numerics::Dump dump = exec::gradientDump(m_spec, dumped, ids, targets, m_fp64);
    if (m_emulated != exec::PrecisionMode::F32) {
        dump.info.precision = std::string(exec::precisionName(m_emulated));
    }
    dump.info.extra["training"] = { { "step", g.step }, { "dp_rank", g.dpRank }, { "dp", g.dp },
        { "sequences", g.batch->sequences.size() }, { "step_loss", g.stepLoss },
        { "replica_loss", g.replicaLoss } };
    const std::string name = gradDumpName(g.step, g.dpRank, g.dp);
    const fs::path folder = m_staging / name;
    std::error_code ec;
    fs::remove_all(folder, ec); // a restart's second pass over the step
    DAY0_TRY(checkpoint::writeDump(dump, folder));
    const std::lock_guard lock(m_mutex);
    const auto same
        = [&](const GradDumpRef& r) { return r.step == g.step && r.dpRank == g.dpRank; };
    m_staged.erase(std::remove_if(m_staged.begin(), m_staged.end(), same), m_staged.end());
    m_staged.push_back({ g.step, g.dpRank, folder.string() });
    return success();
}

Result<std::vector<GradDumpRef>> TrainGradientDumps::commit()
{
    const std::lock_guard lock(m_mutex);
    std::sort(m_staged.begin(), m_staged.end(), [](const GradDumpRef& a, const GradDumpRef& b) {
        return std::pair(a.step, a.dpRank) < std::pair(b.step, b.dpRank);
    });
    std::vector<GradDumpRef> out;
    for (const auto& staged : m_staged) {
        const fs::path from(staged.path);
        const fs::path to = m_dir / from.filename();
        std::error_code ec;
        fs::remove_all(to, ec);
        fs::rename(from, to, ec);
        if (ec) {
            return Error::badInput(fmt::format(
                "--grad-dump: cannot move {} to {}: {}", from.string(), to.string(), ec.message()));
        }
        out.push_back({ staged.step, staged.dpRank, fs::absolute(to).lexically_normal().string() });
    }
    m_staged.clear();
    return out;
}

void recordGradDumps(const std::vector<GradDumpRef>& dumps, history::RunRecord& record)
{
    std::set<std::int64_t> steps;
    for (const auto& d : dumps) {
        steps.insert(d.step);
        if (auto artifact = history::makeArtifact(kArtifactKind, d.path)) {
            record.addArtifact(std::move(*artifact));
        }
    }
    record.setProperty("grad_dump_steps", fmt::format("{}", fmt::join(steps, ",")));
}

std::vector<GradDumpRef> gradDumpsOf(const history::RunRecord& record)
{
    std::vector<GradDumpRef> out;
    for (const auto& a : record.artifacts) {
        GradDumpRef ref;
        if (a.kind == kArtifactKind
            && parseDumpName(fs::path(a.path).filename().string(), ref.step, ref.dpRank)) {
            ref.path = a.path;
            out.push_back(std::move(ref));
        }
    }
    std::sort(out.begin(), out.end(), [](const GradDumpRef& a, const GradDumpRef& b) {
        return std::pair(a.step, a.dpRank) < std::pair(b.step, b.dpRank);
    });
    return out;
}

} // namespace day0::actions
