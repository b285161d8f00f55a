// Admission of sockets that have not proved anything yet: the plugin's listeners (handshakes) and
// the rescue service share one budget per process.
//
// Every accepted socket is admitted at once (the kernel's backlog never fills behind silent
// sockets) and must prove the secret within `deadline` (handshake_auth.hpp; the rescue service:
// a request sealed with its connection's key). While it has not, it holds one of at most `total`
// places, so the descriptors held by strangers stay bounded by `total`. A new socket that finds
// them all taken closes one, fairly: of the source address holding the most silent sockets
// (nothing unread), its oldest silent one; when no socket is silent, the oldest of all. Nothing
// is closed while places are free: a burst of real connectors from one host (NCCL opens its
// connections together; a starved host writes their proofs seconds after the TCP connection) is
// admitted whole, and a flood from one address closes its own sockets, never those of quieter
// sources. A real connector sends its proof with its first bytes, so it always gets a place.
//
// A socket that fails (garbage, a wrong proof, a replay, silence past the deadline, evicted) is
// closed without a byte sent back; the refusals are counted, and said in an INFO line at most
// once a minute per source (how many since the last line, and the last reason).
//
// Progress thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

namespace nccl_ha::plugin {

class Admission {
 public:
  struct Limits {
    std::size_t total = 512;                   // unproven sockets held by the process at once
    std::chrono::milliseconds deadline{5000};  // to prove the secret
  };
  struct Counters {
    std::uint64_t admitted = 0;  // sockets accepted before their proof
    std::uint64_t proven = 0;    // that proved it
    std::uint64_t refused = 0;   // closed without a word: a failed proof, garbage, silence, replays
    std::uint64_t evicted = 0;   // closed to make room for a newer socket
  };

  // The place of one unproven socket, given back when it proved itself (proven()) or is destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : owner_(o.owner_), id_(o.id_) { o.owner_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    ~Ticket() { release(); }
    // The socket proved the secret: its place is free for others.
    void proven();

   private:
    friend class Admission;
    Ticket(Admission* owner, std::uint64_t id) : owner_(owner), id_(id) {}
    void release();
    Admission* owner_ = nullptr;
    std::uint64_t id_ = 0;
  };

  Admission() = default;
  explicit Admission(Limits limits) : limits_(limits) {}
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Admits `sock` (which must outlive the ticket) from `source`, closing an unproven socket first
  // when all places are taken.
  Ticket admit(boost::asio::ip::tcp::socket& sock, const boost::asio::ip::address& source);
  // A socket from `source` was closed unproven, `why` (for the INFO line of `service`).
  void refused(const std::string& service, const boost::asio::ip::address& source, const std::string& why);

  const Limits& limits() const noexcept { return limits_; }
  const Counters& counters() const noexcept { return counters_; }
  std::size_t held() const noexcept { return pending_.size(); }

 private:
  struct Pending {
    std::uint64_t id;
    boost::asio::ip::tcp::socket* sock;
    boost::asio::ip::address source;
  };
  struct Said {  // the INFO lines of one source
    std::chrono::steady_clock::time_point last{};
    std::uint64_t unsaid = 0;
  };
  // The socket to close for a newcomer: the oldest silent one of the source with the most silent
  // sockets, else the oldest of all.
  std::list<Pending>::iterator victim();
  void evict(std::list<Pending>::iterator it);
  void forget(std::uint64_t id);

  Limits limits_;
  Counters counters_;
  std::list<Pending> pending_;  // oldest first
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::string, Said> said_;  // by source address, at most kMaxSources
};

}  // namespace nccl_ha::plugin
