#include "fs/fuse/negotiation.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "alloc/base/sizes.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {

void PrintTo(const Negotiated& negotiated, std::ostream* os) {
  *os << "{direct_io_min " << negotiated.direct_io_min << ", zero_message_open "
      << negotiated.zero_message_open << ", kernel_kills_set_id " << negotiated.kernel_kills_set_id
      << "}";
}

namespace {

// The capabilities the rows name exist from libfuse 3.18 on, the version
// ./build.sh builds and the package carries; the fallback build against an
// older one has a test of its own, below.
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)

// The flags, by name, so that a failure says which differ.
std::string Names(uint64_t flags) {
  static const std::vector<std::pair<uint64_t, const char*>> kNames = {
      {FUSE_CAP_ASYNC_READ, "ASYNC_READ"},
      {FUSE_CAP_ATOMIC_O_TRUNC, "ATOMIC_O_TRUNC"},
      {FUSE_CAP_EXPORT_SUPPORT, "EXPORT_SUPPORT"},
      {FUSE_CAP_AUTO_INVAL_DATA, "AUTO_INVAL_DATA"},
      {FUSE_CAP_READDIRPLUS, "READDIRPLUS"},
      {FUSE_CAP_READDIRPLUS_AUTO, "READDIRPLUS_AUTO"},
      {FUSE_CAP_ASYNC_DIO, "ASYNC_DIO"},
      {FUSE_CAP_WRITEBACK_CACHE, "WRITEBACK_CACHE"},
      {FUSE_CAP_NO_OPEN_SUPPORT, "NO_OPEN_SUPPORT"},
      {FUSE_CAP_PARALLEL_DIROPS, "PARALLEL_DIROPS"},
      {FUSE_CAP_HANDLE_KILLPRIV, "HANDLE_KILLPRIV"},
      {FUSE_CAP_HANDLE_KILLPRIV_V2, "HANDLE_KILLPRIV_V2"},
      {FUSE_CAP_IOCTL_DIR, "IOCTL_DIR"},
      {FUSE_CAP_DIRECT_IO_ALLOW_MMAP, "DIRECT_IO_ALLOW_MMAP"},
      {FUSE_CAP_OVER_IO_URING, "OVER_IO_URING"},
  };
  std::string names;
  for (const auto& [flag, name] : kNames) {
    if (!(flags & flag)) continue;
    if (!names.empty()) names += "|";
    names += name;
    flags &= ~flag;
  }
  if (flags != 0) names += "|other " + std::to_string(flags);
  return names;
}

// What libfuse 3.18 asks for by default with the glue's operations (where
// the kernel offers it).
constexpr uint64_t kLibfuseDefaults = FUSE_CAP_ASYNC_READ | FUSE_CAP_AUTO_INVAL_DATA |
                                      FUSE_CAP_ASYNC_DIO | FUSE_CAP_IOCTL_DIR |
                                      FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_READDIRPLUS |
                                      FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_OVER_IO_URING;
// A kernel that offers everything Negotiate looks at, and a capability it
// never asks for (the write-back cache).
constexpr uint64_t kEverything = kLibfuseDefaults | FUSE_CAP_DIRECT_IO_ALLOW_MMAP |
                                 FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_HANDLE_KILLPRIV_V2 |
                                 FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_EXPORT_SUPPORT |
                                 FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_WRITEBACK_CACHE;
// What INIT asks of that kernel under the default settings.
constexpr uint64_t kUsualWant = (kLibfuseDefaults & ~FUSE_CAP_OVER_IO_URING) |
                                FUSE_CAP_DIRECT_IO_ALLOW_MMAP | FUSE_CAP_HANDLE_KILLPRIV_V2 |
                                FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_PARALLEL_DIROPS;

// 16 workers of 4 MiB requests: 16 × (2 × 4 MiB + 8 KiB), 129 MiB rounded up.
FuseSettings Usual() {
  FuseSettings settings;
  settings.max_request = 4 * kMiB;
  settings.workers = 16;
  settings.uring_depth = 2;
  return settings;
}
constexpr char kDevFuse[] = "requests over /dev/fuse";
constexpr char kUsualSizes[] =
    "asked for requests of up to 4096 KiB, readahead 4096 KiB; request buffers take up to 129 "
    "MiB of host memory";

// A kernel offering `capable`, with libfuse's defaults among them asked for.
KernelOffer Offering(uint64_t capable, uint64_t also_wanted = 0) {
  return KernelOffer{
      .capable = capable, .wanted = (kLibfuseDefaults | also_wanted) & capable, .cpus = 8};
}

struct Row {
  const char* name;
  FuseSettings settings;
  KernelOffer offer;
  uint64_t want;
  Negotiated negotiated;
  bool uring;
  std::vector<std::string> log;
};

