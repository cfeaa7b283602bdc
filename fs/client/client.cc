// libcudafs_client (cudafs.h): asks the daemon of the file's mount for it,
// proving access with the file's descriptor (share_conversation.h), and
// maps the pieces the daemon hands back, or the memory it filled.
// Standalone: only libc and, at run time, libcuda.so.1 (dlopen), so one
// library serves machines with and without a GPU.
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "alloc/devices/cuda_api.h"
#include "fs/client/client_error.h"
#include "fs/client/cudafs.h"
#include "fs/client/room_request.h"
#include "fs/client/share_conversation.h"
#include "fs/wire/share_protocol.h"

namespace cu = cudafs::cu;

struct cudafs_mapping {
  int memory = 0;
  int device = -1;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t mapped = 0;  // bytes of address space: the pieces, back to back
  bool retained_context = false;
  // Host memory moved into a range of the caller's (cudafs_mapping_move):
  // the caller unmaps it.
  bool callers_range = false;
  // Shared mappings: the file, open for reading and writing (cudafs_sync).
  int file = -1;
  std::vector<uint64_t> piece_sizes;  // CUDA: unmapped one by one; host: moved so
};

namespace {

using cudafs::ShareReply;
using cudafs::client::Ask;
using cudafs::client::Begin;
using cudafs::client::BoundReplies;
using cudafs::client::Fail;
using cudafs::client::Pieces;
using cudafs::client::ReceivePieces;
using cudafs::client::ReplyBoundSeconds;
using cudafs::client::SendImported;

int MapHost(const Pieces& pieces, cudafs_mapping* out) {
  const uint64_t total = pieces.total;
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return Fail(ENOMEM, "no address space for %llu bytes", static_cast<unsigned long long>(total));
  }
  uint64_t at = 0;
  for (size_t i = 0; i < pieces.fds.size(); ++i) {
    if (mmap(static_cast<char*>(base) + at, pieces.sizes[i], PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, pieces.fds[i], 0) == MAP_FAILED) {
      const int error = errno;
      munmap(base, total);
      return Fail(error, "mmap of a piece: %s", std::strerror(error));
    }
    at += pieces.sizes[i];
  }
  out->memory = CUDAFS_MEMORY_HOST;
  out->address = reinterpret_cast<uintptr_t>(base);
  out->mapped = total;
  out->piece_sizes = pieces.sizes;
  return 0;
}

// Makes every page of the memfd `fd` of `size` bytes this process's:
// allocated (fallocate reports running out, where a touch would be
// SIGBUS), then written once, so that the daemon sees them there (pages
// fallocate reserved but nobody wrote look missing to mincore and
// SEEK_HOLE, and the daemon refuses memory it would have to allocate).
int AllocateHere(int fd, uint64_t size) {
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0) {
    return Fail(errno == ENOSPC ? ENOMEM : errno, "no memory for a copy of %llu bytes: %s",
                static_cast<unsigned long long>(size), std::strerror(errno));
  }
  void* view = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (view == MAP_FAILED) return Fail(errno, "mmap of a copy's memory: %s", std::strerror(errno));
  // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch each page instead.
  if (madvise(view, size, MADV_POPULATE_WRITE) != 0) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (size_t at = 0; at < size; at += page) static_cast<volatile char*>(view)[at] = 0;
  }
  munmap(view, size);
  return 0;
}

// A private copy in host memory: memfds of this process's, their pages
// allocated here (so they are this process's memory), filled by the
// daemon, mapped back to back.
int CopyHost(int connection, const Pieces& plan, cudafs_mapping* out) {
  std::vector<int> memory;
  int result = 0;
  for (size_t i = 0; i < plan.sizes.size() && result == 0; ++i) {
    const int fd = memfd_create("cudafs-copy", MFD_CLOEXEC);
    if (fd < 0) {
      result = Fail(errno, "memfd_create: %s", std::strerror(errno));
      break;
    }
    memory.push_back(fd);
    result = AllocateHere(fd, plan.sizes[i]);
  }
  ShareReply filled;
  if (result == 0) result = BoundReplies(connection, ReplyBoundSeconds(plan.total));
  if (result == 0) result = Ask(connection, cudafs::kShareFill, 0, plan.total, memory, &filled);
  if (result == 0) {
    Pieces pieces = plan;
    pieces.fds = memory;
    result = MapHost(pieces, out);
  }
  for (int fd : memory) close(fd);
  if (result != 0) return result;
  out->size = filled.size;
  return 0;
}

