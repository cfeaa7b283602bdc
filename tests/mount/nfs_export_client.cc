// nfs_export_client: the NFS side of tests/mount/nfs_export_test.sh. Given
// an NFSv4 server that exports a cudafs mount, and that mount's path, it
// writes and reads files through NFS (libnfs, a userspace client: the
// machines have no kernel NFS client), checks each against the mount and
// the other way round, drops the kernel's caches so that the server must
// reopen files by handle, and checks that a handle of a removed file gives
// NFS4ERR_STALE (or ENOENT), never another file's bytes. With UID and GID
// it speaks as that user (AUTH_SYS), as a non-root client of the export
// does, and checks that the files it creates are that user's on the mount.
// --files-only writes files of up to 64 KiB and stops after the first
// comparison: the large files' and the handles' checks depend on cudafs
// alone, not on how the server maps users.
//   nfs_export_client SERVER PORT EXPORT MOUNTPOINT [UID GID [--files-only]]
// Prints each check; exit status 0 when all hold, 1 otherwise.

// libnfs.h first: the raw headers use what it defines.
// clang-format off
extern "C" {
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>
}
// clang-format on

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/random_pattern.h"

namespace {

using cudafs::Pattern;
using Bytes = std::vector<char>;

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

// The exit status, with the count of failed checks printed.
int Verdict() {
  std::printf("%s: %d failed checks\n", failures == 0 ? "PASSED" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "nfs_export_client: %s\n", what.c_str());
  std::exit(1);
}

// The local (cudafs) side: plain system calls on the mount.
std::optional<Bytes> ReadLocal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteLocal(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) Die("cannot write " + path + " on the mount");
}

std::set<std::string> ListLocal(const std::string& path) {
  std::set<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.insert(name);
  }
  closedir(dir);
  return names;
}

// The kernel forgets every unused inode and dentry: the server's next
// access to a file it knows by handle goes through open_by_handle_at, which
// FUSE answers with a LOOKUP of "." on the inode number.
void DropCaches() {
  sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
}

class NfsClient {
 public:
  // libnfs 4.0 (Debian 12) encodes an NFSv4 COMPOUND into a 4 KiB buffer
  // whatever the WRITE carries, and fails on more (libnfs pull request
  // 319, in 5.0): writes go in pieces that fit.
  static constexpr size_t kWriteChunk = 2048;

  // `credentials`: "" (root) or "&uid=N&gid=N", the user the client speaks as.
  NfsClient(const std::string& server, const std::string& port, const std::string& export_path,
            const std::string& credentials) {
    nfs_ = nfs_init_context();
    if (nfs_ == nullptr) Die("nfs_init_context failed");
    const std::string url =
        "nfs://" + server + export_path + "?version=4&nfsport=" + port + credentials;
    struct nfs_url* parsed = nfs_parse_url_dir(nfs_, url.c_str());
    if (parsed == nullptr) Die("bad URL " + url + ": " + nfs_get_error(nfs_));
    if (nfs_mount(nfs_, parsed->server, parsed->path) != 0) {
      Die("cannot mount " + url + ": " + nfs_get_error(nfs_));
    }
    nfs_destroy_url(parsed);
    export_path_ = export_path;
  }
  ~NfsClient() {
    nfs_umount(nfs_);
    nfs_destroy_context(nfs_);
  }

  std::string Error() { return nfs_get_error(nfs_); }

  // Writes the whole file (created or truncated); false with the reason
  // printed when any call fails.
  bool Write(const std::string& path, const Bytes& bytes) {
    struct nfsfh* fh = nullptr;
    if (nfs_open2(nfs_, path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644, &fh) != 0) {
      return Report("open for writing " + path);
    }
    size_t done = 0;
    while (done < bytes.size()) {
      const size_t chunk = std::min<size_t>(bytes.size() - done, kWriteChunk);
      const int wrote = nfs_pwrite(nfs_, fh, done, chunk, const_cast<char*>(bytes.data() + done));
      if (wrote <= 0) {
        nfs_close(nfs_, fh);
        return Report("write " + path);
      }
      done += static_cast<size_t>(wrote);
    }
    const bool synced = nfs_fsync(nfs_, fh) == 0;
    if (nfs_close(nfs_, fh) != 0 || !synced) return Report("close " + path);
    return true;
  }

  std::optional<Bytes> Read(const std::string& path) {
    struct nfsfh* fh = nullptr;
    if (nfs_open(nfs_, path.c_str(), O_RDONLY, &fh) != 0) {
      Report("open " + path);
      return std::nullopt;
    }
    std::optional<Bytes> bytes = ReadOpen(fh);
    nfs_close(nfs_, fh);
    return bytes;
  }

