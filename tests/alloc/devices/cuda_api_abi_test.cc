// cuda_api.h against the CUDA toolkit's own cuda.h and cudaTypedefs.h (13.0
// or newer), built only where the toolkit is: every type's size, alignment
// and (for enums) underlying type, every field's offset and size, every
// constant's value, and each entry point's type against NVIDIA's type of
// that entry point at the version cudafs asks the driver for
// (PFN_<name>_v<version>). A last test reads cuda_api.h and fails on any
// declaration that the lists here leave unchecked.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include "alloc/devices/cuda_api.h"
#include "gtest/gtest.h"

// After cuda_api.h: cuda.h's macros (cuMemGetInfo -> cuMemGetInfo_v2,
// CU_MEMHOSTALLOC_PORTABLE...) would rewrite its declarations.
#include <cuda.h>
#include <cudaTypedefs.h>

namespace cu = cudafs::cu;

// cuda.h's constants that are macros, kept before the macros go: past
// this point cu::CU_MEMHOSTALLOC_PORTABLE must name ours.
#define CUDAFS_MACRO_CONSTANTS(X) \
  X(CU_MEMHOSTALLOC_PORTABLE)     \
  X(CU_MEMHOSTALLOC_DEVICEMAP) X(CU_MEMHOSTALLOC_WRITECOMBINED) X(CU_MEMHOSTREGISTER_PORTABLE)
#define CUDAFS_MACRO_STREAMS(X) X(CU_STREAM_LEGACY) X(CU_STREAM_PER_THREAD)

namespace theirs {
#define CUDAFS_KEEP(name) const uint64_t k##name = static_cast<uint64_t>(name);
CUDAFS_MACRO_CONSTANTS(CUDAFS_KEEP)
#undef CUDAFS_KEEP
#define CUDAFS_KEEP(name) const uintptr_t k##name = reinterpret_cast<uintptr_t>(name);
CUDAFS_MACRO_STREAMS(CUDAFS_KEEP)
#undef CUDAFS_KEEP
}  // namespace theirs
#undef CU_MEMHOSTALLOC_PORTABLE
#undef CU_MEMHOSTALLOC_DEVICEMAP
#undef CU_MEMHOSTALLOC_WRITECOMBINED
#undef CU_MEMHOSTREGISTER_PORTABLE
#undef CU_STREAM_LEGACY
#undef CU_STREAM_PER_THREAD

