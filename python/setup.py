"""Builds xsa_torch, the PyTorch operator over xsa's fused CPU attention, against an xsa build
folder.

The folder (XSA_BUILD_DIR, default ../build) is what `bash scripts/build.sh` makes: libxsa.so and
the headers as include/xsa/... The extension links libxsa.so with that folder as its run path, so
it loads without LD_LIBRARY_PATH as long as the build folder stays where it is.

  XSA_BUILD_DIR=/path/to/build python3 setup.py build_ext --inplace      (or: bash build.sh)
"""
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
xsa_build = os.path.abspath(os.environ.get("XSA_BUILD_DIR", os.path.join(here, "..", "build")))
for needed in ("libxsa.so", os.path.join("include", "xsa", "ops", "attention.h")):
    if not os.path.exists(os.path.join(xsa_build, needed)):
        raise SystemExit(f"setup.py: {xsa_build}/{needed} is missing; run `bash scripts/build.sh` "
                         "first or set XSA_BUILD_DIR to an xsa build folder")

setup(
    name="xsa_torch",
    version="0.1.0",
    description="xsa's fused CPU attention (SA, XSA, gated XSA, sinks, GQA) as a PyTorch operator",
    packages=["xsa_torch"],
    ext_modules=[
        CppExtension(
            "xsa_torch._C",
            ["xsa_torch/csrc/xsa_torch.cpp"],
            depends=[os.path.join(xsa_build, "include", "xsa", "ops", "attention.h")],
            include_dirs=[os.path.join(xsa_build, "include")],
            library_dirs=[xsa_build],
            libraries=["xsa"],
            runtime_library_dirs=[xsa_build],
            # C++17 for the kernel header; -O2 and no debug info: the work happens inside libxsa,
            # and the torch headers dominate the compile time.
            extra_compile_args=["-std=c++17", "-O2", "-g0", "-Wno-deprecated-declarations"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
