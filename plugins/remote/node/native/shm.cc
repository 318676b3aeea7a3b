// meeple_shm: the few POSIX calls the shared-memory transport needs that Node does not have
// (docs/protocol.md section 4). C++17 against Node-API 8 only (node_api.h): one build loads in
// any Node from 16 on, and no node-gyp; scripts/build-native.js runs g++ on this file.
//
//   create(name, size) -> ArrayBuffer    shm_open(O_CREAT | O_EXCL, 0600) + ftruncate + mmap
//   open(name) -> ArrayBuffer            an existing segment, mapped whole
//   unlink(name) -> boolean              false if it was already gone
//   spin(buf, off, value, ns, yield) -> u32     spin (with sched_yield if yield) until the u32 at
//                                               off differs from value, or ns have passed
//   sleep(buf, off, value, ns, sleepingOff) -> u32   set the sleeping flag, FUTEX_WAIT while the
//                                               word is value (at most ns), clear the flag
//   publish(buf, off, value, sleepingOff) -> bool   store value (seq_cst), FUTEX_WAKE if the
//                                               peer's sleeping flag is set (true if it woke)
//   wake(buf, off)                       FUTEX_WAKE every waiter on the word
//
// And a blocking Unix-socket client for the batched sub-simulation service (src/subsim.ts,
// ``--combat batched:PATH``): a step is synchronous JavaScript (in a worker thread, or the main
// thread without workers), so its one round trip to the service must block too.
//
//   sockConnect(path, timeoutMs) -> fd   connect(2) to a Unix stream socket (close-on-exec)
//   sockExchange(fd, frame, timeoutMs) -> ArrayBuffer   write all of frame (a Uint8Array), then
//                                        read one reply frame (9-byte header of docs/protocol.md:
//                                        body_len at byte 5, at most 1 GiB) and return it whole;
//                                        poll(2) bounds the whole exchange by timeoutMs. Throws
//                                        ETIMEDOUT, EPIPE/ECONNRESET, or "closed by the peer".
//   sockClose(fd)
//
// Liveness checks need no native code (process.kill(pid, 0) is kill(2)); sched_yield is called
// inside spin so a yielding wait costs one call per slice, not one per sched_yield.
//
// The ArrayBuffers are external: the memory is the mapping, unmapped when the buffer is
// collected. Futexes are shared (not FUTEX_PRIVATE): the peer is another process.

#include <node_api.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

#define CHECK(call)                                                    \
  do {                                                                 \
    if ((call) != napi_ok) {                                           \
      napi_throw_error(env, nullptr, "meeple_shm: N-API call failed"); \
      return nullptr;                                                  \
    }                                                                  \
  } while (0)

napi_value Throw(napi_env env, const std::string& what, int err) {
  std::string text = what + ": " + std::strerror(err);
  napi_value message, code, error;
  napi_create_string_utf8(env, text.c_str(), NAPI_AUTO_LENGTH, &message);
  const char* name = err == EEXIST ? "EEXIST" : err == ENOENT ? "ENOENT" : "ESHM";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_error(env, code, message, &error);
  napi_throw(env, error);
  return nullptr;
}

struct Mapping {
  void* addr;
  size_t size;
};

void Unmap(napi_env, void*, void* hint) {
  auto* m = static_cast<Mapping*>(hint);
  munmap(m->addr, m->size);
  delete m;
}

bool Args(napi_env env, napi_callback_info info, size_t want, napi_value* argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < want) {
    napi_throw_type_error(env, nullptr, "meeple_shm: too few arguments");
    return false;
  }
  return true;
}

std::string String(napi_env env, napi_value v) {
  char buf[256];
  size_t n = 0;
  if (napi_get_value_string_utf8(env, v, buf, sizeof buf, &n) != napi_ok) return "";
  return std::string(buf, n);
}

