// The files the plugin writes (output_file.hpp): the stats file's AppendFile (kept open, follows a
// rotation, never follows a symbolic link, only a regular file, mode 0640) and the Prometheus
// file's replace_file / TempFile (a temporary file of its own per writer beside the target, mode
// 0644, renamed over the target; a symbolic link planted at the target or at the old shared name
// `FILE.tmp` is never followed).
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "runtime/output_file.hpp"

using namespace nccl_ha::plugin;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// A fresh directory under TMPDIR, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "nccl-ha-output-XXXXXX").string();
    BOOST_TEST_REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // The names in the directory, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

// A process umask for the test's lifetime.
struct Umask {
  mode_t saved;
  explicit Umask(mode_t m) : saved(::umask(m)) {}
  ~Umask() { ::umask(saved); }
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;
};

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  BOOST_TEST_REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool is_symlink_to(const fs::path& link, const fs::path& to) {
  return fs::is_symlink(fs::symlink_status(link)) && fs::read_symlink(link) == to;
}

constexpr std::uint64_t kSecond = 1'000'000'000;

}  // namespace

BOOST_AUTO_TEST_SUITE(stats_file)

BOOST_AUTO_TEST_CASE(is_appended_and_follows_a_rotation) {
  TempDir dir;
  const auto path = dir.path / "stats.jsonl";
  const auto rotated = dir.path / "stats.jsonl.1";
  spit(path, "before\n");  // an existing file is appended to, never truncated
  AppendFile f(path.string());
  BOOST_TEST(f.append("a\n", 10 * kSecond));
  BOOST_TEST(slurp(path) == "before\na\n");
  fs::rename(path, rotated);  // logrotate's default: rename, then a new file
  BOOST_TEST(f.append("b\n", 10 * kSecond + kSecond / 2));  // within the second: the open file still
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(f.append("c\n", 11 * kSecond + kSecond / 2));  // looked at again: the path's new file
  BOOST_TEST(slurp(rotated) == "before\na\nb\n");
  BOOST_TEST(slurp(path) == "c\n");
  fs::remove(path);
  BOOST_TEST(f.append("d\n", 13 * kSecond));
  BOOST_TEST(slurp(path) == "d\n");
  BOOST_TEST(f.append("", 13 * kSecond));
  BOOST_TEST(slurp(path) == "d\n");
}

BOOST_AUTO_TEST_CASE(that_cannot_be_opened_says_why) {
  TempDir dir;
  AppendFile f((dir.path / "no-such-dir" / "stats.jsonl").string());
  errno = 0;
  BOOST_TEST(!f.append("x\n", kSecond));
  BOOST_TEST(errno == ENOENT);
  BOOST_TEST(f.error() == std::strerror(ENOENT));
  fs::create_directory(dir.path / "no-such-dir");  // made later: the next append opens it
  BOOST_TEST(f.append("y\n", kSecond));
  BOOST_TEST(slurp(dir.path / "no-such-dir" / "stats.jsonl") == "y\n");
}

// A symbolic link planted at the name, to a file of someone else's or to a name where it wants a
// file created: neither is written nor created.
BOOST_AUTO_TEST_CASE(never_follows_a_symbolic_link) {
  TempDir dir;
  const auto path = dir.path / "stats.jsonl";
  const auto victim = dir.path / "victim";
  spit(victim, "precious\n");
  fs::create_symlink(victim, path);
  AppendFile f(path.string());
  BOOST_TEST(!f.append("x\n", kSecond));
  BOOST_TEST(f.error() == "a symbolic link (not followed)");
  BOOST_TEST(slurp(victim) == "precious\n");
  BOOST_TEST(is_symlink_to(path, victim));

  const auto dangling = dir.path / "dangling.jsonl";
  const auto would_be = dir.path / "created-by-the-plugin";
  fs::create_symlink(would_be, dangling);
  AppendFile g(dangling.string());
  BOOST_TEST(!g.append("x\n", kSecond));
  BOOST_TEST(!fs::exists(fs::symlink_status(would_be)));
}

