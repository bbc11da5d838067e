// Test support, loaded with LD_PRELOAD: makes OpenBLAS report the generic "Prescott" kernels, as
// Debian's 0.3.21 does on CPUs it does not recognise, so the tests can watch xsa correct it.
extern "C" char* openblas_get_corename(void) {
  static char name[] = "Prescott";
  return name;
}