double Number(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

// The u32 at byte offset ``off`` of an ArrayBuffer (checked: in range and 4-aligned).
uint32_t* Word(napi_env env, napi_value buffer, napi_value offset) {
  void* data = nullptr;
  size_t len = 0;
  if (napi_get_arraybuffer_info(env, buffer, &data, &len) != napi_ok) {
    napi_throw_type_error(env, nullptr, "meeple_shm: expected an ArrayBuffer");
    return nullptr;
  }
  double off = Number(env, offset);
  if (!(off >= 0 && off + 4 <= static_cast<double>(len)) || static_cast<uint64_t>(off) % 4) {
    napi_throw_range_error(env, nullptr, "meeple_shm: word offset out of range or unaligned");
    return nullptr;
  }
  return reinterpret_cast<uint32_t*>(static_cast<char*>(data) + static_cast<size_t>(off));
}

uint32_t Load(const uint32_t* w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }
void Store(uint32_t* w, uint32_t v) { __atomic_store_n(w, v, __ATOMIC_SEQ_CST); }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

napi_value Mapped(napi_env env, int fd, size_t size) {
  void* addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (addr == MAP_FAILED) return Throw(env, "mmap", err);
  auto* m = new Mapping{addr, size};
  napi_value out;
  if (napi_create_external_arraybuffer(env, addr, size, Unmap, m, &out) != napi_ok) {
    munmap(addr, size);
    delete m;
    napi_throw_error(env, nullptr, "meeple_shm: cannot wrap the mapping in an ArrayBuffer");
    return nullptr;
  }
  return out;
}

napi_value Create(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  std::string name = "/" + String(env, argv[0]);
  double size = Number(env, argv[1]);
  if (!(size > 0)) {
    napi_throw_range_error(env, nullptr, "meeple_shm: segment size must be positive");
    return nullptr;
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Throw(env, "shm_open " + name, errno);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return Throw(env, "ftruncate " + name, err);
  }
  return Mapped(env, fd, static_cast<size_t>(size));
}

napi_value Open(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  std::string name = "/" + String(env, argv[0]);
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return Throw(env, "shm_open " + name, errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    int err = errno ? errno : EINVAL;
    close(fd);
    return Throw(env, "fstat " + name, err);
  }
  return Mapped(env, fd, static_cast<size_t>(st.st_size));
}

napi_value Unlink(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  std::string name = "/" + String(env, argv[0]);
  bool removed = shm_unlink(name.c_str()) == 0;
  if (!removed && errno != ENOENT) return Throw(env, "shm_unlink " + name, errno);
  napi_value out;
  CHECK(napi_get_boolean(env, removed, &out));
  return out;
}

napi_value Spin(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!Args(env, info, 5, argv)) return nullptr;
  uint32_t* word = Word(env, argv[0], argv[1]);
  if (word == nullptr) return nullptr;
  uint32_t value = static_cast<uint32_t>(Number(env, argv[2]));
  int64_t end = NowNs() + static_cast<int64_t>(Number(env, argv[3]));
  bool yield = false;
  napi_get_value_bool(env, argv[4], &yield);
  uint32_t now = Load(word);
  for (unsigned k = 0; now == value; now = Load(word), k++) {
    if (yield) sched_yield();
    else CpuRelax();
    if ((yield || (k & 63) == 0) && NowNs() >= end) break;  // a clock read every 64 pauses
  }
  napi_value out;
  CHECK(napi_create_uint32(env, now, &out));
  return out;
}

napi_value Sleep(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!Args(env, info, 5, argv)) return nullptr;
  uint32_t* word = Word(env, argv[0], argv[1]);
  uint32_t* sleeping = word ? Word(env, argv[0], argv[4]) : nullptr;
  if (sleeping == nullptr) return nullptr;
  uint32_t value = static_cast<uint32_t>(Number(env, argv[2]));
  int64_t ns = static_cast<int64_t>(Number(env, argv[3]));
  // seq_cst store, then load: the peer that stores the word and then reads the flag (publish)
  // either sees the flag and wakes us, or we see its store here and do not sleep
  Store(sleeping, 1);
  if (Load(word) == value) {
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    syscall(SYS_futex, word, FUTEX_WAIT, value, &ts, nullptr, 0);
  }
  Store(sleeping, 0);
  napi_value out;
  CHECK(napi_create_uint32(env, Load(word), &out));
  return out;
}

