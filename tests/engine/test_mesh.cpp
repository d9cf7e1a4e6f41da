// The device mesh's context- and expert-parallel dimensions: rank orders of four names, CP, EP,
// DP × CP and expert-data groups and the link each takes, under every one of the 24 rank orders
// on meshes small enough to check by hand (issue #13, "Mixture-of-experts and context
// parallelism").
#include <QtTest>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine/mesh.h"
#include "engine/model/model_setup.h"
#include "engine/schedule.h"

using namespace pipescope;

namespace {

/// Where a dimension sits in the order (0 = innermost).
int positionOf(const RankOrder &order, MeshDim dim) {
  return static_cast<int>(std::find(order.begin(), order.end(), dim) - order.begin());
}

std::string nameOf(const RankOrder &order) {
  Mesh mesh;
  mesh.cp = 2; // four names
  mesh.order = order;
  return mesh.orderName();
}

/// dp = cp = tp = pp = 2 on nodes of 4 GPUs: a rank is Σ coordinate · 2^position, and a node
/// holds the ranks that differ only in the two innermost positions. So a group of two along a
/// dimension stays in a node exactly when that dimension is one of the order's first two.
Mesh smallMesh(const RankOrder &order, int ep) {
  Mesh mesh;
  mesh.dp = 2, mesh.cp = 2, mesh.tp = 2, mesh.pp = 2, mesh.ep = ep;
  mesh.gpus_per_node = 4;
  mesh.order = order;
  return mesh;
}

LinkKind expectedLink(bool inside) {
  return inside ? LinkKind::Intra : LinkKind::Inter;
}

} // namespace

class TestMesh : public QObject {
  Q_OBJECT

private slots:
  void ordersHaveFourNamesWithCpAndThreeWithout() {
    // Three names (plans without CP): cp goes right after tp, and the name stays three long.
    auto old = Mesh::parseOrder("pp-tp-dp");
    QVERIFY(old);
    QCOMPARE(*old, (RankOrder{MeshDim::PP, MeshDim::TP, MeshDim::CP, MeshDim::DP}));
    Mesh mesh;
    mesh.order = *old;
    QCOMPARE(mesh.orderName(), std::string("pp-tp-dp"));
    mesh.cp = 2;
    QCOMPARE(mesh.orderName(), std::string("pp-tp-cp-dp"));
    QCOMPARE(Mesh{}.orderName(), std::string("tp-pp-dp")); // the default, tp-cp-pp-dp
    // With CP the order must say where the ring sits.
    auto refused = Mesh::parseOrder("tp-pp-dp", 2);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("does not place cp, but cp = 2; name all four") !=
                 std::string::npos,
             refused.error().message.c_str());
    for (const char *bad : {"tp-cp-pp", "tp-cp-pp-dp-dp", "tp-tp-pp-dp", "tp-xp-pp-dp", "", "tp-"})
      QVERIFY2(!Mesh::parseOrder(bad, 2), bad);
    QVERIFY(Mesh::parseOrder("cp-dp-pp-tp", 1)); // four names are fine without CP too

