// The dense peak rates of NVIDIA GPUs, for model FLOPs utilisation: the vendor's data-sheet
// figures (without sparsity) for the models xsa knows by name, else a value derived from the SM
// count and the highest SM clock, said so in PeakFlops::source. Host code only (the CUDA module
// and its tests include it).
#pragma once

#include <cstring>
#include <string>

#include "xsa/backend/backend.h"

namespace xsa {

struct GpuPeakRow {
  const char* model;    // a word of the device's name ("H100"), matched up to '-' or its end
  const char* variant;  // another word that must be in the name ("PCIe"), or ""
  double bf16_tflops, tf32_tflops, fp32_tflops;
};

// Dense figures from NVIDIA's data sheets. Order matters: a variant before its model's plain row.
inline constexpr GpuPeakRow kGpuPeaks[] = {
    {"H100", "PCIe", 756, 378, 51}, {"H100", "NVL", 835, 418, 60},
    {"H100", "", 989, 495, 67},                                  // SXM ("NVIDIA H100 80GB HBM3")
    {"H200", "NVL", 835, 418, 60},  {"H200", "", 989, 495, 67},  // SXM
    {"A100", "", 312, 156, 19.5},   {"L40S", "", 362, 183, 91.6},
    {"L40", "", 181, 90.5, 90.5},   {"L4", "", 121, 60, 30.3},
    {"A10", "", 125, 62.5, 31.2},   {"A40", "", 150, 74.8, 37.4},
    {"A6000", "", 155, 77.4, 38.7},
};

// Whether `name` has a word that is `word`, or starts with `word` followed by '-'.
inline bool has_model_word(const std::string& name, const char* word) {
  const size_t n = std::strlen(word);
  for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const bool starts = at == 0 || name[at - 1] == ' ';
    const char after = at + n < name.size() ? name[at + n] : ' ';
    if (starts && (after == ' ' || after == '-')) return true;
  }
  return false;
}

// The peaks of the GPU called `name` (cudaDeviceProp::name); an unknown model's from its SMs,
// clock (kHz) and compute capability (major·10 + minor), where the tensor cores' dense bf16 FLOPs
// per SM and clock are Ampere A100's 2048, consumer Ampere's and Ada's 512, Hopper's 4096,
// data-centre Blackwell's 8192 and workstation Blackwell's 1024; TF32 at half of bf16, fp32 at two
// FLOPs per CUDA core (64 per SM on sm_80, 128 on the others).
inline PeakFlops gpu_peak_flops(const std::string& name, int sms, int clock_khz, int sm) {
  for (const GpuPeakRow& row : kGpuPeaks)
    if (has_model_word(name, row.model) && (!*row.variant || has_model_word(name, row.variant)))
      return {row.bf16_tflops * 1e12, row.tf32_tflops * 1e12, row.fp32_tflops * 1e12,
              std::string("NVIDIA's data sheet for ") + row.model +
                  (*row.variant ? std::string(" ") + row.variant : std::string())};
  const double per_clock = sm == 80    ? 2048
                           : sm >= 120 ? 1024
                           : sm >= 100 ? 8192
                           : sm >= 90  ? 4096
                           : sm >= 86  ? 512
                                       : 0;
  const double hz = clock_khz * 1e3;
  PeakFlops p;
  p.bf16 = sms * hz * per_clock;
  p.tf32 = p.bf16 / 2;
  p.fp32 = sms * hz * 2 * (sm == 80 ? 64 : 128);
  p.source = "derived from " + std::to_string(sms) + " SMs at " + std::to_string(clock_khz / 1000) +
             " MHz (" + name + " is not in xsa's table)";
  return p;
}

}  // namespace xsa