  // Everything the open file holds; nullopt when a read fails, with
  // last_errno() saying why.
  std::optional<Bytes> ReadOpen(struct nfsfh* fh) {
    Bytes bytes;
    char buffer[256 * 1024];
    while (true) {
      const int got = nfs_pread(nfs_, fh, bytes.size(), sizeof buffer, buffer);
      if (got < 0) {
        last_errno_ = -got;
        return std::nullopt;
      }
      if (got == 0) return bytes;
      bytes.insert(bytes.end(), buffer, buffer + got);
    }
  }

  struct nfsfh* Open(const std::string& path) {
    struct nfsfh* fh = nullptr;
    if (nfs_open(nfs_, path.c_str(), O_RDONLY, &fh) != 0) Die("open " + path + ": " + Error());
    return fh;
  }
  void Close(struct nfsfh* fh) { nfs_close(nfs_, fh); }

  bool MakeDirectory(const std::string& path) {
    return nfs_mkdir(nfs_, path.c_str()) == 0 || Report("mkdir " + path);
  }

  std::set<std::string> List(const std::string& path) {
    std::set<std::string> names;
    struct nfsdir* dir = nullptr;
    if (nfs_opendir(nfs_, path.c_str(), &dir) != 0) {
      Report("opendir " + path);
      return names;
    }
    while (struct nfsdirent* entry = nfs_readdir(nfs_, dir)) {
      const std::string name = entry->name;
      if (name != "." && name != "..") names.insert(name);
    }
    nfs_closedir(nfs_, dir);
    return names;
  }

  // The server's file handle of `path` under the export, from a COMPOUND of
  // our own (PUTROOTFH, LOOKUP each component, GETFH): libnfs keeps the
  // handles of its open files to itself.
  Bytes HandleOf(const std::string& path) {
    std::vector<std::string> components;
    for (const std::string& part : {export_path_, path}) {
      size_t at = 0;
      while (at < part.size()) {
        size_t next = part.find('/', at);
        if (next == std::string::npos) next = part.size();
        if (next > at) components.push_back(part.substr(at, next - at));
        at = next + 1;
      }
    }
    std::vector<nfs_argop4> ops(components.size() + 2);
    ops[0].argop = OP_PUTROOTFH;
    for (size_t i = 0; i < components.size(); ++i) {
      ops[i + 1].argop = OP_LOOKUP;
      ops[i + 1].nfs_argop4_u.oplookup.objname.utf8string_len = components[i].size();
      ops[i + 1].nfs_argop4_u.oplookup.objname.utf8string_val = components[i].data();
    }
    ops.back().argop = OP_GETFH;
    Reply reply = Compound(ops);
    if (reply.status != NFS4_OK) Die("no handle for " + path + ": status " + reply.Status());
    return reply.handle;
  }

  // GETATTR (type and size) of a file by a handle kept from before.
  int GetAttributesByHandle(Bytes handle) {
    std::vector<nfs_argop4> ops(2);
    PutHandle(ops[0], handle);
    uint32_t wanted[2] = {1u << FATTR4_TYPE, 0};
    ops[1].argop = OP_GETATTR;
    ops[1].nfs_argop4_u.opgetattr.attr_request.bitmap4_len = 2;
    ops[1].nfs_argop4_u.opgetattr.attr_request.bitmap4_val = wanted;
    return Compound(ops).status;
  }

  // READ of the first `count` bytes by a handle kept from before, with the
  // anonymous stateid (no OPEN: the server opens the file itself).
  int ReadByHandle(Bytes handle, uint32_t count, Bytes* data) {
    std::vector<nfs_argop4> ops(2);
    PutHandle(ops[0], handle);
    ops[1].argop = OP_READ;
    ops[1].nfs_argop4_u.opread.offset = 0;
    ops[1].nfs_argop4_u.opread.count = count;
    Reply reply = Compound(ops);
    *data = reply.data;
    return reply.status;
  }

  int last_errno() const { return last_errno_; }

 private:
  struct Reply {
    int status = -1;
    bool done = false;
    std::string error;
    Bytes handle;
    Bytes data;
    std::string Status() const { return error.empty() ? std::to_string(status) : error; }
  };

  static void PutHandle(nfs_argop4& op, Bytes& handle) {
    op.argop = OP_PUTFH;
    op.nfs_argop4_u.opputfh.object.nfs_fh4_len = handle.size();
    op.nfs_argop4_u.opputfh.object.nfs_fh4_val = handle.data();
  }

