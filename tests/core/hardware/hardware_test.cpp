#include "base/resources.h"
#include "hardware/cluster.h"
#include "hardware/device_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace day0;
using namespace day0::hardware;

namespace {

class Hardware : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }

    std::string writeFile(const std::string& name, const std::string& text)
    {
        const auto dir = std::filesystem::temp_directory_path() / "day0_hardware_test";
        std::filesystem::create_directories(dir);
        const auto path = dir / name;
        std::ofstream(path) << text;
        return path.string();
    }
};

TEST_F(Hardware, BundledProfilesCoverTheRequiredDevices)
{
    auto profiles = bundledDeviceProfiles();
    ASSERT_TRUE(profiles) << profiles.error().message;
    for (const char* id :
        { "h100-sxm", "h200", "b200", "a100-80gb", "mi300x", "ascend-910b", "l40s" }) {
        auto p = findDeviceProfile(id);
        ASSERT_TRUE(p) << id << ": " << p.error().message;
        EXPECT_GT(p->memoryBytes, 40.0 * (1 << 30)) << id;
        EXPECT_GT(p->bf16Flops, 100e12) << id;
        EXPECT_GT(p->hbmBandwidth, 500e9) << id;
        EXPECT_GT(p->intraNode.bandwidth, p->interNode.bandwidth) << id;
        EXPECT_FALSE(p->source.empty()) << id;
    }
}

TEST_F(Hardware, H200FiguresAreTheDatasheetsDenseNumbers)
{
    auto p = findDeviceProfile("H200"); // case-insensitive
    ASSERT_TRUE(p);
    EXPECT_DOUBLE_EQ(p->memoryBytes, 141.0 * 1024 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(p->bf16Flops, 989.4e12); // 1,979 TFLOPS with sparsity / 2
    EXPECT_DOUBLE_EQ(p->fp8Flops, 1978.9e12);
    EXPECT_DOUBLE_EQ(p->hbmBandwidth, 4.8e12);
    EXPECT_DOUBLE_EQ(p->intraNode.bandwidth, 450e9); // NVLink 900 GB/s bidirectional
    EXPECT_EQ(p->domainSize, 8);
    EXPECT_DOUBLE_EQ(p->interNode.bandwidth, 50e9); // 400 Gb/s per GPU
}

TEST_F(Hardware, DevicesWithoutFp8FallBackToBf16Peak)
{
    auto a100 = findDeviceProfile("a100");
    ASSERT_TRUE(a100);
    EXPECT_EQ(a100->fp8Flops, 0.0);
    EXPECT_DOUBLE_EQ(a100->peakFlops(true), a100->bf16Flops);
}

TEST_F(Hardware, UnknownDeviceListsTheKnownOnes)
{
    auto p = findDeviceProfile("h300");
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, ErrorCode::BadInput);
    EXPECT_NE(p.error().message.find("unknown device 'h300'"), std::string::npos);
    EXPECT_NE(p.error().message.find("h200"), std::string::npos);
}

TEST_F(Hardware, ClusterStringIsDeviceNodesByGpus)
{
    auto c = parseCluster("h200:32x8");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->worldSize(), 256);
    EXPECT_EQ(c->numNodes, 32);
    EXPECT_EQ(c->gpusPerNode, 8);
    EXPECT_EQ(c->domainSize, 8);
    EXPECT_EQ(c->nodeOf(17), 2);
    EXPECT_EQ(c->domainOf(17), 2);
    EXPECT_FALSE(c->mixedInterNode());
    EXPECT_NE(c->describe().find("256 × NVIDIA H200"), std::string::npos) << c->describe();

    auto one = parseCluster("mi300x:4");
    ASSERT_TRUE(one);
    EXPECT_EQ(one->worldSize(), 4);
    EXPECT_EQ(one->domainSize, 4); // a node smaller than the board keeps every GPU on the fast link

    auto node = parseCluster("l40s");
    ASSERT_TRUE(node);
    EXPECT_EQ(node->worldSize(), 8);
}

TEST_F(Hardware, Nvl72DomainSpansNodes)
{
    auto c = parseCluster("gb200:36x4");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->worldSize(), 144);
    EXPECT_EQ(c->domainSize, 72);
    EXPECT_EQ(c->domainOf(71), 0);
    EXPECT_EQ(c->domainOf(72), 1);
    EXPECT_EQ(c->nodeOf(71), 17);
}

