// Admission of unproven sockets (admission.hpp).
#include "runtime/admission.hpp"

#include <algorithm>

#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::plugin {

namespace {
constexpr std::size_t kMaxSources = 4096;  // INFO bookkeeping: beyond it, the map starts over
constexpr std::chrono::seconds kSayEvery{60};
}  // namespace

void Admission::Ticket::release() {
  if (owner_) owner_->forget(id_);
  owner_ = nullptr;
}

void Admission::Ticket::proven() {
  if (owner_) ++owner_->counters_.proven;
  release();
}

void Admission::forget(std::uint64_t id) {
  const auto it = std::find_if(pending_.begin(), pending_.end(), [id](const Pending& p) { return p.id == id; });
  if (it != pending_.end()) pending_.erase(it);
}

void Admission::evict(std::list<Pending>::iterator it) {
  boost::system::error_code ignored;
  it->sock->close(ignored);  // its handshake's read ends with operation_aborted; its ticket finds nothing left
  ++counters_.evicted;
  pending_.erase(it);
}

std::list<Admission::Pending>::iterator Admission::victim() {
  struct Silent {
    std::size_t count = 0;
    std::list<Pending>::iterator oldest;
  };
  std::unordered_map<boost::asio::ip::address, Silent> by_source;
  auto chosen = pending_.end();
  std::size_t most = 0;
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {  // oldest first
    boost::system::error_code ec;
    if (it->sock->available(ec) != 0 || ec) continue;  // it has spoken: a proof waits to be read
    Silent& s = by_source[it->source];
    if (s.count++ == 0) s.oldest = it;
    if (s.count > most) {
      most = s.count;
      chosen = s.oldest;
    }
  }
  return chosen != pending_.end() ? chosen : pending_.begin();
}

Admission::Ticket Admission::admit(boost::asio::ip::tcp::socket& sock, const boost::asio::ip::address& source) {
  ++counters_.admitted;
  if (pending_.size() >= limits_.total && !pending_.empty()) evict(victim());
  const std::uint64_t id = next_id_++;
  pending_.push_back({id, &sock, source});
  return Ticket(this, id);
}

void Admission::refused(const std::string& service, const boost::asio::ip::address& source, const std::string& why) {
  ++counters_.refused;
  if (said_.size() >= kMaxSources) said_.clear();
  Said& s = said_[source.to_string()];
  ++s.unsaid;
  const auto now = std::chrono::steady_clock::now();
  if (s.last != std::chrono::steady_clock::time_point{} && now - s.last < kSayEvery) return;
  HA_INFO("NET/HA: %s: closed %llu connection(s) from %s that did not prove the job's secret (last: %s); nothing was "
          "sent to them", service.c_str(), static_cast<unsigned long long>(s.unsaid), source.to_string().c_str(),
          why.c_str());
  s.last = now;
  s.unsaid = 0;
}

}  // namespace nccl_ha::plugin