    const auto six = Mesh::allOrders(1);
    const auto all = Mesh::allOrders(2);
    QCOMPARE(six.size(), std::size_t(6));
    QCOMPARE(all.size(), std::size_t(24));
    std::set<std::string> names, short_names;
    for (const auto &order : all) {
      names.insert(nameOf(order));
      QCOMPARE(*Mesh::parseOrder(nameOf(order), 2), order); // every name parses back
    }
    for (const auto &order : six) {
      Mesh three;
      three.order = order;
      short_names.insert(three.orderName());
    }
    QCOMPARE(names.size(), std::size_t(24));
    QCOMPARE(short_names.size(), std::size_t(6));
  }

  void worldAndRefusals() {
    Mesh mesh;
    mesh.dp = 3, mesh.cp = 2, mesh.tp = 4, mesh.pp = 5, mesh.ep = 6;
    QCOMPARE(mesh.worldSize(), 3 * 2 * 4 * 5);
    QCOMPARE(mesh.dataCpSize(), 6);
    QCOMPARE(mesh.expertDataSize(), 1);
    QVERIFY(mesh.check());
    mesh.ep = 4;
    QVERIFY(!mesh.check());
    QVERIFY2(mesh.check().error().message.find("ep = 4 does not divide dp × cp = 3 × 2 = 6") !=
                 std::string::npos,
             mesh.check().error().message.c_str());
    mesh.ep = 1;
    mesh.cp = 0;
    QVERIFY(mesh.check().error().message.find("cp must be at least 1") != std::string::npos);
    mesh.cp = 1 << 12;
    mesh.dp = 1 << 12;
    QVERIFY(mesh.check().error().message.find("(dp × cp × tp × pp)") != std::string::npos);
  }

  // Every rank's coordinates round-trip, and each kind of group partitions the ranks, under every
  // order (dp = 3, cp = 2 and ep = 3: EP groups that do not line up with either dimension).
  void groupsPartitionTheRanksUnderEveryOrder() {
    for (const RankOrder &order : Mesh::allOrders(2)) {
      Mesh mesh;
      mesh.dp = 3, mesh.cp = 2, mesh.tp = 2, mesh.pp = 2, mesh.ep = 3;
      mesh.order = order;
      const int world = mesh.worldSize();
      for (int rank = 0; rank < world; ++rank)
        QCOMPARE(mesh.rankOf(mesh.coordsOf(rank)), rank);
      for (MeshGroup kind : {MeshGroup::TP, MeshGroup::CP, MeshGroup::PP, MeshGroup::DP,
                             MeshGroup::DataCP, MeshGroup::EP, MeshGroup::ExpertData}) {
        std::vector<int> seen(static_cast<std::size_t>(world), 0);
        for (int rank = 0; rank < world; ++rank) {
          const auto group = mesh.groupOf(kind, rank);
          QCOMPARE(static_cast<int>(group.size()), mesh.groupSize(kind));
          QVERIFY(std::find(group.begin(), group.end(), rank) != group.end());
          if (*std::min_element(group.begin(), group.end()) == rank) // each group once
            for (int member : group) {
              ++seen[static_cast<std::size_t>(member)];
              // Every member names the same group.
              QCOMPARE(mesh.groupOf(kind, member), group);
            }
        }
        for (int count : seen)
          QCOMPARE(count, 1);
      }
      // An EP group and an expert-data group meet in one rank; together they span dp × cp.
      for (int rank = 0; rank < world; ++rank) {
        const auto ep = mesh.groupOf(MeshGroup::EP, rank);
        const auto edp = mesh.groupOf(MeshGroup::ExpertData, rank);
        const auto dpcp = mesh.groupOf(MeshGroup::DataCP, rank);
        int shared = 0;
        for (int member : ep) {
          shared += std::count(edp.begin(), edp.end(), member) > 0 ? 1 : 0;
          QVERIFY(std::find(dpcp.begin(), dpcp.end(), member) != dpcp.end());
        }
        QCOMPARE(shared, 1);
        const RankCoords c = mesh.coordsOf(rank);
        for (int member : dpcp) { // the dp × cp group keeps p and t
          QCOMPARE(mesh.coordsOf(member).p, c.p);
          QCOMPARE(mesh.coordsOf(member).t, c.t);
        }
      }
    }
  }

  // Expert tensor parallelism below tp (MoE parallel folding): under every order, EP and
  // expert-data groups partition the ranks, an EP group meets its expert-data group in one rank,
  // both keep the pipeline rank, and together they span the stage's tp × dp × cp ranks over etp.
  void expertFoldingOverTpPartitionsTheStage() {
    for (int etp : {1, 2})
      for (const RankOrder &order : Mesh::allOrders(2)) {
        Mesh mesh;
        mesh.dp = 3, mesh.cp = 2, mesh.tp = 4, mesh.pp = 2, mesh.ep = 6, mesh.etp = etp;
        mesh.order = order;
        QVERIFY2(mesh.check(), mesh.check() ? "" : mesh.check().error().message.c_str());
        QCOMPARE(mesh.expertDataSize(), 3 * 2 * 4 / (etp * 6));
        const int world = mesh.worldSize();
        for (MeshGroup kind : {MeshGroup::EP, MeshGroup::ExpertData}) {
          std::vector<int> seen(static_cast<std::size_t>(world), 0);
          for (int rank = 0; rank < world; ++rank) {
            const auto group = mesh.groupOf(kind, rank);
            QCOMPARE(static_cast<int>(group.size()), mesh.groupSize(kind));
            if (*std::min_element(group.begin(), group.end()) == rank)
              for (int member : group) {
                ++seen[static_cast<std::size_t>(member)];
                QCOMPARE(mesh.groupOf(kind, member), group);
                QCOMPARE(mesh.coordsOf(member).p, mesh.coordsOf(rank).p);
              }
          }
          for (int count : seen)
            QCOMPARE(count, 1);
        }
        for (int rank = 0; rank < world; ++rank) {
          const auto ep = mesh.groupOf(MeshGroup::EP, rank);
          const auto edp = mesh.groupOf(MeshGroup::ExpertData, rank);
          int shared = 0;
          std::set<int> experts;
          for (int member : ep) {
            shared += std::count(edp.begin(), edp.end(), member) > 0 ? 1 : 0;
            experts.insert(mesh.expertIndexOf(mesh.coordsOf(member)));
          }
          QCOMPARE(shared, 1);
          QCOMPARE(static_cast<int>(experts.size()), mesh.ep); // each 1/ep of the experts once
        }
      }
    // Megatron's order with pp outermost and etp = 1: EP groups are ep consecutive ranks, so
    // EP 8 of a tp 2 × dp 4 stage is one node.
    Mesh megatron;
    megatron.dp = 4, megatron.tp = 2, megatron.pp = 2, megatron.ep = 8, megatron.etp = 1;
    megatron.order = *Mesh::parseOrder("tp-cp-dp-pp", 1);
    QCOMPARE(megatron.groupOf(MeshGroup::EP, 9), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
    QVERIFY(megatron.groupInsideNode(MeshGroup::EP, 0));
    // etp must divide tp; below tp, ep must divide tp × dp × cp / etp.
    megatron.etp = 3;
    QVERIFY(!megatron.check());
    QVERIFY(megatron.check().error().message.find("etp = 3 does not divide tp = 2") !=
            std::string::npos);
    megatron.etp = 1, megatron.ep = 16;
    QVERIFY(!megatron.check());
    QVERIFY(megatron.check().error().message.find("dp × cp × tp / etp") != std::string::npos);
  }

  // The hand rule of smallMesh, under each of the 24 orders: the CP pair is inside a node when
  // cp is among the first two names; EP = 2 pairs up the folded dp·cp neighbours, which vary
  // whichever of cp and dp the order names first; the expert-data pair varies the other one;
  // the dp × cp group of four is inside a node only when cp and dp are the first two names.
  void groupLinksUnderEveryOrder() {
    int checked = 0;
    for (const RankOrder &order : Mesh::allOrders(2)) {
      const Mesh mesh = smallMesh(order, 2);
      const std::string name = nameOf(order);
      const int cp_at = positionOf(order, MeshDim::CP), dp_at = positionOf(order, MeshDim::DP);
      const int tp_at = positionOf(order, MeshDim::TP);
      const int ep_at = std::min(cp_at, dp_at), edp_at = std::max(cp_at, dp_at);
      // Rank 0's groups, by hand: its partner along a dimension at position k is rank 2^k.
      QCOMPARE(mesh.groupOf(MeshGroup::CP, 0), (std::vector<int>{0, 1 << cp_at}));
      QCOMPARE(mesh.groupOf(MeshGroup::EP, 0), (std::vector<int>{0, 1 << ep_at}));
      QCOMPARE(mesh.groupOf(MeshGroup::ExpertData, 0), (std::vector<int>{0, 1 << edp_at}));
      auto dpcp = mesh.groupOf(MeshGroup::DataCP, 0);
      std::sort(dpcp.begin(), dpcp.end());
      QCOMPARE(dpcp, (std::vector<int>{0, 1 << ep_at, 1 << edp_at, (1 << cp_at) + (1 << dp_at)}));

      const MeshLinks links = meshLinks(mesh);
      QCOMPARE(links.cp.size(), std::size_t(2));
      for (std::size_t p = 0; p < 2; ++p) {
        QVERIFY2(links.tp[p] == expectedLink(tp_at < 2), name.c_str());
        QVERIFY2(links.cp[p] == expectedLink(cp_at < 2), name.c_str());
        QVERIFY2(links.ep[p] == expectedLink(ep_at < 2), name.c_str());
        QVERIFY2(links.expert_dp[p] == expectedLink(edp_at < 2), name.c_str());
        QVERIFY2(links.dp_cp[p] == expectedLink(edp_at < 2), name.c_str());
      }
      QVERIFY(mesh.groupInsideNode(MeshGroup::CP, 0) == (cp_at < 2));
      QVERIFY(mesh.groupInsideNode(MeshGroup::EP, 0) == (ep_at < 2));

      // EP = 4 takes the whole dp × cp group; nothing is left for the expert-data group.
      const MeshLinks whole = meshLinks(smallMesh(order, 4));
      QVERIFY2(whole.ep[0] == links.dp_cp[0], name.c_str());
      QVERIFY2(whole.expert_dp[0] == LinkKind::None, name.c_str());
      ++checked;
    }
    QCOMPARE(checked, 24);
  }

  // Groups that are inside a node for some ranks and across for others are mixed: dp = 3 on
  // nodes of 4 GPUs under cp-dp-tp-pp puts folded indices 0..3 (= ranks) on node 0 and 4, 5 on
  // node 1, so EP = 3 groups {0, 1, 2} stay in and {3, 4, 5} cross; the expert-data pairs
  // {0, 3} stay in and {1, 4}, {2, 5} cross; the CP pairs {0, 1}, {2, 3}, {4, 5} all stay in.
  void unevenGroupsAreMixed() {
    Mesh mesh;
    mesh.dp = 3, mesh.cp = 2, mesh.tp = 1, mesh.pp = 1, mesh.ep = 3, mesh.gpus_per_node = 4;
    mesh.order = *Mesh::parseOrder("cp-dp-tp-pp", 2);
    QCOMPARE(mesh.groupOf(MeshGroup::EP, 0), (std::vector<int>{0, 1, 2}));
    QCOMPARE(mesh.groupOf(MeshGroup::EP, 5), (std::vector<int>{3, 4, 5}));
    QCOMPARE(meshLinks(mesh).ep[0], LinkKind::Mixed);
    QCOMPARE(mesh.groupOf(MeshGroup::ExpertData, 1), (std::vector<int>{1, 4}));
    QCOMPARE(meshLinks(mesh).expert_dp[0], LinkKind::Mixed);
    QCOMPARE(meshLinks(mesh).cp[0], LinkKind::Intra);
    QCOMPARE(meshLinks(mesh).dp_cp[0], LinkKind::Inter);
  }

  // The costs take those links: under each order, Mixtral's EP all-to-all is priced on the
  // intra- or inter-node link as the hand rule says, and the CP ring (on a slow network) shows
  // only where it crosses nodes.
  void costsFollowTheGroupLinksUnderEveryOrder() {
    auto model = loadModelSpec("mixtral-8x7b");
    auto hardware = loadHardwareSpec("h100-sxm");
    QVERIFY(model && hardware);
    ModelSetup setup{*model, *hardware, {}};
    setup.hardware.inter_node_gbps = 0.5; // so the ring outlasts attention across nodes
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    double intra_ep = -1, inter_ep = -1;
    for (const RankOrder &order : Mesh::allOrders(2)) {
      const Mesh mesh = smallMesh(order, 2);
      const std::string name = nameOf(order);
      auto derived = deriveModelCosts(setup, mesh, schedule->placement);
      QVERIFY2(derived, derived ? name.c_str() : derived.error().message.c_str());
      const auto &forward = derived->stage_breakdown[0].forward;
      const bool ep_inside =
          std::min(positionOf(order, MeshDim::CP), positionOf(order, MeshDim::DP)) < 2;
      double &reference = ep_inside ? intra_ep : inter_ep;
      if (reference < 0) reference = forward.ep_us;
      QVERIFY2(forward.ep_us == reference, name.c_str());
      const bool cp_inside = positionOf(order, MeshDim::CP) < 2;
      QVERIFY2((forward.cp_us > 0) == !cp_inside, name.c_str());
    }
    QVERIFY(intra_ep > 0 && inter_ep > intra_ep);
  }
};

QTEST_GUILESS_MAIN(TestMesh)
#include "test_mesh.moc"