TEST_F(Hardware, BadClusterStringsAreBadInput)
{
    for (const char* bad : { "h200:32x", "h200:x8", "h200:0x8", "h200:ax8", "h200:32x8x2", "" }) {
        auto c = parseCluster(bad);
        ASSERT_FALSE(c) << bad;
        EXPECT_EQ(c.error().code, ErrorCode::BadInput) << bad;
    }
    auto unknown = parseCluster("tpu:4x4");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("unknown device 'tpu'"), std::string::npos);
}

TEST_F(Hardware, ClusterFileWithMixedLinkSpeeds)
{
    auto c
        = loadClusterFile(std::string(DAY0_RESOURCE_DIR) + "/hardware/clusters/h200-mixed-ib.json");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->worldSize(), 256);
    ASSERT_EQ(c->nodeGroups.size(), 2u);
    EXPECT_TRUE(c->mixedInterNode());
    // Collectives that leave a node are as fast as the slowest group.
    EXPECT_DOUBLE_EQ(c->interNodeLink().bandwidth, 25e9);
    EXPECT_DOUBLE_EQ(c->interNodeLink().latency, 12e-6);
    EXPECT_NE(c->describe().find("16 nodes at 25 GB/s/GPU"), std::string::npos) << c->describe();
}

TEST_F(Hardware, ClusterFileWithInlineProfileAndOverrides)
{
    const auto path = writeFile("inline.json", R"({
        "name": "lab",
        "device": { "id": "x1", "name": "X1", "memory_gib": 96, "bf16_dense_tflops": 500,
                    "hbm_bandwidth_gbs": 3000,
                    "intra_node": { "kind": "XLink", "bandwidth_gbs": 200, "domain_size": 4 },
                    "inter_node": { "kind": "Eth", "bandwidth_gbs": 25 } },
        "gpus_per_node": 4,
        "intra_node": { "bandwidth_gbs": 150 },
        "nodes": 3 })");
    auto c = parseCluster(path);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->name, "lab");
    EXPECT_EQ(c->worldSize(), 12);
    EXPECT_DOUBLE_EQ(c->intraNode.bandwidth, 150e9);
    EXPECT_EQ(c->intraNode.kind, "XLink");
    EXPECT_DOUBLE_EQ(c->device.fp8Flops, 0.0);
}

TEST_F(Hardware, ClusterFileErrorsNameFileAndField)
{
    struct Case {
        const char* text;
        const char* expected;
    };
    const Case cases[] = {
        { R"({"device": "h200"})", "'nodes' is missing" },
        { R"({"nodes": 4})", "'device' is missing" },
        { R"({"device": "h999", "nodes": 4})", "unknown device 'h999'" },
        { R"({"device": "h200", "nodes": [{"count": 0}]})",
            "nodes[0]: 'count' must be a positive integer" },
        { R"({"device": "h200", "nodes": [{"count": 2, "inter_node": {"bandwidth_gbs": "fast"}}]})",
            "nodes[0]: inter_node: 'bandwidth_gbs' must be a number" },
        { R"({"device": "h200", "nodes": 2, "gpus_per_node": 6})", "does not tile nodes of 6" },
        { R"({"device": {"id": "x", "memory_gib": 10}, "nodes": 1})",
            "'bf16_dense_tflops' is missing" },
        { R"({"device": "h200", "nodes": 2, "intra_node": {"efficiency": 1.5}})",
            "'efficiency' must be in (0, 1]" },
    };
    int i = 0;
    for (const auto& c : cases) {
        const auto path = writeFile("bad" + std::to_string(i++) + ".json", c.text);
        auto r = parseCluster(path);
        ASSERT_FALSE(r) << c.text;
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
        EXPECT_NE(r.error().message.find(c.expected), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("bad"), std::string::npos)
            << "names the file: " << r.error().message;
    }
}

TEST_F(Hardware, MalformedAndMissingClusterFiles)
{
    const auto path = writeFile("broken.json", "{ \"device\": ");
    auto r = parseCluster(path);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("malformed JSON"), std::string::npos) << r.error().message;
    auto missing = parseCluster("/nonexistent/cluster.json");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::BadInput);
}

TEST_F(Hardware, ProfileRoundTripsThroughJson)
{
    auto p = findDeviceProfile("mi300x");
    ASSERT_TRUE(p);
    auto again = parseDeviceProfile(deviceProfileToJson(*p), "roundtrip");
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->id, p->id);
    EXPECT_NEAR(again->memoryBytes, p->memoryBytes, 1.0);
    EXPECT_DOUBLE_EQ(again->bf16Flops, p->bf16Flops);
    EXPECT_DOUBLE_EQ(again->intraNode.bandwidth, p->intraNode.bandwidth);
    EXPECT_EQ(again->domainSize, p->domainSize);
}

} // namespace