FuseSettings With(void (*change)(FuseSettings&)) {
  FuseSettings settings = Usual();
  change(settings);
  return settings;
}

const Negotiated kUsualNegotiated{
    .direct_io_min = kDefaultDirectIoMin, .zero_message_open = false, .kernel_kills_set_id = true};

std::vector<Row> Rows() {
  return {
      {"a kernel offering everything",
       Usual(),
       Offering(kEverything),
       kUsualWant,
       kUsualNegotiated,
       false,
       {kDevFuse, kUsualSizes}},
      {"io_uring asked for and offered",
       With([](FuseSettings& s) { s.uring = true; }),
       Offering(kEverything),
       kUsualWant | FUSE_CAP_OVER_IO_URING,
       kUsualNegotiated,
       true,
       // 8 queues × depth 2 × 4 MiB more: 192.1 MiB.
       {"requests over io_uring, 8 queues of depth 2",
        "asked for requests of up to 4096 KiB, readahead 4096 KiB; request buffers take up to "
        "193 MiB of host memory"}},
      {"io_uring asked for, not offered",
       With([](FuseSettings& s) { s.uring = true; }),
       Offering(kEverything & ~FUSE_CAP_OVER_IO_URING),
       kUsualWant,
       kUsualNegotiated,
       false,
       {"the kernel did not offer io_uring: requests over /dev/fuse", kUsualSizes}},
      {"no direct-I/O mmap: no direct I/O by default",
       Usual(),
       Offering(kEverything & ~FUSE_CAP_DIRECT_IO_ALLOW_MMAP),
       kUsualWant & ~FUSE_CAP_DIRECT_IO_ALLOW_MMAP,
       {.direct_io_min = kNeverDirectIo, .kernel_kills_set_id = true},
       false,
       {kDevFuse, kUsualSizes}},
      {"direct_io_min= given, no direct-I/O mmap",
       With([](FuseSettings& s) { s.requested_direct_io_min = 64 * kKiB; }),
       Offering(kEverything & ~FUSE_CAP_DIRECT_IO_ALLOW_MMAP),
       kUsualWant & ~FUSE_CAP_DIRECT_IO_ALLOW_MMAP,
       {.direct_io_min = 64 * kKiB, .kernel_kills_set_id = true},
       false,
       {kDevFuse, kUsualSizes}},
      {"nodirect_io",
       With([](FuseSettings& s) { s.requested_direct_io_min = kNeverDirectIo; }),
       Offering(kEverything),
       kUsualWant,
       {.direct_io_min = kNeverDirectIo, .kernel_kills_set_id = true},
       false,
       {kDevFuse, kUsualSizes}},
      {"zero_message_open offered: O_TRUNC as a setattr",
       With([](FuseSettings& s) { s.zero_message_open = true; }),
       Offering(kEverything),
       (kUsualWant | FUSE_CAP_NO_OPEN_SUPPORT) & ~FUSE_CAP_ATOMIC_O_TRUNC,
       {.direct_io_min = kDefaultDirectIoMin,
        .zero_message_open = true,
        .kernel_kills_set_id = true},
       false,
       {kDevFuse, kUsualSizes}},
      {"zero_message_open not offered",
       With([](FuseSettings& s) { s.zero_message_open = true; }),
       Offering(kEverything & ~FUSE_CAP_NO_OPEN_SUPPORT),
       kUsualWant,
       kUsualNegotiated,
       false,
       {kDevFuse, kUsualSizes,
        "the kernel cannot open files without a request: zero_message_open is off"}},
      {"no KILLPRIV_V2: KILLPRIV and O_TRUNC with open declined",
       Usual(),
       Offering(kEverything & ~FUSE_CAP_HANDLE_KILLPRIV_V2, FUSE_CAP_HANDLE_KILLPRIV),
       kUsualWant & ~(FUSE_CAP_HANDLE_KILLPRIV_V2 | FUSE_CAP_ATOMIC_O_TRUNC),
       {.direct_io_min = kDefaultDirectIoMin, .kernel_kills_set_id = false},
       false,
       {kDevFuse, kUsualSizes}},
      {"no atomic O_TRUNC",
       Usual(),
       Offering(kEverything & ~FUSE_CAP_ATOMIC_O_TRUNC),
       kUsualWant & ~FUSE_CAP_ATOMIC_O_TRUNC,
       kUsualNegotiated,
       false,
       {kDevFuse, kUsualSizes}},
      {"no export support nor parallel directory operations",
       Usual(),
       Offering(kEverything & ~(FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_PARALLEL_DIROPS)),
       kUsualWant & ~(FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_PARALLEL_DIROPS),
       kUsualNegotiated,
       false,
       {kDevFuse, kUsualSizes}},
      {"a kernel offering only libfuse's defaults, everything asked for",
       With([](FuseSettings& s) {
         s.uring = true;
         s.zero_message_open = true;
       }),
       Offering(kLibfuseDefaults & ~FUSE_CAP_OVER_IO_URING),
       kLibfuseDefaults & ~(FUSE_CAP_OVER_IO_URING | FUSE_CAP_ATOMIC_O_TRUNC),
       {.direct_io_min = kNeverDirectIo},
       false,
       {"the kernel did not offer io_uring: requests over /dev/fuse", kUsualSizes,
        "the kernel cannot open files without a request: zero_message_open is off"}},
      {"max_request fitted to the kernel: its note logged",
       With([](FuseSettings& s) {
         s.max_request = kMiB;
         s.request_limit_note = "max_request fitted";
       }),
       Offering(kEverything),
       kUsualWant,
       kUsualNegotiated,
       false,
       // 16 × (2 MiB + 8 KiB): 32.1 MiB.
       {kDevFuse, "max_request fitted",
        "asked for requests of up to 1024 KiB, readahead 1024 KiB; request buffers take up to 33 "
        "MiB of host memory"}},
  };
}

