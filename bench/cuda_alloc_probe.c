/* cuda_alloc_probe: a plain C program that takes GPU memory the way the
 * simplest CUDA programs do, for bench/interposer_pressure.py and
 * bench/interposer_overhead.py (issue 43). It loads the NVIDIA driver
 * with dlopen("libcuda.so.1") and finds its entry points with dlsym (or,
 * with "proc", through cuGetProcAddress_v2 as the CUDA runtime does), so
 * that it builds without the CUDA toolkit and a preloaded
 * libcudafs_preload.so can stand in for them; it prints one JSON line.
 *
 *   cuda_alloc_probe info
 *       the card: {"name", "total", "free"}
 *   cuda_alloc_probe take BYTES STEP PATIENCE
 *       cuMemAlloc_v2 in STEP pieces (0: one allocation) until BYTES, an
 *       out-of-memory retried every 50 ms for PATIENCE seconds (0: the
 *       first one ends it); prints what it got, as bench/gpu_pressure.py's
 *       PyTorch program does, then holds it until a line on stdin.
 *   cuda_alloc_probe micro BYTES COUNT ROUNDS dlsym|proc
 *       COUNT cuMemAlloc_v2+cuMemFree_v2 pairs of BYTES, in ROUNDS rounds
 *       timed apart; then COUNT/10 allocations in batches of 1000, each
 *       batch then freed, allocations and frees timed apart. Nanoseconds
 *       per call, after 1000 pairs of warm-up.
 *
 * Times start once the context is current, as the PyTorch program's do
 * after its first mem_get_info. "entry_from" names the library the
 * cuMemAlloc_v2 pointer lives in (dladdr): libcudafs_preload.so when the
 * interposer stands in. Exit status 0 when it printed its line, 1 when the
 * driver failed before, 2 on a usage error. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

enum { CUDA_SUCCESS = 0, CUDA_ERROR_OUT_OF_MEMORY = 2 };

typedef CUresult (*cuInit_t)(unsigned int flags);
typedef CUresult (*cuDeviceGet_t)(CUdevice *device, int ordinal);
typedef CUresult (*cuDeviceGetName_t)(char *name, int length, CUdevice device);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *context, CUdevice device);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext context);
typedef CUresult (*cuMemGetInfo_t)(size_t *free_bytes, size_t *total_bytes);
typedef CUresult (*cuMemAlloc_t)(CUdeviceptr *pointer, size_t bytes);
typedef CUresult (*cuMemFree_t)(CUdeviceptr pointer);
typedef CUresult (*cuGetErrorName_t)(CUresult error, const char **name);
typedef CUresult (*cuGetProcAddress_t)(const char *symbol, void **function, int cuda_version,
                                       unsigned long long flags, int *symbol_status);

static struct {
  cuInit_t init;
  cuDeviceGet_t device_get;
  cuDeviceGetName_t device_name;
  cuDevicePrimaryCtxRetain_t retain;
  cuCtxSetCurrent_t set_current;
  cuMemGetInfo_t mem_info;
  cuMemAlloc_t alloc;
  cuMemFree_t free;
  cuGetErrorName_t error_name;
  cuGetProcAddress_t proc;
} cu;

static void *library;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *error_text(CUresult result) {
  const char *name = NULL;
  if (cu.error_name == NULL || cu.error_name(result, &name) != CUDA_SUCCESS || name == NULL) {
    return "CUDA error";
  }
  return name;
}

static void *symbol(const char *name) {
  void *found = dlsym(library, name);
  if (found == NULL) fprintf(stderr, "cuda_alloc_probe: %s not in libcuda.so.1\n", name);
  return found;
}

/* The library a function pointer lives in ("?" when dladdr cannot say). */
static const char *library_of(void *function) {
  Dl_info info;
  if (function == NULL || dladdr(function, &info) == 0 || info.dli_fname == NULL) return "?";
  const char *slash = strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

/* Loads the driver and makes device 0's primary context current. */
static int start(CUdevice *device) {
  library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (library == NULL) {
    fprintf(stderr, "cuda_alloc_probe: %s\n", dlerror());
    return 0;
  }
  cu.init = (cuInit_t)symbol("cuInit");
  cu.device_get = (cuDeviceGet_t)symbol("cuDeviceGet");
  cu.device_name = (cuDeviceGetName_t)symbol("cuDeviceGetName");
  cu.retain = (cuDevicePrimaryCtxRetain_t)symbol("cuDevicePrimaryCtxRetain");
  cu.set_current = (cuCtxSetCurrent_t)symbol("cuCtxSetCurrent");
  cu.mem_info = (cuMemGetInfo_t)symbol("cuMemGetInfo_v2");
  cu.alloc = (cuMemAlloc_t)symbol("cuMemAlloc_v2");
  cu.free = (cuMemFree_t)symbol("cuMemFree_v2");
  cu.error_name = (cuGetErrorName_t)symbol("cuGetErrorName");
  cu.proc = (cuGetProcAddress_t)symbol("cuGetProcAddress_v2");
  if (!cu.init || !cu.device_get || !cu.device_name || !cu.retain || !cu.set_current ||
      !cu.mem_info || !cu.alloc || !cu.free || !cu.error_name) {
    return 0;
  }
  CUcontext context = NULL;
  CUresult result = cu.init(0);
  if (result == CUDA_SUCCESS) result = cu.device_get(device, 0);
  if (result == CUDA_SUCCESS) result = cu.retain(&context, *device);
  if (result == CUDA_SUCCESS) result = cu.set_current(context);
  if (result != CUDA_SUCCESS) {
    fprintf(stderr, "cuda_alloc_probe: starting the driver: %s\n", error_text(result));
    return 0;
  }
  return 1;
}

static int info(void) {
  CUdevice device;
  if (!start(&device)) return 1;
  char name[256] = "";
  size_t free_bytes = 0, total = 0;
  cu.device_name(name, (int)sizeof name, device);
  CUresult result = cu.mem_info(&free_bytes, &total);
  if (result != CUDA_SUCCESS) {
    fprintf(stderr, "cuda_alloc_probe: cuMemGetInfo_v2: %s\n", error_text(result));
    return 1;
  }
  for (char *c = name; *c; ++c) {
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = ' ';
  }
  printf("{\"name\": \"%s\", \"total\": %zu, \"free\": %zu}\n", name, total, free_bytes);
  return 0;
}

static int take(size_t want, size_t step, double patience) {
  CUdevice device;
  if (!start(&device)) return 1;
  size_t free_at_start = 0, total = 0, free_after = 0;
  cu.mem_info(&free_at_start, &total);
  size_t capacity = step ? want / step + 2 : 2, held = 0, got = 0;
  CUdeviceptr *pointers = calloc(capacity, sizeof *pointers);
  if (pointers == NULL) return 1;
  int failures = 0, oomed = 0;
  size_t oom_at = 0;
  double oom_seconds = 0;
  const char *oom_error = "";
  const double began = now();
  while (got < want && held < capacity) {
    const size_t size = step && want - got > step ? step : want - got;
    const CUresult result = cu.alloc(&pointers[held], size);
    if (result == CUDA_SUCCESS) {
      ++held;
      got += size;
      continue;
    }
    ++failures;
    if (!oomed) {
      oomed = 1;
      oom_at = got;
      oom_seconds = now() - began;
      oom_error = error_text(result);
    }
    if (result != CUDA_ERROR_OUT_OF_MEMORY || now() - began > patience) break;
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
  }
  const double seconds = now() - began;
  cu.mem_info(&free_after, &total);
  printf("{\"mode\": \"%s\", \"want\": %zu, \"free_at_start\": %zu, \"total\": %zu, "
         "\"got\": %zu, \"seconds\": %.6f, \"had_all\": %s, \"failures\": %d, "
         "\"free_after\": %zu, \"entry_from\": \"%s\", \"first_oom\": ",
         step ? "chunks" : "one", want, free_at_start, total, got, seconds,
         got >= want ? "true" : "false", failures, free_after, library_of((void *)cu.alloc));
  if (oomed) {
    printf("{\"at_bytes\": %zu, \"seconds\": %.6f, \"error\": \"%s\"}}\n", oom_at, oom_seconds,
           oom_error);
  } else {
    printf("null}\n");
  }
  fflush(stdout);
  char line[64];
  if (fgets(line, sizeof line, stdin) == NULL) { /* EOF: the harness is gone; let go */
  }
  for (size_t i = 0; i < held; ++i) cu.free(pointers[i]);
  free(pointers);
  return 0;
}

static int micro(size_t bytes, long count, int rounds, const char *path) {
  CUdevice device;
  if (!start(&device)) return 1;
  cuMemAlloc_t alloc = cu.alloc;
  cuMemFree_t release = cu.free;
  if (strcmp(path, "proc") == 0) {
    /* What the CUDA runtime does: the entry points by their base names at
     * the runtime's version. */
    void *found = NULL;
    int status = 0;
    if (cu.proc == NULL || cu.proc("cuMemAlloc", &found, 12000, 0, &status) != CUDA_SUCCESS ||
        found == NULL) {
      fprintf(stderr, "cuda_alloc_probe: cuGetProcAddress_v2(cuMemAlloc) failed\n");
      return 1;
    }
    alloc = (cuMemAlloc_t)found;
    found = NULL;
    if (cu.proc("cuMemFree", &found, 12000, 0, &status) != CUDA_SUCCESS || found == NULL) {
      fprintf(stderr, "cuda_alloc_probe: cuGetProcAddress_v2(cuMemFree) failed\n");
      return 1;
    }
    release = (cuMemFree_t)found;
  } else if (strcmp(path, "dlsym") != 0) {
    fprintf(stderr, "cuda_alloc_probe: path is dlsym or proc, not %s\n", path);
    return 2;
  }
  enum { kBatch = 1000 };
  CUdeviceptr *batch = calloc(kBatch, sizeof *batch);
  double *pair_ns = calloc((size_t)rounds, sizeof *pair_ns);
  if (!batch || !pair_ns) return 1;
  CUdeviceptr pointer;
  for (int i = 0; i < 1000; ++i) { /* warm-up: the driver's first allocations cost more */
    CUresult result = alloc(&pointer, bytes);
    if (result != CUDA_SUCCESS) {
      fprintf(stderr, "cuda_alloc_probe: cuMemAlloc_v2: %s\n", error_text(result));
      return 1;
    }
    release(pointer);
  }
  const double began_all = now();
  for (int round = 0; round < rounds; ++round) {
    const long n = count / rounds + (round < count % rounds);
    const double began = now();
    for (long i = 0; i < n; ++i) {
      if (alloc(&pointer, bytes) != CUDA_SUCCESS) {
        fprintf(stderr, "cuda_alloc_probe: cuMemAlloc_v2 failed in round %d\n", round);
        return 1;
      }
      release(pointer);
    }
    pair_ns[round] = (now() - began) * 1e9 / (double)(n ? n : 1);
  }
  const double pairs_seconds = now() - began_all;
  double in_alloc = 0, in_free = 0;
  const long batched = count / 10 > 0 ? count / 10 : 1;
  for (long done = 0; done < batched;) {
    const long n = batched - done < kBatch ? batched - done : kBatch;
    const double began = now();
    for (long i = 0; i < n; ++i) {
      if (alloc(&batch[i], bytes) != CUDA_SUCCESS) {
        fprintf(stderr, "cuda_alloc_probe: cuMemAlloc_v2 failed in a batch\n");
        return 1;
      }
    }
    const double allocated = now();
    for (long i = 0; i < n; ++i) release(batch[i]);
    in_free += now() - allocated;
    in_alloc += allocated - began;
    done += n;
  }
  printf("{\"path\": \"%s\", \"bytes\": %zu, \"count\": %ld, \"rounds\": %d, "
         "\"entry_from\": \"%s\", \"free_entry_from\": \"%s\", \"pair_ns\": %.2f, "
         "\"pairs_seconds\": %.3f, \"batched\": %ld, \"alloc_ns\": %.2f, \"free_ns\": %.2f, "
         "\"round_pair_ns\": [",
         path, bytes, count, rounds, library_of((void *)alloc), library_of((void *)release),
         pairs_seconds * 1e9 / (double)count, pairs_seconds, batched,
         in_alloc * 1e9 / (double)batched, in_free * 1e9 / (double)batched);
  for (int round = 0; round < rounds; ++round) printf("%s%.2f", round ? ", " : "", pair_ns[round]);
  printf("]}\n");
  free(batch);
  free(pair_ns);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "info") == 0) return info();
  if (argc == 5 && strcmp(argv[1], "take") == 0) {
    return take(strtoull(argv[2], NULL, 0), strtoull(argv[3], NULL, 0), strtod(argv[4], NULL));
  }
  if (argc == 6 && strcmp(argv[1], "micro") == 0 && atoi(argv[4]) > 0 && atol(argv[3]) > 0) {
    return micro(strtoull(argv[2], NULL, 0), atol(argv[3]), atoi(argv[4]), argv[5]);
  }
  fprintf(stderr,
          "usage: cuda_alloc_probe info\n"
          "       cuda_alloc_probe take BYTES STEP PATIENCE\n"
          "       cuda_alloc_probe micro BYTES COUNT ROUNDS dlsym|proc\n");
  return 2;
}