namespace {

#define CUDAFS_ENUMS(X)             \
  X(CUresult)                       \
  X(CUstream_flags)                 \
  X(CUdevice_attribute)             \
  X(CUdriverProcAddress_flags)      \
  X(CUdriverProcAddressQueryResult) \
  X(CUmemAllocationType)            \
  X(CUmemAllocationHandleType)      \
  X(CUmemLocationType)              \
  X(CUmemAccess_flags) X(CUmemAllocationGranularity_flags) X(CUmemcpySrcAccessOrder)
#define CUDAFS_STRUCTS(X) \
  X(CUmemLocation) X(CUmemAllocationProp) X(CUmemAccessDesc) X(CUmemcpyAttributes)
// Opaque: no size to compare, only the name.
#define CUDAFS_HANDLES(X) X(CUctx_st) X(CUstream_st) X(CUmod_st) X(CUfunc_st)
#define CUDAFS_TYPEDEFS(X) \
  X(CUdevice)              \
  X(CUdeviceptr)           \
  X(CUmemGenericAllocationHandle) X(cuuint64_t) X(CUcontext) X(CUstream) X(CUmodule) X(CUfunction)
#define CUDAFS_FIELDS(X)                                  \
  X(CUmemLocation, type)                                  \
  X(CUmemLocation, id)                                    \
  X(CUmemAllocationProp, type)                            \
  X(CUmemAllocationProp, requestedHandleTypes)            \
  X(CUmemAllocationProp, location)                        \
  X(CUmemAllocationProp, win32HandleMetaData)             \
  X(CUmemAllocationProp, allocFlags)                      \
  X(CUmemAllocationProp, allocFlags.compressionType)      \
  X(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable) \
  X(CUmemAllocationProp, allocFlags.usage)                \
  X(CUmemAllocationProp, allocFlags.reserved)             \
  X(CUmemAccessDesc, location)                            \
  X(CUmemAccessDesc, flags)                               \
  X(CUmemcpyAttributes, srcAccessOrder)                   \
  X(CUmemcpyAttributes, srcLocHint)                       \
  X(CUmemcpyAttributes, dstLocHint)                       \
  X(CUmemcpyAttributes, flags)
#define CUDAFS_ENUMERATORS(X)                                        \
  X(CUDA_SUCCESS)                                                    \
  X(CUDA_ERROR_INVALID_VALUE)                                        \
  X(CUDA_ERROR_OUT_OF_MEMORY)                                        \
  X(CUDA_ERROR_NOT_INITIALIZED)                                      \
  X(CUDA_ERROR_DEINITIALIZED)                                        \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE)                                   \
  X(CUDA_ERROR_NO_DEVICE)                                            \
  X(CUDA_ERROR_INVALID_DEVICE)                                       \
  X(CUDA_ERROR_INVALID_CONTEXT)                                      \
  X(CUDA_ERROR_ECC_UNCORRECTABLE)                                    \
  X(CUDA_ERROR_INVALID_HANDLE)                                       \
  X(CUDA_ERROR_NOT_FOUND)                                            \
  X(CUDA_ERROR_NOT_READY)                                            \
  X(CUDA_ERROR_ILLEGAL_ADDRESS)                                      \
  X(CUDA_ERROR_LAUNCH_TIMEOUT)                                       \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED)                                 \
  X(CUDA_ERROR_ASSERT)                                               \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)                       \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)                           \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR)                                 \
  X(CUDA_ERROR_ILLEGAL_INSTRUCTION)                                  \
  X(CUDA_ERROR_MISALIGNED_ADDRESS)                                   \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE)                                \
  X(CUDA_ERROR_INVALID_PC)                                           \
  X(CUDA_ERROR_LAUNCH_FAILED)                                        \
  X(CUDA_ERROR_NOT_SUPPORTED)                                        \
  X(CUDA_ERROR_UNKNOWN)                                              \
  X(CU_STREAM_NON_BLOCKING)                                          \
  X(CU_DEVICE_ATTRIBUTE_ECC_ENABLED)                                 \
  X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)                          \
  X(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)     \
  X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)         \
  X(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) \
  X(CU_GET_PROC_ADDRESS_DEFAULT)                                     \
  X(CU_GET_PROC_ADDRESS_SUCCESS)                                     \
  X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)                            \
  X(CU_MEM_ALLOCATION_TYPE_PINNED)                                   \
  X(CU_MEM_HANDLE_TYPE_NONE)                                         \
  X(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)                        \
  X(CU_MEM_LOCATION_TYPE_DEVICE)                                     \
  X(CU_MEM_ACCESS_FLAGS_PROT_NONE)                                   \
  X(CU_MEM_ACCESS_FLAGS_PROT_READ)                                   \
  X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)                              \
  X(CU_MEM_ALLOC_GRANULARITY_MINIMUM)                                \
  X(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)                            \
  X(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID)                              \
  X(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)

// Theirs<T>: T with each of our types replaced by cuda.h's of the same
// name, through pointers, const and function types, so that an entry
// point's type compares with std::is_same.
template <typename T>
struct Theirs {
  using type = T;
};
template <typename T>
struct Theirs<T*> {
  using type = typename Theirs<T>::type*;
};
template <typename T>
struct Theirs<const T> {
  using type = const typename Theirs<T>::type;
};
template <typename R, typename... A>
struct Theirs<R(A...)> {
  using type = typename Theirs<R>::type(typename Theirs<A>::type...);
};
#define CUDAFS_THEIRS(name) \
  template <>               \
  struct Theirs<cu::name> { \
    using type = ::name;    \
  };
CUDAFS_ENUMS(CUDAFS_THEIRS)
CUDAFS_STRUCTS(CUDAFS_THEIRS)
CUDAFS_HANDLES(CUDAFS_THEIRS)
#undef CUDAFS_THEIRS
template <typename T>
using TheirsT = typename Theirs<T>::type;

