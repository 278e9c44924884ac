// Package region keeps the local cluster's copies of remote regions'
// registries, as eureka-server's remote regions do (docs/regions.md).
//
// On the Raft leader only, a Syncer follows each configured region: a full
// fetch (GET {url}/apps) first, then the region's changes. A region served
// by heureka is followed by blocking queries on its delta (?index=&wait=),
// so a change there reaches this cluster within milliseconds; an
// eureka-server region by delta fetches at eureka-server's own interval.
// After every delta the copy's reconcile hash is compared with the
// region's, and a mismatch takes a full fetch again. What changed is
// written through the Raft log (fsm.CmdRegionUpdate, never to the AP
// journal), so every node serves the same copy and a restart finds it in
// the snapshot and log. A region that cannot be reached keeps its last
// copy, and its status (fsm.RegionStatus) says so on every node.
//
// The node is reached through the narrow Cluster interface. It imports
// eureka (the codec), fsm and internal/runtime/collect only.
package region
