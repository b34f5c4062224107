// A rendezvous like torch.distributed's TCP store, using nothing but
// MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE: rank 0 listens on
// MASTER_ADDR:MASTER_PORT, every other rank connects and sends its rank,
// rank 0 answers everyone with the sum of all ranks. Prints
// "rendezvous ok rank=R sum=S" on success; exits 1 with a reason otherwise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

int Die(const std::string& why) {
  std::fprintf(stderr, "rendezvous failed: %s\n", why.c_str());
  return 1;
}

bool Env(const char* name, std::string* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  *out = v;
  return true;
}

bool SendAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool RecvAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = recv(fd, c, n, 0);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

}  // namespace

int main() {
  std::string addr, port_s, rank_s, world_s;
  if (!Env("MASTER_ADDR", &addr) || !Env("MASTER_PORT", &port_s) || !Env("RANK", &rank_s) ||
      !Env("WORLD_SIZE", &world_s))
    return Die("MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE must be set");
  const int rank = std::atoi(rank_s.c_str()), world = std::atoi(world_s.c_str());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::atoi(port_s.c_str())));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) return Die("MASTER_ADDR '" + addr + "' is not an IPv4 address");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int32_t sum = 0;

  if (rank == 0) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return Die("bind " + addr + ":" + port_s);
    if (listen(ls, world) != 0) return Die("listen");
    std::vector<int> peers;
    std::set<int32_t> seen{0};
    for (int i = 1; i < world; ++i) {
      pollfd pfd{ls, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (poll(&pfd, 1, static_cast<int>(std::max<long>(0, left.count()))) != 1)
        return Die("only " + std::to_string(i - 1) + " of " + std::to_string(world - 1) + " ranks connected in time");
      int fd = accept(ls, nullptr, nullptr);
      int32_t r = -1;
      if (fd < 0 || !RecvAll(fd, &r, sizeof r)) return Die("accept/recv");
      if (!seen.insert(r).second || r <= 0 || r >= world) return Die("bad or repeated rank " + std::to_string(r));
      peers.push_back(fd);
    }
    for (int32_t r : seen) sum += r;
    for (int fd : peers) {
      if (!SendAll(fd, &sum, sizeof sum)) return Die("send");
      close(fd);
    }
    close(ls);
  } else {
    int fd = -1;
    while (true) {  // rank 0 may not listen yet
      fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
      close(fd);
      if (std::chrono::steady_clock::now() > deadline) return Die("connect to " + addr + ":" + port_s + " timed out");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    int32_t r = rank;
    if (!SendAll(fd, &r, sizeof r) || !RecvAll(fd, &sum, sizeof sum)) return Die("exchange with rank 0");
    close(fd);
  }
  if (sum != world * (world - 1) / 2) return Die("sum " + std::to_string(sum) + " is wrong");
  std::printf("rendezvous ok rank=%d sum=%d\n", rank, sum);
  return 0;
}
