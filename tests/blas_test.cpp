// The BLAS kernel correction: which OpenBLAS choices get overridden, and that the library runs the
// kernels xsa asked for.
#include "xsa/util/blas.h"

#include <gtest/gtest.h>

namespace xsa {
namespace {

TEST(Blas, CorrectsOnlyKernelsOlderThanTheCpu) {
  EXPECT_EQ(blas_core_correction("Prescott", "SkylakeX"),
            "SkylakeX");  // Debian 0.3.21 on new Xeons
  EXPECT_EQ(blas_core_correction("Nehalem", "Haswell"), "Haswell");
  EXPECT_EQ(blas_core_correction("Sandybridge", "SkylakeX"), "SkylakeX");
  EXPECT_EQ(blas_core_correction("Cooperlake", "SkylakeX"), "");  // already AVX-512
  EXPECT_EQ(blas_core_correction("Zen", "SkylakeX"), "");
  EXPECT_EQ(blas_core_correction("Haswell", "Haswell"), "");
  EXPECT_EQ(blas_core_correction("Prescott", ""), "");  // a CPU without AVX2: nothing better
}

TEST(Blas, ReportsTheKernelsInUse) {
  EXPECT_FALSE(blas_core().empty());
  EXPECT_FALSE(blas_origin().empty());
}

// Benchmarks say when OPENBLAS_CORETYPE holds the products below what the CPU supports, and only
// then.
TEST(Blas, NotesKernelsPinnedBelowTheCpu) {
  EXPECT_EQ(blas_kernels_note("Haswell", "Haswell", "SkylakeX"),
            "note: OpenBLAS runs its Haswell kernels because OPENBLAS_CORETYPE=Haswell is set, but "
            "this CPU supports SkylakeX (AVX-512): the products here are slower than on this CPU "
            "unpinned (unset the variable to measure that; xsa leaves it as set)");
  EXPECT_NE(blas_kernels_note("Prescott", "Prescott", "Haswell"), "");
  EXPECT_EQ(blas_kernels_note("Cooperlake", "", "SkylakeX"), "");            // not pinned
  EXPECT_EQ(blas_kernels_note("Cooperlake", "Cooperlake", "SkylakeX"), "");  // pinned, as good
  EXPECT_EQ(blas_kernels_note("SkylakeX", "SkylakeX", "SkylakeX"), "");
  EXPECT_EQ(blas_kernels_note("Haswell", "Haswell", "Haswell"), "");
  EXPECT_EQ(blas_kernels_note("Haswell", "Haswell", ""), "");  // nothing known about the CPU
}

}  // namespace
}  // namespace xsa
