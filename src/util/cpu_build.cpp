// What this build's compiler flags let every function use (only data here, no code): the default
// build's x86-64-v3, or with XSA_NATIVE the build machine's own instruction sets.
#include "xsa/util/cpu_features.h"

namespace xsa::cpu_features {

extern const unsigned kBuildFeatures = 0u
#ifdef __AVX__
                                       | kAvx
#endif
#ifdef __AVX2__
                                       | kAvx2
#endif
#ifdef __FMA__
                                       | kFma
#endif
#ifdef __BMI__
                                       | kBmi1
#endif
#ifdef __BMI2__
                                       | kBmi2
#endif
#ifdef __F16C__
                                       | kF16c
#endif
#ifdef __LZCNT__
                                       | kLzcnt
#endif
#ifdef __MOVBE__
                                       | kMovbe
#endif
#ifdef __AVX512F__
                                       | kAvx512f
#endif
#ifdef __AVX512BW__
                                       | kAvx512bw
#endif
#ifdef __AVX512DQ__
                                       | kAvx512dq
#endif
#ifdef __AVX512VL__
                                       | kAvx512vl
#endif
#ifdef __AVX512CD__
                                       | kAvx512cd
#endif
#ifdef __AVX512BF16__
                                       | kAvx512bf16
#endif
#ifdef __AMX_TILE__
                                       | kAmxTile
#endif
#ifdef __AMX_BF16__
                                       | kAmxBf16
#endif
    ;

}  // namespace xsa::cpu_features