TEST(CudaApiAbiTest, TypesHaveTheToolkitsLayout) {
#define CUDAFS_CHECK(name)                              \
  EXPECT_EQ(sizeof(cu::name), sizeof(::name)) << #name; \
  EXPECT_EQ(alignof(cu::name), alignof(::name)) << #name;
  CUDAFS_ENUMS(CUDAFS_CHECK)
  CUDAFS_STRUCTS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
#define CUDAFS_CHECK(name)                                                                        \
  EXPECT_TRUE((std::is_same_v<std::underlying_type_t<cu::name>, std::underlying_type_t<::name>>)) \
      << #name;
  CUDAFS_ENUMS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
#define CUDAFS_CHECK(name) EXPECT_TRUE((std::is_same_v<TheirsT<cu::name>, ::name>)) << #name;
  CUDAFS_TYPEDEFS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
}

TEST(CudaApiAbiTest, FieldsLieWhereTheToolkitsDo) {
#define CUDAFS_CHECK(type, field)                                                    \
  EXPECT_EQ(offsetof(cu::type, field), offsetof(::type, field)) << #type "." #field; \
  EXPECT_EQ(sizeof(cu::type::field), sizeof(::type::field)) << #type "." #field;
  CUDAFS_FIELDS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
}

TEST(CudaApiAbiTest, ConstantsHaveTheToolkitsValues) {
#define CUDAFS_CHECK(name) \
  EXPECT_EQ(static_cast<int64_t>(cu::name), static_cast<int64_t>(::name)) << #name;
  CUDAFS_ENUMERATORS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
#define CUDAFS_CHECK(name) EXPECT_EQ(static_cast<uint64_t>(cu::name), theirs::k##name) << #name;
  CUDAFS_MACRO_CONSTANTS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
#define CUDAFS_CHECK(name) \
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cu::name), theirs::k##name) << #name;
  CUDAFS_MACRO_STREAMS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
}

// The version is what cudafs asks cuGetProcAddress for: NVIDIA's type of
// the entry point at that version must be ours.
TEST(CudaApiAbiTest, EntryPointsHaveTheToolkitsTypeAtTheirVersion) {
#define CUDAFS_CHECK(name, version)                                               \
  EXPECT_TRUE((std::is_same_v<TheirsT<cu::name##_t>, ::PFN_##name##_v##version>)) \
      << #name " as of CUDA " #version;
  CUDAFS_CU_ENTRY_POINTS(CUDAFS_CHECK)
#undef CUDAFS_CHECK
}

// Every declaration of cuda_api.h, as the header spells it.
std::set<std::string> Declared() {
  std::ifstream file(CUDAFS_CUDA_API_HEADER);
  std::stringstream text;
  text << file.rdbuf();
  const std::string source = text.str();
  EXPECT_FALSE(source.empty()) << "cannot read " << CUDAFS_CUDA_API_HEADER;
  std::set<std::string> names;
  const std::regex declaration(
      R"(\n(?:enum|struct) (\w+)|\n  (CU\w+) = |\nusing (\w+) = |\ninline constexpr (?:\w+ )+(\w+) =|\ninline CUstream const (\w+) =)");
  for (std::sregex_iterator it(source.begin(), source.end(), declaration), end; it != end; ++it) {
    for (size_t group = 1; group < it->size(); ++group) {
      if ((*it)[group].matched) names.insert((*it)[group].str());
    }
  }
  return names;
}

TEST(CudaApiAbiTest, EveryDeclarationIsChecked) {
  std::set<std::string> checked = {"kOldestDriverVersion"};  // ours, not the driver's
#define CUDAFS_NAME(name) checked.insert(#name);
  CUDAFS_ENUMS(CUDAFS_NAME)
  CUDAFS_STRUCTS(CUDAFS_NAME)
  CUDAFS_HANDLES(CUDAFS_NAME)
  CUDAFS_TYPEDEFS(CUDAFS_NAME)
  CUDAFS_ENUMERATORS(CUDAFS_NAME)
  CUDAFS_MACRO_CONSTANTS(CUDAFS_NAME)
  CUDAFS_MACRO_STREAMS(CUDAFS_NAME)
#undef CUDAFS_NAME
#define CUDAFS_NAME(name, version) checked.insert(#name "_t");
  CUDAFS_CU_ENTRY_POINTS(CUDAFS_NAME)
#undef CUDAFS_NAME
  const std::set<std::string> declared = Declared();
  EXPECT_GT(declared.size(), 100u) << "cuda_api.h read wrongly";
  for (const std::string& name : declared) {
    EXPECT_TRUE(checked.count(name)) << name << " is declared in cuda_api.h but not checked here";
  }
}

}  // namespace
