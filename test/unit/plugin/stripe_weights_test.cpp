// The striping weights file (stripe_weights.hpp): what a line may say, and what a file must be to
// be read at all - with real files, symbolic links, FIFOs and modes in a temporary directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/stripe_weights.hpp"

using namespace nccl_ha::plugin;

namespace {

bool says(const nccl_ha::Error& e, const std::string& what) { return e.message.find(what) != std::string::npos; }

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/ha-weights-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    BOOST_REQUIRE(p);
    path = p;
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const std::string f = path + "/" + name;
    {
      std::ofstream out(f, std::ios::trunc);
      out << text;
    }
    BOOST_REQUIRE(::chmod(f.c_str(), mode) == 0);
    return f;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(stripe_weights)

BOOST_AUTO_TEST_CASE(lines_as_documented) {
  const auto e = parse_weights(
      "# weights by the agent\n"
      "mlx5_0 3\n"
      "mlx5_1:1=1   # a comment after the weight\n"
      "\n"
      "  rxe2:2\t0\r\n"
      "rxe-3.x_y  1048576");  // no newline at the end
  BOOST_REQUIRE(e.ok());
  BOOST_REQUIRE(e->size() == 4u);
  BOOST_TEST(((*e)[0] == WeightEntry{"mlx5_0", 0, 3}));
  BOOST_TEST(((*e)[1] == WeightEntry{"mlx5_1", 1, 1}));
  BOOST_TEST(((*e)[2] == WeightEntry{"rxe2", 2, 0}));
  BOOST_TEST(((*e)[3] == WeightEntry{"rxe-3.x_y", 0, kMaxStripeWeight}));
  BOOST_TEST(parse_weights("").ok());
  BOOST_TEST(parse_weights("\n# nothing\n\n").value().empty());
}

BOOST_AUTO_TEST_CASE(every_bad_line_refuses_the_file) {
  struct Case {
    std::string text;
    const char* says;
  };
  const Case cases[] = {
      {"mlx5_0\n", "line 1: no weight"},
      {"mlx5_0 3\nmlx5_1 -1\n", "line 2: weight '-1'"},
      {"mlx5_0 1048577\n", "not an integer in 0..1048576"},
      {"mlx5_0 3x\n", "weight '3x'"},
      {"mlx5_0 3 4\n", "weight '3 4'"},
      {"mlx5_0 99999999999999999999\n", "is not an integer"},
      {"mlx5_0:0 3\n", "port '0' is not 1..255"},
      {"mlx5_0:256 3\n", "port '256'"},
      {"mlx5_0: 3\n", "port ''"},
      {"mlx/5 3\n", "'mlx/5' is not a device name"},
      {"../../etc 3\n", "is not a device name"},
      {":1 3\n", "'' is not a device name"},
      {std::string(65, 'a') + " 3\n", "is not a device name"},
      {"mlx5_0 3\n\nmlx5_0 4\n", "line 3: mlx5_0 named twice"},
      {"mlx5_0:1 3\nmlx5_0:1=4\n", "mlx5_0:1 named twice"},
      {std::string("mlx5_0 3\0\n", 10), "a NUL byte"},
  };
  for (const auto& k : cases) {
    const auto e = parse_weights(k.text);
    BOOST_REQUIRE_MESSAGE(!e.ok(), k.text);
    BOOST_TEST(says(e.error(), k.says), e.error().message << " for " << k.text);
  }
  // The same device on different ports, and a device with and without a port, are different entries.
  BOOST_TEST(parse_weights("mlx5_0:1 3\nmlx5_0:2 3\nmlx5_0 1\n").value().size() == 3u);
  std::string many;
  for (int i = 0; i <= static_cast<int>(kMaxWeightEntries); ++i) many += "d" + std::to_string(i) + " 1\n";
  const auto too_many = parse_weights(many);
  BOOST_REQUIRE(!too_many.ok());
  BOOST_TEST(says(too_many.error(), "more than 256 entries"), too_many.error().message);
}

// What a file must be to be read: regular, not a symbolic link, owned by this user or root,
// writable by no one else, small.
BOOST_AUTO_TEST_CASE(only_a_trusted_file_is_read) {
  TempDir d;
  const uid_t me = ::geteuid();
  const std::string good = d.write("weights", "rxe0 1\n");
  BOOST_TEST(read_trusted_file(good, me).value() == "rxe0 1\n");

  // A symbolic link planted at the name, even to a good file: refused, not followed.
  const std::string link = d.path + "/link";
  BOOST_REQUIRE(::symlink(good.c_str(), link.c_str()) == 0);
  auto r = read_trusted_file(link, me);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(says(r.error(), "symbolic link"), r.error().message);

  // A FIFO (no writer: a blocking open would hang the reader), a directory.
  const std::string fifo = d.path + "/fifo";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  r = read_trusted_file(fifo, me);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(says(r.error(), "not a regular file"), r.error().message);
  r = read_trusted_file(d.path, me);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(says(r.error(), "not a regular file"), r.error().message);

  // Writable by group or others: anyone could steer the split.
  for (mode_t mode : {0620, 0602, 0666}) {
    const std::string loose = d.write("loose", "rxe0 1\n", mode);
    r = read_trusted_file(loose, me);
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(says(r.error(), "writable by group or others"), r.error().message);
  }
  BOOST_TEST(read_trusted_file(d.write("readable", "rxe0 1\n", 0644), me).ok());

  // Another user's file. As root the file is given away; otherwise the reader claims another uid.
  const std::string theirs = d.write("theirs", "rxe0 1\n");
  uid_t reader = me + 1;
  if (me == 0) {
    BOOST_REQUIRE(::chown(theirs.c_str(), 4242, static_cast<gid_t>(-1)) == 0);
    reader = 0;
    r = read_trusted_file(theirs, reader);
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(says(r.error(), "owned by uid 4242"), r.error().message);
    reader = 4243;  // and root's own files are trusted by any user
    BOOST_TEST(read_trusted_file(good, reader).ok());
  } else {
    r = read_trusted_file(theirs, reader);
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(says(r.error(), "owned by uid"), r.error().message);
  }

  // Too large; missing.
  const std::string big = d.write("big", std::string(kMaxWeightsFileBytes + 1, '#'));
  r = read_trusted_file(big, me);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(says(r.error(), "at most 65536"), r.error().message);
  BOOST_TEST(read_trusted_file(d.write("full", std::string(kMaxWeightsFileBytes, '#')), me).ok());
  r = read_trusted_file(d.path + "/none", me);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(static_cast<int>(r.error().code) == static_cast<int>(nccl_ha::Errc::not_found));
}

// Polling: the first look reports the file; nothing until it changes; a change, a planted link,
// a removal (once) and a return are each reported.
BOOST_AUTO_TEST_CASE(a_poll_reports_each_change_once) {
  TempDir d;
  const std::string path = d.path + "/weights";
  WeightsFile f(path);
  auto c = f.poll();  // missing at first
  BOOST_REQUIRE(c.has_value());
  BOOST_TEST(!c->entries.has_value());
  BOOST_TEST(c->error.find("No such file") != std::string::npos, c->error);
  BOOST_TEST(!f.poll().has_value());  // still missing: said once

  d.write("weights", "rxe0 3\nrxe1 1\n");
  c = f.poll();
  BOOST_REQUIRE(c.has_value());
  BOOST_REQUIRE(c->entries.has_value());
  BOOST_TEST(c->entries->size() == 2u);
  BOOST_TEST(!f.poll().has_value());

  d.write("weights", "rxe0 1\nrxe1 1\nrxe2 2\n");
  c = f.poll();
  BOOST_REQUIRE(c.has_value() && c->entries.has_value());
  BOOST_TEST(c->entries->size() == 3u);

  d.write("weights", "rxe0 one\n");
  c = f.poll();
  BOOST_REQUIRE(c.has_value());
  BOOST_TEST(!c->entries.has_value());
  BOOST_TEST(c->error.find("line 1") != std::string::npos, c->error);
  BOOST_TEST(!f.poll().has_value());

  const std::string elsewhere = d.write("other", "rxe0 9\n");
  BOOST_REQUIRE(::unlink(path.c_str()) == 0);
  BOOST_REQUIRE(::symlink(elsewhere.c_str(), path.c_str()) == 0);
  c = f.poll();
  BOOST_REQUIRE(c.has_value());
  BOOST_TEST(!c->entries.has_value());
  BOOST_TEST(c->error.find("symbolic link") != std::string::npos, c->error);

  BOOST_REQUIRE(::unlink(path.c_str()) == 0);
  c = f.poll();
  BOOST_REQUIRE(c.has_value());
  BOOST_TEST(!c->entries.has_value());
  BOOST_TEST(!f.poll().has_value());
  d.write("weights", "rxe1 5\n");
  c = f.poll();
  BOOST_REQUIRE(c.has_value() && c->entries.has_value());
  BOOST_TEST(((*c->entries)[0] == WeightEntry{"rxe1", 0, 5}));
}

// A port's own line wins over its device's; neither: its speed (at least 1); a weight of 0 stays 0.
BOOST_AUTO_TEST_CASE(a_port_weighs_its_line_else_its_device_else_its_speed) {
  const std::vector<WeightEntry> e{{"mlx5_0", 0, 7}, {"mlx5_0", 2, 3}, {"rxe1", 1, 0}};
  BOOST_TEST(weight_for(e, "mlx5_0", 1, 400000) == 7u);
  BOOST_TEST(weight_for(e, "mlx5_0", 2, 400000) == 3u);
  BOOST_TEST(weight_for(e, "rxe1", 1, 2500) == 0u);
  BOOST_TEST(weight_for(e, "rxe1", 2, 2500) == 2500u);  // another port of that device
  BOOST_TEST(weight_for(e, "rxe0", 1, 2500) == 2500u);
  BOOST_TEST(weight_for(e, "mlx5_00", 1, 100) == 100u);  // names match whole
  BOOST_TEST(weight_for({}, "rxe0", 1, 0) == 1u);
  BOOST_TEST(weight_for({}, "rxe0", 1, -5) == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