// The file open, then rotated away and a symbolic link planted in its place: the next look finds
// another file under the name, and the link is not followed.
BOOST_AUTO_TEST_CASE(a_link_planted_after_a_rotation_is_not_followed) {
  TempDir dir;
  const auto path = dir.path / "stats.jsonl";
  const auto victim = dir.path / "victim";
  spit(victim, "precious\n");
  AppendFile f(path.string());
  BOOST_TEST(f.append("a\n", 10 * kSecond));
  fs::rename(path, dir.path / "stats.jsonl.1");
  fs::create_symlink(victim, path);
  BOOST_TEST(!f.append("b\n", 12 * kSecond));
  BOOST_TEST(slurp(victim) == "precious\n");
  BOOST_TEST(slurp(dir.path / "stats.jsonl.1") == "a\n");
}

// A FIFO (with a reader, so that opening it for writing would succeed) is not a regular file:
// refused, nothing written into it, and the writer never blocks on it.
BOOST_AUTO_TEST_CASE(refuses_what_is_not_a_regular_file) {
  TempDir dir;
  const auto path = dir.path / "stats.fifo";
  BOOST_TEST_REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  BOOST_TEST_REQUIRE(reader >= 0);
  AppendFile f(path.string());
  BOOST_TEST(!f.append("x\n", kSecond));
  BOOST_TEST(f.error() == "not a regular file");
  char buf[8];
  BOOST_TEST(::read(reader, buf, sizeof buf) <= 0);
  ::close(reader);
}

