// Admission of sockets that have not proved anything yet: the plugin's listeners (handshakes) and
// the rescue service share one budget per process.
//
// Every accepted socket is admitted at once (the kernel's backlog never fills behind silent
// sockets) and must prove the secret within `deadline` (handshake_auth.hpp; the rescue service:
// a request sealed with its connection's key). While it has not, it holds one of at most `total`
// places: a new socket that finds them all taken closes the oldest one that has nothing unread
// (else the oldest), so the descriptors held by strangers stay bounded by `total`. One source
// address holds at most `per_source` of them once they are older than `grace`: a new socket from a
// source at its limit closes that source's oldest socket that is older than `grace` and has
// nothing unread. Younger ones are never closed for their source: a burst of real connectors from
// one host (NCCL opens its connections together; a loaded host may send their proofs a little
// after the TCP connection) is admitted whole, and a real connector, which sends its proof with
// its first bytes, gets a place however many silent sockets its own host holds.
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
#include <functional>
#include <list>
#include <string>
#include <unordered_map>

namespace nccl_ha::plugin {

class Admission {
 public:
  struct Limits {
    std::size_t total = 512;      // unproven sockets held by the process at once
    std::size_t per_source = 32;  // of them from one address, older than `grace`
    std::chrono::milliseconds deadline{5000};  // to prove the secret
    std::chrono::milliseconds grace{1000};     // younger sockets are not closed for their source's limit
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

  // Admits `sock` (which must outlive the ticket) from `source`, closing older unproven sockets as
  // the limits require.
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
    std::chrono::steady_clock::time_point since;
  };
  struct Said {  // the INFO lines of one source
    std::chrono::steady_clock::time_point last{};
    std::uint64_t unsaid = 0;
  };
  // Of the pending sockets `among` selects: the oldest with nothing unread, else (unless
  // `silent_only`) the oldest (end(): none).
  std::list<Pending>::iterator victim(const std::function<bool(const Pending&)>& among, bool silent_only);
  void evict(std::list<Pending>::iterator it);
  void forget(std::uint64_t id);

  Limits limits_;
  Counters counters_;
  std::list<Pending> pending_;  // oldest first
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::string, Said> said_;  // by source address, at most kMaxSources
};

}  // namespace nccl_ha::plugin