  static void OnReply(struct rpc_context*, int rpc_status, void* data, void* private_data) {
    Reply& reply = *static_cast<Reply*>(private_data);
    reply.done = true;
    if (rpc_status != RPC_STATUS_SUCCESS) {
      reply.error = data != nullptr ? static_cast<const char*>(data) : "cancelled";
      return;
    }
    const COMPOUND4res& res = *static_cast<COMPOUND4res*>(data);
    reply.status = res.status;
    for (u_int i = 0; i < res.resarray.resarray_len; ++i) {
      // libnfs's decoder lays the results out with no regard to alignment
      // (UBSan says so): each is copied out before use.
      nfs_resop4 op;
      std::memcpy(&op, reinterpret_cast<const char*>(res.resarray.resarray_val) + i * sizeof op,
                  sizeof op);
      if (op.resop == OP_GETFH && op.nfs_resop4_u.opgetfh.status == NFS4_OK) {
        const nfs_fh4& fh = op.nfs_resop4_u.opgetfh.GETFH4res_u.resok4.object;
        reply.handle.assign(fh.nfs_fh4_val, fh.nfs_fh4_val + fh.nfs_fh4_len);
      }
      if (op.resop == OP_READ && op.nfs_resop4_u.opread.status == NFS4_OK) {
        const READ4resok& ok = op.nfs_resop4_u.opread.READ4res_u.resok4;
        reply.data.assign(ok.data.data_val, ok.data.data_val + ok.data.data_len);
      }
    }
  }

  // One COMPOUND on the client's connection, waited for.
  Reply Compound(std::vector<nfs_argop4>& ops) {
    COMPOUND4args args{};
    args.minorversion = 0;
    args.argarray.argarray_len = ops.size();
    args.argarray.argarray_val = ops.data();
    Reply reply;
    struct rpc_context* rpc = nfs_get_rpc_context(nfs_);
    if (rpc_nfs4_compound_async(rpc, OnReply, &args, &reply) != 0) {
      Die(std::string("cannot send a COMPOUND: ") + rpc_get_error(rpc));
    }
    while (!reply.done) {
      struct pollfd pfd = {rpc_get_fd(rpc), static_cast<short>(rpc_which_events(rpc)), 0};
      if (poll(&pfd, 1, 30000) <= 0) Die("no reply to a COMPOUND within 30 s");
      if (rpc_service(rpc, pfd.revents) < 0) Die(std::string("rpc: ") + rpc_get_error(rpc));
    }
    return reply;
  }

  bool Report(const std::string& what) {
    std::printf("FAILED: %s: %s\n", what.c_str(), Error().c_str());
    ++failures;
    return false;
  }

  struct nfs_context* nfs_ = nullptr;
  std::string export_path_;
  int last_errno_ = 0;
};

std::string Describe(const std::optional<Bytes>& got, const Bytes& want) {
  if (!got) return "unreadable";
  if (got->size() != want.size()) {
    return std::to_string(got->size()) + " bytes, not " + std::to_string(want.size());
  }
  return *got == want ? "same bytes" : "different bytes";
}

}  // namespace

