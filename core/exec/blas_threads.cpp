#include "exec/blas_threads.h"

#include <cblas.h>

namespace day0::exec {

int blasThreads() { return openblas_get_num_threads(); }

SingleThreadedBlas::SingleThreadedBlas()
    : m_previous(openblas_get_num_threads())
{
    openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() { openblas_set_num_threads(m_previous); }

} // namespace day0::exec