// The driver entry points the client needs, from libcuda.so.1, each as
// cuda_api.h declares it.
struct Driver {
  cu::cuDeviceGet_t device_get;
  cu::cuDeviceGetByPCIBusId_t device_by_bus_id;
  cu::cuCtxGetCurrent_t get_current;
  cu::cuCtxGetDevice_t context_device;
  cu::cuDeviceCanAccessPeer_t can_access_peer;
  cu::cuCtxSetCurrent_t set_current;
  cu::cuDevicePrimaryCtxRetain_t retain;
  cu::cuDevicePrimaryCtxRelease_t release;
  cu::cuMemImportFromShareableHandle_t import;
  cu::cuMemAddressReserve_t reserve;
  cu::cuMemAddressFree_t address_free;
  cu::cuMemMap_t map;
  cu::cuMemUnmap_t unmap;
  cu::cuMemSetAccess_t set_access;
  cu::cuMemRelease_t memory_release;
  cu::cuMemCreate_t create;
  cu::cuMemExportToShareableHandle_t export_handle;
  cu::cuMemGetAllocationGranularity_t granularity;
};

// `name` at the version `T`, its type, was declared at (cu::ProcAddress).
template <typename T>
bool Find(cu::cuGetProcAddress_t get_proc_address, int driver_version, T* entry, const char* name,
          int version) {
  void* symbol = cu::ProcAddress(get_proc_address, driver_version, name, version);
  *entry = reinterpret_cast<T>(symbol);
  return symbol != nullptr;
}

const Driver* LoadDriver() {
  static const Driver* const driver = []() -> const Driver* {
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return nullptr;
    auto get_proc_address =
        reinterpret_cast<cu::cuGetProcAddress_t>(dlsym(library, "cuGetProcAddress_v2"));
    auto init = reinterpret_cast<cu::cuInit_t>(dlsym(library, "cuInit"));
    auto get_version =
        reinterpret_cast<cu::cuDriverGetVersion_t>(dlsym(library, "cuDriverGetVersion"));
    int version = 0;
    if (get_proc_address == nullptr || init == nullptr || get_version == nullptr ||
        init(0) != cu::CUDA_SUCCESS || get_version(&version) != cu::CUDA_SUCCESS ||
        version < cu::kOldestDriverVersion) {
      return nullptr;
    }
    auto* d = new Driver;
#define CUDAFS_FIND(member, name) \
  Find<cu::name##_t>(get_proc_address, version, &d->member, #name, cu::name##_version)
    const bool found =
        CUDAFS_FIND(device_get, cuDeviceGet) &&
        CUDAFS_FIND(device_by_bus_id, cuDeviceGetByPCIBusId) &&
        CUDAFS_FIND(get_current, cuCtxGetCurrent) && CUDAFS_FIND(context_device, cuCtxGetDevice) &&
        CUDAFS_FIND(can_access_peer, cuDeviceCanAccessPeer) &&
        CUDAFS_FIND(set_current, cuCtxSetCurrent) &&
        CUDAFS_FIND(retain, cuDevicePrimaryCtxRetain) &&
        CUDAFS_FIND(release, cuDevicePrimaryCtxRelease) &&
        CUDAFS_FIND(import, cuMemImportFromShareableHandle) &&
        CUDAFS_FIND(reserve, cuMemAddressReserve) && CUDAFS_FIND(address_free, cuMemAddressFree) &&
        CUDAFS_FIND(map, cuMemMap) && CUDAFS_FIND(unmap, cuMemUnmap) &&
        CUDAFS_FIND(set_access, cuMemSetAccess) && CUDAFS_FIND(memory_release, cuMemRelease) &&
        CUDAFS_FIND(create, cuMemCreate) &&
        CUDAFS_FIND(export_handle, cuMemExportToShareableHandle) &&
        CUDAFS_FIND(granularity, cuMemGetAllocationGranularity);
#undef CUDAFS_FIND
    if (!found) {
      delete d;
      return nullptr;
    }
    return d;
  }();
  return driver;
}