napi_value Publish(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (!Args(env, info, 4, argv)) return nullptr;
  uint32_t* word = Word(env, argv[0], argv[1]);
  uint32_t* sleeping = word ? Word(env, argv[0], argv[3]) : nullptr;
  if (sleeping == nullptr) return nullptr;
  Store(word, static_cast<uint32_t>(Number(env, argv[2])));
  bool woke = Load(sleeping) != 0;
  if (woke) syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, nullptr, nullptr, 0);
  napi_value out;
  CHECK(napi_get_boolean(env, woke, &out));
  return out;
}

napi_value Wake(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  uint32_t* word = Word(env, argv[0], argv[1]);
  if (word == nullptr) return nullptr;
  syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, nullptr, nullptr, 0);
  return nullptr;
}

napi_value SockConnect(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  std::string path = String(env, argv[0]);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) return Throw(env, "socket path " + path, ENAMETOOLONG);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Throw(env, "socket", errno);
  // a Unix-socket connect does not wait for accept (only for a full backlog): no timeout needed
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    return Throw(env, "connect " + path, err);
  }
  napi_value out;
  CHECK(napi_create_int32(env, fd, &out));
  return out;
}

// Wait until fd is ready for ``events`` or the deadline passes; 0 ok, else an errno.
int WaitFd(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = (deadline - NowNs()) / 1000000;
    if (left <= 0) return ETIMEDOUT;
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(left > 1 << 30 ? 1 << 30 : left));
    if (r > 0) return 0;  // readable, writable, or hung up: the next read/write says which
    if (r < 0 && errno != EINTR) return errno;
  }
}

napi_value SockExchange(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (!Args(env, info, 3, argv)) return nullptr;
  int32_t fd = -1;
  napi_get_value_int32(env, argv[0], &fd);
  void* data = nullptr;
  size_t len = 0;
  if (napi_get_typedarray_info(env, argv[1], nullptr, &len, &data, nullptr, nullptr) != napi_ok) {
    napi_throw_type_error(env, nullptr, "meeple_shm: sockExchange needs a Uint8Array frame");
    return nullptr;
  }
  int64_t deadline = NowNs() + static_cast<int64_t>(Number(env, argv[2]) * 1e6);
  const char* out = static_cast<const char*>(data);
  for (size_t sent = 0; sent < len;) {
    ssize_t n = send(fd, out + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) { sent += static_cast<size_t>(n); continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Throw(env, "send", errno);
    if (int err = WaitFd(fd, POLLOUT, deadline)) return Throw(env, "send (waiting for the peer)", err);
  }
  std::string reply;
  size_t want = 9;
  char buf[65536];
  while (reply.size() < want) {
    size_t chunk = want - reply.size() < sizeof buf ? want - reply.size() : sizeof buf;
    ssize_t n = recv(fd, buf, chunk, MSG_DONTWAIT);
    if (n > 0) {
      reply.append(buf, static_cast<size_t>(n));
      if (want == 9 && reply.size() == 9) {
        uint32_t body;
        std::memcpy(&body, reply.data() + 5, 4);
        if (body > (1u << 30)) return Throw(env, "recv: reply body_len " + std::to_string(body) + " above 1 GiB", EPROTO);
        want += body;
      }
      continue;
    }
    if (n == 0) {
      return Throw(env, "recv: connection closed by the peer after " + std::to_string(reply.size()) + " of " +
                            std::to_string(want) + " reply bytes", ECONNRESET);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Throw(env, "recv", errno);
    if (int err = WaitFd(fd, POLLIN, deadline)) return Throw(env, "recv (waiting for the reply)", err);
  }
  void* dst = nullptr;
  napi_value result;
  CHECK(napi_create_arraybuffer(env, reply.size(), &dst, &result));
  std::memcpy(dst, reply.data(), reply.size());
  return result;
}

napi_value SockClose(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  int32_t fd = -1;
  napi_get_value_int32(env, argv[0], &fd);
  if (fd >= 0) close(fd);
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"create", nullptr, Create, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"open", nullptr, Open, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"unlink", nullptr, Unlink, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"spin", nullptr, Spin, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sleep", nullptr, Sleep, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"publish", nullptr, Publish, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"wake", nullptr, Wake, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sockConnect", nullptr, SockConnect, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sockExchange", nullptr, SockExchange, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sockClose", nullptr, SockClose, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0], props) != napi_ok) {
    return nullptr;
  }
  return exports;
}

}  // namespace

NAPI_MODULE_INIT() { return Init(env, exports); }
