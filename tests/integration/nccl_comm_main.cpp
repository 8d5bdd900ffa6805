// The communicator conformance suite over NCCL on CUDA devices, two MPI ranks.
// Run directly: without a CUDA device it exits 77 (CTest: skipped) saying why; with one it
// re-launches itself under mpirun with two ranks, which share the devices round-robin.
#include "comm/communicator.h"
#include "conformance.h"
#include "mpi_communicator.h"
#include "nccl_communicator.h"

#include <cstdlib>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <unistd.h>
#include <vector>

namespace {

using namespace day0;

/// Presents a device communicator to host code: copies host buffers to the device, runs the
/// call, copies the results back. Test-only; the engine passes device buffers directly.
class HostStaging final : public comm::Communicator {
public:
    explicit HostStaging(std::shared_ptr<comm::Communicator> device)
        : m_device(std::move(device))
    {
    }
    int rank() const override { return m_device->rank(); }
    int size() const override { return m_device->size(); }
    std::string name() const override { return m_device->name(); }
    void setObserver(comm::CollectiveObserver o) override { m_device->setObserver(std::move(o)); }
    void abort(const std::string& reason) override { m_device->abort(reason); }

    Result<void> allReduce(
        const void* s, void* r, std::size_t n, DType t, comm::ReduceOp op) override
    {
        const auto bytes = n * std::size_t(dtypeSize(t));
        auto in = toDevice(s, bytes);
        auto out = scratch(bytes);
        DAY0_TRY(m_device->allReduce(in, out, n, t, op));
        return toHost(r, out, bytes);
    }
    Result<void> allGather(const void* s, void* r, std::size_t n, DType t) override
    {
        const auto bytes = n * std::size_t(dtypeSize(t));
        auto in = toDevice(s, bytes);
        auto out = scratch(bytes * std::size_t(size()));
        DAY0_TRY(m_device->allGather(in, out, n, t));
        return toHost(r, out, bytes * std::size_t(size()));
    }
    Result<void> reduceScatter(
        const void* s, void* r, std::size_t n, DType t, comm::ReduceOp op) override
    {
        const auto bytes = n * std::size_t(dtypeSize(t));
        auto in = toDevice(s, bytes * std::size_t(size()));
        auto out = scratch(bytes);
        DAY0_TRY(m_device->reduceScatter(in, out, n, t, op));
        return toHost(r, out, bytes);
    }
    Result<void> allToAll(const void* s, void* r, std::size_t n, DType t) override
    {
        const auto bytes = n * std::size_t(dtypeSize(t)) * std::size_t(size());
        auto in = toDevice(s, bytes);
        auto out = scratch(bytes);
        DAY0_TRY(m_device->allToAll(in, out, n, t));
        return toHost(r, out, bytes);
    }
    Result<void> allToAllV(const void* s, const std::vector<std::size_t>& sc,
        const std::vector<std::size_t>& sd, void* r, const std::vector<std::size_t>& rc,
        const std::vector<std::size_t>& rd, DType t) override
    {
        std::size_t sendExtent = 0;
        std::size_t recvExtent = 0;
        for (std::size_t i = 0; i < sc.size(); ++i) {
            sendExtent = std::max(sendExtent, sd[i] + sc[i]);
            recvExtent = std::max(recvExtent, rd[i] + rc[i]);
        }
        const auto elem = std::size_t(dtypeSize(t));
        auto in = toDevice(s, sendExtent * elem);
        auto out = scratch(recvExtent * elem);
        DAY0_TRY(m_device->allToAllV(in, sc, sd, out, rc, rd, t));
        return toHost(r, out, recvExtent * elem);
    }
    Result<void> broadcast(void* b, std::size_t n, DType t, int root) override
    {
        const auto bytes = n * std::size_t(dtypeSize(t));
        auto buf = toDevice(b, bytes);
        DAY0_TRY(m_device->broadcast(buf, n, t, root));
        return toHost(b, buf, bytes);
    }
    Result<void> send(const void* b, std::size_t n, DType t, int peer, int tag) override
    {
        return m_device->send(toDevice(b, n * std::size_t(dtypeSize(t))), n, t, peer, tag);
    }
    Result<void> recv(void* b, std::size_t n, DType t, int peer, int tag) override
    {
        const auto bytes = n * std::size_t(dtypeSize(t));
        auto buf = scratch(bytes);
        DAY0_TRY(m_device->recv(buf, n, t, peer, tag));
        return toHost(b, buf, bytes);
    }
    Result<void> barrier() override { return m_device->barrier(); }
    Result<std::shared_ptr<comm::Communicator>> split(
        int color, int key, const std::string& name) override
    {
        auto child = m_device->split(color, key, name);
        if (!child || !*child) {
            return child;
        }
        return std::shared_ptr<comm::Communicator>(std::make_shared<HostStaging>(*child));
    }

    ~HostStaging() override
    {
        for (void* p : m_allocations) {
            cudaFree(p);
        }
    }

private:
    void* scratch(std::size_t bytes)
    {
        void* p = nullptr;
        cudaMalloc(&p, std::max<std::size_t>(bytes, 1));
        m_allocations.push_back(p);
        return p;
    }
    void* toDevice(const void* host, std::size_t bytes)
    {
        void* p = scratch(bytes);
        cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
        return p;
    }
    Result<void> toHost(void* host, const void* device, std::size_t bytes)
    {
        if (cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
            return Error::internal("cudaMemcpy to the host failed");
        }
        return success();
    }

    std::shared_ptr<comm::Communicator> m_device;
    std::vector<void*> m_allocations;
};

} // namespace

int main(int argc, char** argv)
{
    if (!std::getenv("OMPI_COMM_WORLD_SIZE")) {
        if (auto reason = nccl::cudaUnavailableReason()) {
            fmt::print("SKIPPED: {}\n", *reason);
            return 77;
        }
        std::vector<char*> args { const_cast<char*>(DAY0_MPIEXEC),
            const_cast<char*>("--oversubscribe"), const_cast<char*>("--allow-run-as-root"),
            const_cast<char*>("-np"), const_cast<char*>("2"), argv[0], nullptr };
        ::execv(DAY0_MPIEXEC, args.data());
        fmt::print(stderr, "cannot start {}\n", DAY0_MPIEXEC);
        return 2;
    }
    (void)argc;
    auto world = mpi::createMpiWorld();
    if (!world) {
        fmt::print(stderr, "day0: error: {}\n", world.error().message);
        return 2;
    }
    int devices = 1;
    cudaGetDeviceCount(&devices);
    nccl::NcclOptions options;
    options.device = (*world)->rank() % std::max(devices, 1);
    auto device = nccl::createNcclCommunicator(**world, options);
    if (!device) {
        fmt::print(stderr, "day0: error: {}\n", device.error().message);
        return 2;
    }
    HostStaging staged(*device);
    auto outcome = comm::test::runConformance(staged);
    if (!outcome) {
        fmt::print(stderr, "FAILED: {}\n", outcome.error().message);
        return 1;
    }
    if (staged.rank() == 0) {
        fmt::print("NCCL conformance passed on {} ranks\n", staged.size());
    }
    return 0;
}
