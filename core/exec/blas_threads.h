#pragma once

namespace day0::exec {

/// The number of worker threads OpenBLAS uses for one matrix product (process-wide).
int blasThreads();

/// Makes OpenBLAS single-threaded for the scope and restores the previous count after it. For
/// callers that already run several threads of reference kernels at once (the trainer's
/// data-parallel ranks): a threaded OpenBLAS called from two threads concurrently spins in its
/// dispatcher (stories260K, dp=2, 10 steps: 6.6 s of CPU instead of 0.56 s). Process-wide, like
/// the setting it changes: do not nest with different intents from several threads.
class SingleThreadedBlas {
public:
    SingleThreadedBlas();
    ~SingleThreadedBlas();
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
    int m_previous;
};

} // namespace day0::exec