int CudaFail(cu::CUresult result, const char* call) {
  return Fail(result == cu::CUDA_ERROR_OUT_OF_MEMORY ? ENOMEM : EIO, "%s failed: CUDA error %d",
              call, static_cast<int>(result));
}

// cuMemUnmap takes whole mappings: one call per piece.
cu::CUresult UnmapPieces(const Driver* driver, cu::CUdeviceptr base, const uint64_t* sizes,
                         size_t count) {
  cu::CUresult first_error = cu::CUDA_SUCCESS;
  for (size_t i = 0; i < count; base += sizes[i], ++i) {
    const cu::CUresult r = driver->unmap(base, sizes[i]);
    if (first_error == cu::CUDA_SUCCESS) first_error = r;
  }
  return first_error;
}

// Maps memory of the GPUs `reply` names, piece by piece as `pieces` says,
// with the handles `obtain` makes once the context is set (each released
// here: the mapping holds the memory).
using Obtain =
    std::function<int(const Driver*, cu::CUdevice, std::vector<cu::CUmemGenericAllocationHandle>*)>;
int MapCuda(const ShareReply& reply, const Pieces& pieces, const Obtain& obtain,
            cudafs_mapping* out) {
  const Driver* driver = LoadDriver();
  if (driver == nullptr)
    return Fail(ENOSYS, "the file is in GPU memory and libcuda.so.1 is unusable");
  // The GPUs holding the pieces, by bus id: this process may number the
  // GPUs otherwise than the daemon.
  std::vector<cu::CUdevice> holders(reply.gpus);
  for (uint32_t g = 0; g < reply.gpus; ++g) {
    if (driver->device_by_bus_id(&holders[g], reply.pci_bus_id[g]) != cu::CUDA_SUCCESS) {
      return Fail(ENODEV, "the GPU holding the file (%s) is not visible to this process",
                  reply.pci_bus_id[g]);
    }
  }
  cu::CUcontext context = nullptr;
  if (cu::CUresult r = driver->get_current(&context); r != cu::CUDA_SUCCESS) {
    return CudaFail(r, "cuCtxGetCurrent");
  }
  // The GPUs that get access: each one holding a piece (the driver, and so
  // PyTorch, places the address on the first piece's GPU), which must
  // reach the others' pieces over their peer links (NVLink, PCIe); and the
  // caller's GPU, where it reaches them all.
  std::vector<cu::CUdevice> grantees;
  for (cu::CUdevice gpu : holders) {
    if (std::find(grantees.begin(), grantees.end(), gpu) == grantees.end()) {
      grantees.push_back(gpu);
    }
  }
  const auto reaches_all = [&](cu::CUdevice from) {
    for (cu::CUdevice to : grantees) {
      int reachable = from == to;
      if (!reachable && driver->can_access_peer(&reachable, from, to) != cu::CUDA_SUCCESS)
        return false;
      if (!reachable) return false;
    }
    return true;
  };
  for (cu::CUdevice gpu : grantees) {
    if (!reaches_all(gpu)) {
      return Fail(ENODEV, "the file lies on GPUs that cannot reach each other's memory");
    }
  }
  // Without a context on this thread: the primary context (what the CUDA
  // runtime, and so PyTorch, uses) of the first piece's GPU, current only
  // while we map. Left current, it would outlive its release at unmap (or
  // below, on failure) on the caller's thread, and the next map there would
  // take it for the caller's own context, which is gone.
  struct LeaveNoContext {
    const Driver* driver;
    bool set = false;
    ~LeaveNoContext() {
      if (set) driver->set_current(nullptr);
    }
  } leave_no_context{driver};
  const cu::CUdevice first = holders.at(pieces.gpus.front());
  if (context != nullptr) {
    cu::CUdevice caller;
    if (driver->context_device(&caller) == cu::CUDA_SUCCESS &&
        std::find(grantees.begin(), grantees.end(), caller) == grantees.end() &&
        reaches_all(caller)) {
      grantees.push_back(caller);
    }
  } else {
    if (cu::CUresult r = driver->retain(&context, first); r != cu::CUDA_SUCCESS) {
      return CudaFail(r, "cuDevicePrimaryCtxRetain");
    }
    out->retained_context = true;
    driver->set_current(context);
    leave_no_context.set = true;
  }
  const cu::CUdevice device = first;
  const uint64_t total = pieces.total;
  cu::CUdeviceptr base = 0;
  cu::CUresult result = driver->reserve(&base, total, 0, 0, 0);
  if (result != cu::CUDA_SUCCESS) {
    if (out->retained_context) driver->release(device);
    return CudaFail(result, "cuMemAddressReserve");
  }
  std::vector<cu::CUmemGenericAllocationHandle> handles;
  if (int r = obtain(driver, device, &handles); r != 0) {
    for (cu::CUmemGenericAllocationHandle handle : handles) driver->memory_release(handle);
    driver->address_free(base, total);
    if (out->retained_context) driver->release(device);
    return r;
  }
  uint64_t at = 0;
  size_t mapped_pieces = 0;
  for (size_t i = 0; i < handles.size() && result == cu::CUDA_SUCCESS; ++i) {
    result = driver->map(base + at, pieces.sizes[i], 0, handles[i], 0);
    if (result == cu::CUDA_SUCCESS) {
      at += pieces.sizes[i];
      ++mapped_pieces;
    }
  }
  for (cu::CUmemGenericAllocationHandle handle : handles) driver->memory_release(handle);
  if (result == cu::CUDA_SUCCESS) {
    std::vector<cu::CUmemAccessDesc> access;
    for (cu::CUdevice gpu : grantees) {
      access.push_back(
          {{cu::CU_MEM_LOCATION_TYPE_DEVICE, gpu}, cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE});
    }
    result = driver->set_access(base, total, access.data(), access.size());
  }
  if (result != cu::CUDA_SUCCESS) {
    UnmapPieces(driver, base, pieces.sizes.data(), mapped_pieces);
    driver->address_free(base, total);
    if (out->retained_context) driver->release(device);
    return CudaFail(result, "mapping the file's memory");
  }
  out->memory = CUDAFS_MEMORY_CUDA;
  // Where the driver says the address lives (so where PyTorch puts a
  // tensor of it); also the GPU whose primary context may be retained.
  out->device = device;
  out->address = base;
  out->mapped = total;
  out->piece_sizes = pieces.sizes;
  return 0;
}