TEST(NegotiationTest, EachRow) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    const Negotiation got = Negotiate(row.settings, row.offer);
    EXPECT_EQ(Names(got.want), Names(row.want));
    EXPECT_EQ(got.negotiated, row.negotiated);
    EXPECT_EQ(got.uring, row.uring);
    EXPECT_EQ(got.log, row.log);
    // Nothing the kernel does not offer.
    EXPECT_EQ(got.want & ~row.offer.capable, 0u) << Names(got.want & ~row.offer.capable);
  }
}

TEST(NegotiationTest, RequestSizesAndNanosecondTimes) {
  FuseSettings settings = Usual();
  settings.max_request = 2 * kMiB;
  const Negotiation got = Negotiate(settings, Offering(kEverything));
  EXPECT_EQ(got.max_write, 2 * kMiB);
  EXPECT_EQ(got.max_readahead, 2 * kMiB);
  EXPECT_EQ(got.time_gran, 1u);
}

TEST(NegotiationTest, BufferBytes) {
  FuseSettings settings = Usual();
  EXPECT_EQ(Negotiate(settings, Offering(kEverything)).uring_buffer_bytes, 0u);
  EXPECT_EQ(Negotiate(settings, Offering(kEverything)).request_buffer_bytes,
            16 * (8 * kMiB + 8 * kKiB));
  settings.uring = true;
  const Negotiation uring = Negotiate(settings, Offering(kEverything));
  EXPECT_EQ(uring.uring_buffer_bytes, 8 * 2 * 4 * kMiB);
  EXPECT_EQ(uring.request_buffer_bytes, 16 * (8 * kMiB + 8 * kKiB) + 8 * 2 * 4 * kMiB);
  // Not offered: no ring, no ring buffers.
  EXPECT_EQ(Negotiate(settings, Offering(kEverything & ~FUSE_CAP_OVER_IO_URING)).uring_buffer_bytes,
            0u);
}

#else  // libfuse before 3.18 (Debian 12's 3.14): the fallback build

// It knows neither io_uring, direct-I/O mmap nor KILLPRIV_V2: the kernel
// clears set-id bits itself, so KILLPRIV and O_TRUNC with open are declined,
// and no file gets direct I/O by default.
TEST(NegotiationTest, OlderLibfuseAsksForNoneOfTheNewerCapabilities) {
  constexpr uint64_t kDefaults = FUSE_CAP_ASYNC_READ | FUSE_CAP_AUTO_INVAL_DATA |
                                 FUSE_CAP_ASYNC_DIO | FUSE_CAP_ATOMIC_O_TRUNC |
                                 FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
  FuseSettings settings;
  settings.uring = true;
  settings.zero_message_open = true;
  const KernelOffer offer{.capable = kDefaults | FUSE_CAP_HANDLE_KILLPRIV |
                                     FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_EXPORT_SUPPORT |
                                     FUSE_CAP_PARALLEL_DIROPS,
                          .wanted = kDefaults | FUSE_CAP_HANDLE_KILLPRIV,
                          .cpus = 8};
  const Negotiation got = Negotiate(settings, offer);
  EXPECT_EQ(got.want, (kDefaults & ~FUSE_CAP_ATOMIC_O_TRUNC) | FUSE_CAP_NO_OPEN_SUPPORT |
                          FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_PARALLEL_DIROPS);
  const Negotiated expected{
      .direct_io_min = kNeverDirectIo, .zero_message_open = true, .kernel_kills_set_id = false};
  EXPECT_EQ(got.negotiated, expected);
  EXPECT_FALSE(got.uring);
  ASSERT_FALSE(got.log.empty());
  EXPECT_EQ(got.log[0], "the kernel did not offer io_uring: requests over /dev/fuse");
}

#endif  // FUSE_VERSION >= 3.18

}  // namespace
}  // namespace cudafs
