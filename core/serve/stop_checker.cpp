#include "serve/stop_checker.h"

#include "tokenizer/tokenizer.h"

#include <algorithm>

namespace day0::serve {

std::size_t completeUtf8Prefix(const std::string& s)
{
    const std::size_t end = s.size();
    // Walk back over at most three continuation bytes to the lead byte of the last character.
    std::size_t i = end;
    int continuation = 0;
    while (i > 0 && continuation < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
        --i;
        ++continuation;
    }
    if (i == 0) {
        return continuation > 0 ? 0 : end;
    }
    const auto lead = static_cast<unsigned char>(s[i - 1]);
    int need = 0;
    if ((lead & 0x80) == 0) {
        need = 0;
    } else if ((lead & 0xE0) == 0xC0) {
        need = 1;
    } else if ((lead & 0xF0) == 0xE0) {
        need = 2;
    } else if ((lead & 0xF8) == 0xF0) {
        need = 3;
    } else {
        return end; // not UTF-8 at all: nothing to wait for
    }
    return continuation < need ? i - 1 : end;
}

StopChecker::StopChecker(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stops,
    std::set<std::int64_t> stopIds)
    : m_tokenizer(tokenizer)
    , m_stops(std::move(stops))
    , m_stopIds(std::move(stopIds))
{
}

std::string StopChecker::flush()
{
    std::string rest = m_text.size() > m_released ? m_text.substr(m_released) : std::string();
    m_released = std::max(m_released, m_text.size());
    return rest;
}

StopChecker::Step StopChecker::add(std::int64_t token)
{
    Step step;
    if (m_stopIds.contains(token)) {
        // Whatever was held back for a stop string that can no longer complete is output.
        step.text = flush();
        step.stopped = true;
        step.reason = token;
        return step;
    }
    if (m_tokenizer == nullptr) {
        return step;
    }
    m_ids.push_back(token);
    m_text = m_tokenizer->decode(m_ids);
    m_released = std::min(m_released, m_text.size());
    // A stop string cannot start before what was released: any earlier start would have left a
    // tail that is a prefix of it, and that tail was held back.
    std::size_t first = std::string::npos;
    const std::string* matched = nullptr;
    for (const auto& stop : m_stops) {
        const std::size_t at = m_text.find(stop, m_released);
        if (at < first) {
            first = at;
            matched = &stop;
        }
    }
    if (matched != nullptr) {
        step.text = m_text.substr(m_released, first - m_released);
        m_released = first;
        m_text.resize(first);
        step.stopped = true;
        step.reason = *matched;
        return step;
    }
    // Hold back the longest tail that is a proper prefix of a stop string.
    std::size_t hold = 0;
    for (const auto& stop : m_stops) {
        for (std::size_t n = std::min(stop.size() - 1, m_text.size()); n > hold; --n) {
            if (m_text.compare(m_text.size() - n, n, stop, 0, n) == 0) {
                hold = n;
                break;
            }
        }
    }
    const std::size_t ready = std::min(completeUtf8Prefix(m_text), m_text.size() - hold);
    if (ready > m_released) {
        step.text = m_text.substr(m_released, ready - m_released);
        m_released = ready;
    }
    return step;
}

} // namespace day0::serve