// A shared mapping: the daemon's pieces, imported.
int MapCudaShared(const ShareReply& reply, const Pieces& pieces, cudafs_mapping* out) {
  const Obtain import = [&](const Driver* driver, cu::CUdevice,
                            std::vector<cu::CUmemGenericAllocationHandle>* handles) {
    for (int fd : pieces.fds) {
      cu::CUmemGenericAllocationHandle handle;
      if (cu::CUresult r =
              driver->import(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                             cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
          r != cu::CUDA_SUCCESS) {
        return CudaFail(r, "importing the file's memory");
      }
      handles->push_back(handle);
    }
    return 0;
  };
  return MapCuda(reply, pieces, import, out);
}

// A private copy: allocations of this process's, one per piece on the GPU
// the daemon names, handed to the daemon to fill.
int CopyCuda(int connection, const ShareReply& reply, const Pieces& plan, cudafs_mapping* out) {
  ShareReply filled;
  const Obtain create = [&](const Driver* driver, cu::CUdevice,
                            std::vector<cu::CUmemGenericAllocationHandle>* handles) {
    std::vector<int> memory;
    int result = 0;
    for (size_t i = 0; i < plan.sizes.size() && result == 0; ++i) {
      cu::CUdevice gpu;
      cu::CUmemAllocationProp prop = {};
      prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.requestedHandleTypes = cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      size_t granule = 0;
      cu::CUmemGenericAllocationHandle handle;
      int fd = -1;
      if (driver->device_by_bus_id(&gpu, reply.pci_bus_id[plan.gpus[i]]) != cu::CUDA_SUCCESS) {
        result = Fail(ENODEV, "the GPU holding the file (%s) is not visible to this process",
                      reply.pci_bus_id[plan.gpus[i]]);
      } else if (prop.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, gpu};
                 driver->granularity(&granule, &prop, cu::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
                     cu::CUDA_SUCCESS ||
                 granule == 0 || plan.sizes[i] % granule != 0) {
        result = Fail(EIO, "the cudafs daemon asked for memory that is not whole granules");
      } else if (cu::CUresult r = driver->create(&handle, plan.sizes[i], &prop, 0);
                 r != cu::CUDA_SUCCESS) {
        result = CudaFail(r, "cuMemCreate");
      } else if (handles->push_back(handle);
                 (r = driver->export_handle(&fd, handle,
                                            cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) !=
                 cu::CUDA_SUCCESS) {
        result = CudaFail(r, "cuMemExportToShareableHandle");
      } else {
        memory.push_back(fd);
      }
    }
    if (result == 0) result = BoundReplies(connection, ReplyBoundSeconds(plan.total));
    if (result == 0) result = Ask(connection, cudafs::kShareFill, 0, plan.total, memory, &filled);
    for (int fd : memory) close(fd);
    return result;
  };
  if (int r = MapCuda(reply, plan, create, out); r != 0) return r;
  out->size = filled.size;
  return 0;
}

}  // namespace

extern "C" {

int cudafs_map_fd(int fd, int flags, cudafs_mapping** mapping) {
  if (mapping == nullptr) return Fail(EINVAL, "no place for the mapping");
  *mapping = nullptr;
  if (flags & ~CUDAFS_MAP_WRITABLE) return Fail(EINVAL, "unknown flags 0x%x", flags);
  const bool writable = flags & CUDAFS_MAP_WRITABLE;
  int connection = -1;
  ShareReply reply;
  Pieces pieces;
  int result = Begin(fd, cudafs::kShareMap, writable ? uint32_t{cudafs::kShareWritable} : 0u,
                     &connection, &reply);
  if (connection < 0) return result;
  const bool copy = result == 0 && (reply.flags & cudafs::kReplyProvideMemory);
  if (result == 0) {
    result = ReceivePieces(connection, reply, copy, &pieces);
    if (result == 0 && pieces.sizes.empty()) {
      result = Fail(EIO, "the cudafs daemon sent no memory");
    }
  }
  auto* out = new cudafs_mapping;
  if (result == 0) {
    out->size = reply.size;
    if (reply.kind == cudafs::kShareHost) {
      result = copy ? CopyHost(connection, pieces, out) : MapHost(pieces, out);
    } else if (reply.kind == cudafs::kShareCuda) {
      result = copy ? CopyCuda(connection, reply, pieces, out) : MapCudaShared(reply, pieces, out);
    } else {
      result = Fail(EIO, "the cudafs daemon sent memory of an unknown kind");
    }
  }
  for (int piece : pieces.fds) close(piece);
  // The daemon lets go of its handles once ours are made.
  if (result == 0 && !copy) SendImported(connection);
  close(connection);
  if (result == 0 && writable) {
    out->file = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (out->file < 0) result = Fail(errno, "dup of the file: %s", std::strerror(errno));
  }
  if (result != 0) {
    cudafs_unmap(out);
    return result;
  }
  *mapping = out;
  return 0;
}

int cudafs_map(const char* path, int flags, cudafs_mapping** mapping) {
  const int fd = open(path, ((flags & CUDAFS_MAP_WRITABLE) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return Fail(errno, "%s: %s", path, std::strerror(errno));
  const int result = cudafs_map_fd(fd, flags, mapping);
  close(fd);
  return result;
}

int cudafs_sync(cudafs_mapping* mapping) {
  if (mapping == nullptr || mapping->file < 0) {
    return Fail(EINVAL, "only a writable mapping has writes to sync");
  }
  // Writes through read(2)'s side first: the kernel's dirty pages reach
  // the file's memory, where the mapping sees them.
  if (fsync(mapping->file) != 0) return Fail(errno, "fsync: %s", std::strerror(errno));
  int connection = -1;
  ShareReply reply;
  const int result = Begin(mapping->file, cudafs::kShareSync, 0, &connection, &reply);
  if (connection >= 0) close(connection);
  return result;
}

int cudafs_unmap(cudafs_mapping* mapping) {
  if (mapping == nullptr) return 0;
  int result = 0;
  if (mapping->memory == CUDAFS_MEMORY_HOST && !mapping->callers_range) {
    munmap(reinterpret_cast<void*>(mapping->address), mapping->mapped);
  }
  if (mapping->memory == CUDAFS_MEMORY_CUDA) {
    const Driver* driver = LoadDriver();
    if (cu::CUresult r = UnmapPieces(driver, mapping->address, mapping->piece_sizes.data(),
                                     mapping->piece_sizes.size());
        r != cu::CUDA_SUCCESS) {
      result = CudaFail(r, "cuMemUnmap");
    }
    driver->address_free(mapping->address, mapping->mapped);
    cu::CUdevice device;
    if (mapping->retained_context &&
        driver->device_get(&device, mapping->device) == cu::CUDA_SUCCESS) {
      driver->release(device);
    }
  }
  if (mapping->file >= 0) close(mapping->file);
  delete mapping;
  return result;
}

int cudafs_mapping_move(cudafs_mapping* mapping, void* address) {
  if (mapping == nullptr || mapping->memory != CUDAFS_MEMORY_HOST || mapping->callers_range) {
    return Fail(EINVAL, "only a host mapping not moved before can move");
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (reinterpret_cast<uintptr_t>(address) % page != 0) {
    return Fail(EINVAL, "the range to move into does not start at a page");
  }
  const uint64_t wanted = (mapping->size + page - 1) / page * page;
  char* const from = reinterpret_cast<char*>(mapping->address);
  char* const to = static_cast<char*>(address);
  uint64_t at = 0;
  // A piece is a mapping of its own, which mremap moves whole or in part.
  for (size_t i = 0; i < mapping->piece_sizes.size() && at < wanted; ++i) {
    const uint64_t length = std::min(mapping->piece_sizes[i], wanted - at);
    if (mremap(from + at, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, to + at) == MAP_FAILED) {
      return Fail(errno, "mremap of a piece: %s", std::strerror(errno));
    }
    at += mapping->piece_sizes[i];
  }
  // What lies past the file's last page stays behind: unmapped.
  munmap(from, mapping->mapped);
  mapping->address = reinterpret_cast<uintptr_t>(address);
  mapping->mapped = wanted;
  mapping->callers_range = true;
  return 0;
}

uint64_t cudafs_mapping_address(const cudafs_mapping* mapping) { return mapping->address; }

void* cudafs_mapping_pointer(const cudafs_mapping* mapping) {
  return mapping->memory == CUDAFS_MEMORY_HOST ? reinterpret_cast<void*>(mapping->address)
                                               : nullptr;
}

uint64_t cudafs_mapping_size(const cudafs_mapping* mapping) { return mapping->size; }

int cudafs_mapping_memory(const cudafs_mapping* mapping) { return mapping->memory; }

int cudafs_mapping_device(const cudafs_mapping* mapping) { return mapping->device; }

int cudafs_make_room(const char* mount, const char* gpu, uint64_t bytes, int flags) {
  if (mount == nullptr) return Fail(EINVAL, "no mount named");
  if (flags & ~(CUDAFS_ROOM_ALL | CUDAFS_ROOM_HOLD)) {
    return Fail(EINVAL, "unknown flags 0x%x", static_cast<unsigned>(flags));
  }
  cudafs::client::RoomRequest request;
  if (!(flags & CUDAFS_ROOM_ALL)) request.bytes = bytes;
  request.gpu = gpu;
  request.hold = flags & CUDAFS_ROOM_HOLD;
  return cudafs::client::MakeRoomAt(mount, request);
}

const char* cudafs_last_error(void) { return cudafs::client::LastError(); }

}  // extern "C"
