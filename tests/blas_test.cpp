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

}  // namespace
}  // namespace xsa
