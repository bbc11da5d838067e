# `cmake --install build --prefix P`: libxsa (static and shared), the headers under
# P/include/xsa/, the CMake package (find_package(xsa) → xsa::xsa, xsa::xsa_static), the pkg-config
# file (pkg-config --cflags --libs xsa) and the `xsa` tool.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS xsa_static xsa_shared EXPORT xsaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS xsa RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The CUDA module where backend/device.cpp looks for it: <prefix>/lib/xsa/, beside the binary's and
# the library's ../lib.
if(TARGET xsa_cuda)
  install(TARGETS xsa_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/xsa)
endif()
install(DIRECTORY src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xsa
        FILES_MATCHING PATTERN "*.h" PATTERN "tools" EXCLUDE PATTERN "server" EXCLUDE)
install(EXPORT xsaTargets NAMESPACE xsa:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xsa)

set(XSA_OPENBLAS_LIBRARY ${OPENBLAS_LIBRARY})
configure_package_config_file(cmake/xsaConfig.cmake.in ${CMAKE_BINARY_DIR}/xsaConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xsa)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/xsaConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/xsaConfig.cmake ${CMAKE_BINARY_DIR}/xsaConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xsa)

# Relocatable: the prefix is found from the .pc file's own place, so --prefix at install time holds.
file(RELATIVE_PATH XSA_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(XSA_PC_DNNL "")
string(REPLACE ";" " " XSA_PC_SPM "${XSA_SENTENCEPIECE_LIBRARIES};${XSA_DATA_LIBRARIES} ")
if(DNNL_LIBRARY)
  set(XSA_PC_DNNL "${DNNL_LIBRARY} ")
endif()
set(XSA_PC_MPI "")
if(MPI_C_FOUND)  # the static library's MPI, by the name Debian's MPI packages give it
  set(XSA_PC_MPI "Requires.private: mpi-c\n")
endif()
configure_file(cmake/xsa.pc.in ${CMAKE_BINARY_DIR}/xsa.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/xsa.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
