// Readable names of stored metric keys (history/metric_labels.h).
#include "history/metric_labels.h"

#include <array>
#include <cctype>
#include <map>
#include <utility>
#include <vector>

namespace day0::history {

namespace {

// Whole keys whose word-by-word spelling would not say what they are.
const std::map<std::string, std::string, std::less<>>& knownKeys()
{
    static const std::map<std::string, std::string, std::less<>> keys = {
        { "step_time_s", "Step time" },
        { "max_rel_l2", "Max relative L2 error" },
        { "rel_l2", "Relative L2 error" },
        { "mfu", "Model FLOPs utilisation" },
        { "peak_bytes", "Peak memory" },
        { "device_bytes", "Device memory" },
        { "free_bytes", "Free memory" },
        { "tensor_bytes", "Tensor bytes" },
        { "first_divergence_layer", "First divergent layer" },
        { "logits_kl_mean", "Mean KL divergence of the logits" },
        { "logits_top1_agreement", "Top-1 agreement of the logits" },
        { "logits_top5_overlap", "Top-5 overlap of the logits" },
        { "most_loaded_rank", "Most loaded rank" },
        { "time_bubble_s", "Pipeline bubble time" },
        { "span_s", "Trace span" },
        { "hash_seconds", "Hashing time" },
        { "request_throughput", "Request throughput" },
        { "output_throughput", "Output token throughput" },
        { "total_token_throughput", "Total token throughput" },
        { "request_goodput", "Goodput" },
        { "mean_tokens_per_s_per_user", "Mean tokens/s per user" },
        { "check_diverged", "Requests diverging from the reference" },
        { "check_max_logprob_delta", "Max log-probability difference" },
    };
    return keys;
}

// Words written as abbreviations or with their own spelling.
const std::map<std::string, std::string, std::less<>>& knownWords()
{
    static const std::map<std::string, std::string, std::less<>> words = {
        { "ttft", "TTFT" },
        { "tpot", "TPOT" },
        { "itl", "ITL" },
        { "e2el", "E2EL" },
        { "kl", "KL" },
        { "ppl", "perplexity" },
        { "mfu", "MFU" },
        { "tp", "TP" },
        { "pp", "PP" },
        { "ep", "EP" },
        { "cp", "CP" },
        { "dp", "DP" },
        { "kv", "KV" },
        { "l2", "L2" },
        { "rel", "relative" },
        { "abs", "absolute" },
        { "max", "max" },
        { "p50", "p50" },
        { "p90", "p90" },
        { "p95", "p95" },
        { "p99", "p99" },
        { "p999", "p99.9" },
        { "cpu", "CPU" },
        { "gpu", "GPU" },
        { "fp32", "fp32" },
        { "bytes", "memory" },
        { "topk", "top-k" },
        { "num", "number of" },
        { "s", "" },
        { "ms", "" },
        { "seconds", "" },
    };
    return words;
}

std::vector<std::string> splitWords(std::string_view key)
{
    std::vector<std::string> out;
    std::string word;
    for (const char c : key) {
        if (c == '_' || c == '.' || c == ' ') {
            if (!word.empty()) {
                out.push_back(std::move(word));
                word.clear();
            }
        } else {
            word += char(std::tolower(static_cast<unsigned char>(c)));
        }
    }
    if (!word.empty()) {
        out.push_back(std::move(word));
    }
    return out;
}

// "rank3" → ("rank", "3"); "l2" stays (a known word).
std::pair<std::string, std::string> trailingNumber(const std::string& word)
{
    std::size_t i = word.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(word[i - 1]))) {
        --i;
    }
    if (i == 0 || i == word.size()) {
        return { word, {} };
    }
    return { word.substr(0, i), word.substr(i) };
}

std::string spell(const std::vector<std::string>& words, std::size_t from)
{
    std::string out;
    for (std::size_t i = from; i < words.size(); ++i) {
        const auto& w = words[i];
        const auto known = knownWords().find(w);
        // A unit suffix ("_s", "_ms") is dropped only at the end; elsewhere it is a word.
        std::string text = known != knownWords().end() ? known->second : w;
        if (text.empty() && i + 1 < words.size()) {
            text = w;
        } else if (text.empty() && (w == "s" || w == "ms" || w == "seconds")) {
            // A duration: say so unless a word already does.
            bool timed = false;
            for (std::size_t j = from; j < i; ++j) {
                for (const char* w :
                    { "time", "latency", "duration", "ttft", "tpot", "itl", "e2el", "seconds" }) {
                    timed = timed || words[j] == w;
                }
            }
            text = timed ? "" : "time";
        }
        if (text.empty()) {
            continue;
        }
        out += out.empty() ? "" : " ";
        out += text;
    }
    return out;
}

std::string capitalised(std::string text)
{
    if (!text.empty() && std::islower(static_cast<unsigned char>(text[0]))) {
        text[0] = char(std::toupper(static_cast<unsigned char>(text[0])));
    }
    return text;
}

} // namespace

std::string metricLabel(std::string_view key)
{
    if (key.empty()) {
        return {};
    }
    if (const auto it = knownKeys().find(key); it != knownKeys().end()) {
        return it->second;
    }
    const auto words = splitWords(key);
    if (words.empty()) {
        return std::string(key);
    }
    // A scope in front: "bench_l2_..." (a load level), "rank3...." (a rank).
    std::string scope;
    std::size_t from = 0;
    if (words.size() > 2 && words[0] == "bench") {
        const auto [l, n] = trailingNumber(words[1]);
        if (l == "l" && !n.empty()) {
            scope = "Level " + n;
            from = 2;
        }
    } else if (words.size() > 1) {
        const auto [r, n] = trailingNumber(words[0]);
        if ((r == "rank" || r == "stage" || r == "layer") && !n.empty()) {
            scope = capitalised(r) + " " + n;
            from = 1;
        }
    }
    std::string rest;
    if (from > 0) {
        std::string tail;
        for (std::size_t i = from; i < words.size(); ++i) {
            tail += (tail.empty() ? "" : "_") + words[i];
        }
        if (const auto it = knownKeys().find(tail); it != knownKeys().end()) {
            rest = it->second;
        }
    }
    if (rest.empty()) {
        rest = spell(words, from);
    }
    if (rest.empty()) {
        return std::string(key);
    }
    return scope.empty() ? capitalised(rest) : scope + ": " + rest;
}

} // namespace day0::history