int main(int argc, char** argv) {
  const bool files_only = argc == 8 && std::string(argv[7]) == "--files-only";
  if (argc != 5 && argc != 7 && !files_only) {
    std::fprintf(
        stderr,
        "usage: nfs_export_client SERVER PORT EXPORT MOUNTPOINT [UID GID [--files-only]]\n");
    return 2;
  }
  const std::string mount = argv[4];
  const uid_t uid = argc >= 7 ? static_cast<uid_t>(std::atoi(argv[5])) : 0;
  const std::string credentials =
      argc >= 7 ? std::string("&uid=") + argv[5] + "&gid=" + argv[6] : std::string();
  NfsClient nfs(argv[1], argv[2], argv[3], credentials);

  // Files of several sizes, across block and request boundaries, and a
  // tree of directories, each written on one side and read on both.
  std::vector<size_t> sizes = {0, 1, 4095, 4096, 65537};
  if (!files_only) sizes.insert(sizes.end(), {1024 * 1024, 1048576 + 13, 3 * 1048576 + 7});
  struct File {
    std::string path;
    Bytes bytes;
  };
  std::vector<File> files;
  uint32_t seed = 1;
  Check(nfs.MakeDirectory("/tree") && nfs.MakeDirectory("/tree/a") &&
            nfs.MakeDirectory("/tree/a/b") && nfs.MakeDirectory("/tree/c"),
        "mkdir through NFS");
  for (const char* dir : {"/", "/tree/", "/tree/a/b/"}) {
    for (size_t size : sizes) {
      files.push_back({std::string(dir) + "nfs-" + std::to_string(size), Pattern(size, seed++)});
    }
  }
  if (mkdir((mount + "/tree/c/local").c_str(), 0755) != 0) Die("mkdir on the mount");
  for (const char* dir : {"/tree/c/", "/tree/c/local/"}) {
    for (size_t size : sizes) {
      files.push_back({std::string(dir) + "local-" + std::to_string(size), Pattern(size, seed++)});
    }
  }
  for (const File& file : files) {
    if (file.path.find("/local-") != std::string::npos) {
      WriteLocal(mount + file.path, file.bytes);
    } else {
      Check(nfs.Write(file.path, file.bytes), "write " + file.path + " through NFS");
    }
  }

  // The server acts as the client's user (Ganesha takes the uid as its
  // thread's own for each request), so the files it made are that user's.
  std::string others;
  for (const File& file : files) {
    struct stat st;
    if (file.path.find("/nfs-") == std::string::npos) continue;
    if (stat((mount + file.path).c_str(), &st) != 0 || st.st_uid != uid) others += " " + file.path;
  }
  Check(others.empty(), "the files written through NFS are uid " + std::to_string(uid) +
                            "'s on the mount" + (others.empty() ? "" : "; not:" + others));

  auto compare_all = [&](const std::string& when) {
    for (const File& file : files) {
      const std::optional<Bytes> by_nfs = nfs.Read(file.path);
      Check(by_nfs == file.bytes,
            when + "NFS reads " + file.path + ": " + Describe(by_nfs, file.bytes));
      const std::optional<Bytes> local = ReadLocal(mount + file.path);
      Check(local == file.bytes,
            when + "the mount reads " + file.path + ": " + Describe(local, file.bytes));
    }
    for (const char* dir : {"/", "/tree", "/tree/a", "/tree/a/b", "/tree/c", "/tree/c/local"}) {
      const std::set<std::string> by_nfs = nfs.List(dir);
      Check(!by_nfs.empty() && by_nfs == ListLocal(mount + dir),
            when + "NFS and the mount list the same " + std::to_string(by_nfs.size()) +
                " names in " + dir);
    }
  };
  compare_all("");
  if (files_only) {
    return Verdict();
  }
  DropCaches();
  compare_all("after drop_caches: ");

  // A handle of a removed file. The victim is read through NFS and held
  // open; its handle is also kept. Then, on the mount, it is removed and
  // files are created, one under its name, so that neither a reused inode
  // number nor a lookup by name could pass for it.
  const Bytes victim = Pattern(200000, 1001);
  const Bytes successor = Pattern(200000, 1002);
  WriteLocal(mount + "/victim", victim);
  struct nfsfh* held = nfs.Open("/victim");
  Check(nfs.ReadOpen(held) == victim, "NFS reads the victim before its removal");
  const Bytes handle = nfs.HandleOf("/victim");
  Check(unlink((mount + "/victim").c_str()) == 0, "unlink the victim on the mount");
  for (int i = 0; i < 20; ++i) {
    WriteLocal(mount + "/after-" + std::to_string(i), successor);
  }
  WriteLocal(mount + "/victim", successor);
  DropCaches();

  // Held open, a removed file is still the file the client opened (the
  // server holds a descriptor, as a local process would): its own bytes or
  // an error, never the successor's.
  const std::optional<Bytes> through_open = nfs.ReadOpen(held);
  Check(!through_open || *through_open == victim,
        "the open victim after its removal: " +
            (through_open ? Describe(through_open, victim)
                          : "error " + std::string(strerror(nfs.last_errno()))));
  nfs.Close(held);
  DropCaches();

  // Closed, only the handle is left: the server must find no file by it.
  const int by_handle = nfs.GetAttributesByHandle(handle);
  Check(by_handle == NFS4ERR_STALE || by_handle == NFS4ERR_NOENT,
        "GETATTR by the removed victim's handle: status " + std::to_string(by_handle) +
            " (want NFS4ERR_STALE " + std::to_string(NFS4ERR_STALE) + ")");
  Bytes data;
  const int read_status = nfs.ReadByHandle(handle, 4096, &data);
  Check(read_status == NFS4ERR_STALE || read_status == NFS4ERR_NOENT,
        "READ by the removed victim's handle: status " + std::to_string(read_status) +
            (read_status == NFS4_OK ? (std::equal(data.begin(), data.end(), successor.begin())
                                           ? ", the successor's bytes"
                                           : ", other bytes")
                                    : ""));
  Check(nfs.Read("/victim") == successor, "NFS reads the new victim by name");

  return Verdict();
}
