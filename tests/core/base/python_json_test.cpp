// JSON as Python's json module writes it: NaN / Infinity / -Infinity outside strings.

#include "base/json_util.h"
#include "base/python_json.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;

TEST(PythonJson, ReadsNonFiniteNumbersAndSaysWhere)
{
    // Nemotron-H writes time_step_limit [0.0, Infinity].
    const std::string text = R"({"time_step_limit": [0.0, Infinity], "a": {"b": -Infinity},
        "c": NaN, "name": "Infinity NaN", "list": [1, 2]})";
    auto r = parsePythonJson(text, "config.json");
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& j = r->value;
    EXPECT_TRUE(std::isinf(j["time_step_limit"][1].get<double>()));
    EXPECT_GT(j["time_step_limit"][1].get<double>(), 0.0);
    EXPECT_TRUE(std::isinf(j["a"]["b"].get<double>()));
    EXPECT_LT(j["a"]["b"].get<double>(), 0.0);
    EXPECT_TRUE(std::isnan(j["c"].get<double>()));
    EXPECT_EQ(j["name"], "Infinity NaN") << "tokens inside strings stay text";
    EXPECT_EQ(j["list"][1], 2);
    ASSERT_EQ(r->nonFinite.size(), 3u);
    const std::string where = r->nonFinite[0] + r->nonFinite[1] + r->nonFinite[2];
    EXPECT_NE(where.find("time_step_limit[1] = Infinity"), std::string::npos) << where;
    EXPECT_NE(where.find("a.b = -Infinity"), std::string::npos) << where;
    EXPECT_NE(where.find("c = NaN"), std::string::npos) << where;
}

TEST(PythonJson, EverythingElseIsAsStrictAsBefore)
{
    for (const char* bad : { R"({"a": Inf})", R"({"a": infinity})", R"({"a": NaNx})",
             R"({"a": +Infinity})", R"({"a": 1,})", R"({"a": Infinity)", "" }) {
        SCOPED_TRACE(bad);
        auto r = parsePythonJson(bad, "bad.json");
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
        EXPECT_NE(r.error().message.find("bad.json: malformed JSON"), std::string::npos)
            << r.error().message;
    }
    // A standard document gives the strict parser's result and messages.
    auto plain = parsePythonJson(R"({"x": [1, 2.5, "s"]})", "ok.json");
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(plain->nonFinite.empty());
    EXPECT_EQ(plain->value, nlohmann::json::parse(R"({"x": [1, 2.5, "s"]})"));
}

TEST(PythonJson, ErrorsPointIntoTheOriginalText)
{
    // The error after a non-finite token is reported at its place in the text as written.
    auto r = parsePythonJson("{\"a\": Infinity,\n \"b\": tru}", "cfg.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("line 2"), std::string::npos) << r.error().message;
}

TEST(PythonJson, WritesNonFiniteNumbersBack)
{
    auto r = parsePythonJsonOrdered(R"({"z": 1, "limit": [0.0, Infinity], "n": NaN})", "c.json");
    ASSERT_TRUE(r.ok());
    const std::string text = dumpPythonJson(r->value, -1);
    EXPECT_EQ(text, R"({"z":1,"limit":[0.0,Infinity],"n":NaN})");
    auto again = parsePythonJsonOrdered(text, "again.json");
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(std::isinf(again->value["limit"][1].get<double>()));
}

TEST(KeyLedger, RecordsWhatAReaderLookedAt)
{
    const auto j = nlohmann::json::parse(R"({"a": 1, "b": null, "c": "x", "d": true})");
    KeyLedger ledger;
    JsonReader r(j, "doc.json", &ledger);
    (void)r.intOr("a", 0);
    (void)r.has("missing");
    EXPECT_TRUE(ledger.touched(j, "a"));
    EXPECT_TRUE(ledger.touched(j, "missing"));
    // Null values count as absent: only c and d are left.
    EXPECT_EQ(ledger.untouched(j), (std::vector<std::string> { "c", "d" }));
}
