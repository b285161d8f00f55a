// classify_async_event: the pure mapping from ibv_async_event to DeviceEvent, on fixtures.
// (AsyncEventPump itself needs a real device context and is covered by the VM tests.)
#include <boost/test/unit_test.hpp>
#include <set>
#include <string>

#include "nccl_ha/reactor/async_events.hpp"

using namespace nccl_ha::reactor;

namespace {

struct Case {
  ibv_event_type type;
  DeviceEventKind kind;
  EventScope scope;
};

const Case kPortCases[] = {
    {IBV_EVENT_PORT_ACTIVE, DeviceEventKind::port_active, EventScope::port},
    {IBV_EVENT_PORT_ERR, DeviceEventKind::port_error, EventScope::port},
    {IBV_EVENT_GID_CHANGE, DeviceEventKind::gid_change, EventScope::port},
    {IBV_EVENT_LID_CHANGE, DeviceEventKind::lid_change, EventScope::port},
    {IBV_EVENT_PKEY_CHANGE, DeviceEventKind::pkey_change, EventScope::port},
    {IBV_EVENT_SM_CHANGE, DeviceEventKind::sm_change, EventScope::port},
    {IBV_EVENT_CLIENT_REREGISTER, DeviceEventKind::client_reregister, EventScope::port},
};

const Case kQpCases[] = {
    {IBV_EVENT_QP_FATAL, DeviceEventKind::qp_fatal, EventScope::qp},
    {IBV_EVENT_QP_REQ_ERR, DeviceEventKind::qp_request_error, EventScope::qp},
    {IBV_EVENT_QP_ACCESS_ERR, DeviceEventKind::qp_access_error, EventScope::qp},
    {IBV_EVENT_QP_LAST_WQE_REACHED, DeviceEventKind::qp_last_wqe_reached, EventScope::qp},
    {IBV_EVENT_COMM_EST, DeviceEventKind::comm_established, EventScope::qp},
    {IBV_EVENT_SQ_DRAINED, DeviceEventKind::sq_drained, EventScope::qp},
    {IBV_EVENT_PATH_MIG, DeviceEventKind::path_migrated, EventScope::qp},
    {IBV_EVENT_PATH_MIG_ERR, DeviceEventKind::path_migration_error, EventScope::qp},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(async_event_classification)

BOOST_AUTO_TEST_CASE(port_events_carry_the_port_number) {
  for (const auto& c : kPortCases) {
    BOOST_TEST_CONTEXT("event " << c.type) {
      ibv_async_event ev{};
      ev.event_type = c.type;
      ev.element.port_num = 2;
      const auto out = classify_async_event(ev, "mlx5_1");
      BOOST_TEST((out.kind == c.kind));
      BOOST_TEST((out.scope == c.scope));
      BOOST_TEST(out.port == 2u);
      BOOST_TEST(out.qp_num == 0u);
      BOOST_TEST(out.cq == nullptr);
      BOOST_TEST(out.device == "mlx5_1");
      BOOST_TEST(out.raw_type == static_cast<int>(c.type));
    }
  }
}

BOOST_AUTO_TEST_CASE(qp_events_carry_the_qp_number) {
  for (const auto& c : kQpCases) {
    BOOST_TEST_CONTEXT("event " << c.type) {
      ibv_qp qp{};
      qp.qp_num = 0xabcdef;
      ibv_async_event ev{};
      ev.event_type = c.type;
      ev.element.qp = &qp;
      const auto out = classify_async_event(ev, "rxe0");
      BOOST_TEST((out.kind == c.kind));
      BOOST_TEST((out.scope == EventScope::qp));
      BOOST_TEST(out.qp_num == 0xabcdefu);
      BOOST_TEST(out.port == 0u);
      BOOST_TEST(out.device == "rxe0");
      BOOST_TEST(out.raw_type == static_cast<int>(c.type));

      ev.element.qp = nullptr;  // defensive: no QP pointer
      BOOST_TEST(classify_async_event(ev, "rxe0").qp_num == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(cq_error_carries_the_cq_identity) {
  ibv_cq cq{};
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_CQ_ERR;
  ev.element.cq = &cq;
  const auto out = classify_async_event(ev, "rxe0");
  BOOST_TEST((out.kind == DeviceEventKind::cq_error));
  BOOST_TEST((out.scope == EventScope::cq));
  BOOST_TEST(out.cq == &cq);
  BOOST_TEST(out.qp_num == 0u);
  BOOST_TEST(out.port == 0u);
}

BOOST_AUTO_TEST_CASE(srq_device_and_wq_events) {
  ibv_srq srq{};
  ibv_async_event ev{};
  ev.element.srq = &srq;
  ev.event_type = IBV_EVENT_SRQ_ERR;
  auto out = classify_async_event(ev, "d");
  BOOST_TEST((out.kind == DeviceEventKind::srq_error));
  BOOST_TEST((out.scope == EventScope::srq));
  ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
  out = classify_async_event(ev, "d");
  BOOST_TEST((out.kind == DeviceEventKind::srq_limit_reached));
  BOOST_TEST((out.scope == EventScope::srq));

  ibv_async_event dev{};
  dev.event_type = IBV_EVENT_DEVICE_FATAL;
  out = classify_async_event(dev, "mlx5_0");
  BOOST_TEST((out.kind == DeviceEventKind::device_fatal));
  BOOST_TEST((out.scope == EventScope::device));
  BOOST_TEST(out.device == "mlx5_0");

  ibv_async_event wq{};
  wq.event_type = IBV_EVENT_WQ_FATAL;
  out = classify_async_event(wq, "mlx5_0");
  BOOST_TEST((out.kind == DeviceEventKind::wq_fatal));
}

BOOST_AUTO_TEST_CASE(unknown_event_types_are_other) {
  ibv_async_event ev{};
  // A type this rdma-core does not know yet. It must stay inside the enum's value range (0..31
  // here): anything wider is undefined behaviour in C++ before the library even sees it.
  ev.event_type = static_cast<ibv_event_type>(31);
  ev.element.port_num = 1;
  const auto out = classify_async_event(ev, "x");
  BOOST_TEST((out.kind == DeviceEventKind::other));
  BOOST_TEST((out.scope == EventScope::device));
  BOOST_TEST(out.raw_type == 31);
  BOOST_TEST(out.port == 0u);
}

BOOST_AUTO_TEST_CASE(every_kind_has_a_distinct_name) {
  std::set<std::string> names;
  const int last = static_cast<int>(DeviceEventKind::other);
  for (int k = 0; k <= last; ++k) {
    const char* n = to_string(static_cast<DeviceEventKind>(k));
    BOOST_REQUIRE(n != nullptr);
    BOOST_TEST(std::string(n) != "?");
    BOOST_TEST(!std::string(n).empty());
    names.insert(n);
  }
  BOOST_TEST(names.size() == static_cast<std::size_t>(last + 1));
  BOOST_TEST(std::string(to_string(DeviceEventKind::port_error)) == "port error");
}

BOOST_AUTO_TEST_SUITE_END()