BOOST_AUTO_TEST_CASE(is_created_with_mode_0640) {
  const Umask umask(022);
  TempDir dir;
  const auto path = dir.path / "stats.jsonl";
  AppendFile f(path.string());
  BOOST_TEST(f.append("x\n", kSecond));
  BOOST_TEST(mode_of(path) == kStatsFileMode);
  BOOST_TEST(kStatsFileMode == 0640u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(prom_file)

BOOST_AUTO_TEST_CASE(is_replaced_whole_with_mode_0644_and_no_temporary_file_left) {
  const Umask umask(077);  // the mode is set, not left to the umask
  TempDir dir;
  const auto path = dir.path / "ha.prom";
  BOOST_TEST(replace_file(path.string(), "one\n", kPromFileMode));
  BOOST_TEST(slurp(path) == "one\n");
  BOOST_TEST(replace_file(path.string(), "two\n", kPromFileMode));
  BOOST_TEST(slurp(path) == "two\n");
  BOOST_TEST(mode_of(path) == kPromFileMode);
  BOOST_TEST(kPromFileMode == 0644u);
  BOOST_TEST((dir.names() == std::vector<std::string>{"ha.prom"}));
}

BOOST_AUTO_TEST_CASE(that_cannot_be_written_says_why_and_leaves_nothing) {
  TempDir dir;
  std::string why;
  BOOST_TEST(!replace_file((dir.path / "no-such-dir" / "ha.prom").string(), "x", kPromFileMode, &why));
  BOOST_TEST(why.find(std::strerror(ENOENT)) != std::string::npos, why);
  fs::create_directory(dir.path / "ha.prom");  // a directory at the name: the rename fails
  why.clear();
  BOOST_TEST(!replace_file((dir.path / "ha.prom").string(), "x", kPromFileMode, &why));
  BOOST_TEST(!why.empty());
  BOOST_TEST((dir.names() == std::vector<std::string>{"ha.prom"}));  // the directory, no temporary file
}

// A symbolic link planted at the target: replaced by the new file, the file it points to untouched.
BOOST_AUTO_TEST_CASE(a_link_at_the_target_is_replaced_not_followed) {
  TempDir dir;
  const auto path = dir.path / "ha.prom";
  const auto victim = dir.path / "victim";
  spit(victim, "precious\n");
  fs::create_symlink(victim, path);
  BOOST_TEST(replace_file(path.string(), "metrics\n", kPromFileMode));
  BOOST_TEST(slurp(victim) == "precious\n");
  BOOST_TEST(fs::is_regular_file(fs::symlink_status(path)));
  BOOST_TEST(slurp(path) == "metrics\n");
}

// Symbolic links planted at the old shared temporary name FILE.tmp (to a file, and to a name where
// the attacker wants a file created): never opened, never renamed.
BOOST_AUTO_TEST_CASE(a_link_at_the_old_shared_temporary_name_is_not_followed) {
  TempDir dir;
  const auto path = dir.path / "ha.prom";
  const auto tmp = dir.path / "ha.prom.tmp";
  const auto victim = dir.path / "victim";
  spit(victim, "precious\n");
  fs::create_symlink(victim, tmp);
  BOOST_TEST(replace_file(path.string(), "metrics\n", kPromFileMode));
  BOOST_TEST(slurp(victim) == "precious\n");
  BOOST_TEST(is_symlink_to(tmp, victim));
  BOOST_TEST(fs::is_regular_file(fs::symlink_status(path)));
  BOOST_TEST(slurp(path) == "metrics\n");

  const auto would_be = dir.path / "created-by-the-plugin";
  fs::remove(tmp);
  fs::create_symlink(would_be, tmp);
  BOOST_TEST(replace_file(path.string(), "again\n", kPromFileMode));
  BOOST_TEST(!fs::exists(fs::symlink_status(would_be)));
  BOOST_TEST(slurp(path) == "again\n");
}

// Two writers of one file (two ranks given the same HA_NCCL_PROM_FILE): each has a temporary name
// of its own, in the target's directory, neither the old shared FILE.tmp.
BOOST_AUTO_TEST_CASE(two_writers_use_different_temporary_names) {
  TempDir dir;
  const auto path = dir.path / "ha.prom";
  TempFile a(path.string(), kPromFileMode);
  TempFile b(path.string(), kPromFileMode);
  BOOST_TEST_REQUIRE(a.ok());
  BOOST_TEST_REQUIRE(b.ok());
  BOOST_TEST(a.name() != b.name());
  for (const TempFile* t : {&a, &b}) {
    BOOST_TEST(fs::path(t->name()).parent_path() == dir.path);
    BOOST_TEST(t->name() != path.string() + ".tmp");
    BOOST_TEST(t->name() != path.string());
  }
  BOOST_TEST(a.write("from a\n"));
  BOOST_TEST(b.write("from b\n"));
  BOOST_TEST(a.commit());
  BOOST_TEST(slurp(path) == "from a\n");
  BOOST_TEST(b.commit());
  BOOST_TEST(slurp(path) == "from b\n");
  BOOST_TEST((dir.names() == std::vector<std::string>{"ha.prom"}));
}

// A TempFile given up (no commit): its file is removed, the target untouched.
BOOST_AUTO_TEST_CASE(an_abandoned_temporary_file_is_removed) {
  TempDir dir;
  const auto path = dir.path / "ha.prom";
  spit(path, "old\n");
  {
    TempFile t(path.string(), kPromFileMode);
    BOOST_TEST_REQUIRE(t.ok());
    BOOST_TEST(t.write("half"));
  }
  BOOST_TEST(slurp(path) == "old\n");
  BOOST_TEST((dir.names() == std::vector<std::string>{"ha.prom"}));
}

// Two writers replacing one file at the same time: every replacement succeeds, a reader only ever
// sees one writer's whole text, and no temporary file is left.
BOOST_AUTO_TEST_CASE(concurrent_writers_never_mix_or_fail) {
  TempDir dir;
  const auto path = dir.path / "ha.prom";
  const std::string texts[2] = {std::string(4096, 'a') + "\n", std::string(8192, 'b') + "\n"};
  BOOST_TEST_REQUIRE(replace_file(path.string(), texts[0], kPromFileMode));
  std::atomic<int> failures{0};
  std::atomic<int> torn{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      const std::string s = slurp(path);
      if (s != texts[0] && s != texts[1]) torn.fetch_add(1);
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 300; ++i)
        if (!replace_file(path.string(), texts[w], kPromFileMode)) failures.fetch_add(1);
    });
  for (auto& t : writers) t.join();
  done.store(true);
  reader.join();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(torn.load() == 0);
  BOOST_TEST((dir.names() == std::vector<std::string>{"ha.prom"}));
}

BOOST_AUTO_TEST_SUITE_END()
