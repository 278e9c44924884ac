package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// variedRegs returns n registrations spread over apps applications, with the
// fields real clients vary: statuses, ports, metadata, VIPs, Amazon data
// centers (some identified only by their Amazon instance-id), lease
// durations, group and ASG names.
func variedRegs(n, apps int, prefix string) []reg {
	statuses := []string{"UP", "DOWN", "STARTING"}
	baseTs := time.Now().UnixMilli() - 1_000_000
	regs := make([]reg, 0, n)
	for i := range n {
		app := fmt.Sprintf("%s-svc-%02d", prefix, i%apps)
		port := 8000 + i%997
		ip := fmt.Sprintf("10.%d.%d.%d", 1+i%7, (i/256)%256, i%256)
		id := fmt.Sprintf("%s:%s:%d", ip, app, port) // Spring's default id shape
		if i%2 == 1 {
			id = fmt.Sprintf("%s-i%04d", app, i)
		}
		extra := map[string]any{
			"ipAddr":     ip,
			"status":     statuses[i%len(statuses)],
			"port":       map[string]any{"$": port, "@enabled": "true"},
			"securePort": map[string]any{"$": 9000 + i%50, "@enabled": fmt.Sprint(i%4 == 0)},
			"metadata": map[string]any{
				"zone":            fmt.Sprintf("zone-%d", i%3),
				"version":         fmt.Sprintf("1.%d.%d", i%5, i),
				"management.port": fmt.Sprint(port + 1),
				"team":            []string{"payments", "search", "core"}[i%3],
			},
			"leaseInfo": map[string]any{
				// Long leases: nothing may expire while the test runs.
				"renewalIntervalInSecs": 10 + 10*(i%3),
				"durationInSecs":        600 + 60*(i%5),
				"registrationTimestamp": 0,
				"lastRenewalTimestamp":  0,
				"evictionTimestamp":     0,
				"serviceUpTimestamp":    0,
			},
			"vipAddress":         strings.ToLower(app),
			"lastDirtyTimestamp": fmt.Sprint(baseTs + int64(i)),
		}
		if i%5 == 0 {
			extra["vipAddress"] = strings.ToLower(app) + ",all-services"
			extra["secureVipAddress"] = nil
			extra["appGroupName"] = "GROUP-" + fmt.Sprint(i%4)
		}
		if i%7 == 0 {
			extra["dataCenterInfo"] = map[string]any{
				"@class": "com.netflix.appinfo.AmazonInfo",
				"name":   "Amazon",
				"metadata": map[string]any{
					"instance-id":       fmt.Sprintf("i-%017x", 0xabc000+i),
					"availability-zone": []string{"us-east-1a", "us-east-1b", "us-east-1c"}[i%3],
					"local-ipv4":        ip,
					"instance-type":     "m5.large",
					"ami-id":            "ami-0fedcba9876543210",
				},
			}
			extra["asgName"] = app + "-v001"
			if i%14 == 0 {
				// No instanceId: the registry key is the Amazon instance-id.
				extra["instanceId"] = nil
			}
		}
		regs = append(regs, reg{app: app, id: id, extra: extra})
	}
	return regs
}

// withoutLastRenewal returns the instance document with
// instance.leaseInfo.lastRenewalTimestamp removed, re-encoded canonically,
// and the removed value.
func withoutLastRenewal(body []byte) ([]byte, json.Number, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, "", err
	}
	inst, _ := doc["instance"].(map[string]any)
	lease, _ := inst["leaseInfo"].(map[string]any)
	ts, _ := lease["lastRenewalTimestamp"].(json.Number)
	delete(lease, "lastRenewalTimestamp")
	out, err := json.Marshal(doc)
	return out, ts, err
}

// notEarlier reports whether timestamp a is at or after b.
func notEarlier(a, b json.Number) bool {
	x, errA := a.Int64()
	y, errB := b.Int64()
	return errA == nil && errB == nil && x >= y
}

// TestSingleNodeRestartKeepsEverything registers 1,000 varied instances on a
// single node, kills it with SIGKILL, restarts it on the same data dir and
// checks that every instance reads back exactly as before.
func TestSingleNodeRestartKeepsEverything(t *testing.T) {
	c := StartCluster(t, 1, Options{ExtraArgs: cacheArgs})
	n1 := c.WaitLeader(t, 10*time.Second)

	regs := variedRegs(1000, 20, "restart")
	start := time.Now()
	registerAll(t, n1.BaseURL(), regs, 16)
	t.Logf("registered %d instances in %v", len(regs), time.Since(start))

	want := keySet(regs)
	if got := len(slices.Compact(slices.Clone(want))); got != len(regs) {
		t.Fatalf("test bug: %d distinct keys for %d registrations", got, len(regs))
	}
	before := waitAppsKeys(t, n1, want, 10*time.Second)
	bodies := make(map[string][]byte, len(regs))
	for _, r := range regs {
		code, body := getInstance(t, n1, r)
		if code != http.StatusOK {
			t.Fatalf("GET %s before restart: %d %q", r.instanceURL(n1), code, body)
		}
		bodies[r.key()] = body
	}

	n1.Kill()
	n1.Restart(t)
	c.WaitLeader(t, 10*time.Second)
	after := waitAppsKeys(t, n1, want, 20*time.Second)
	if got, exp := len(after.Instances), 1000; got != exp {
		t.Fatalf("instances after restart = %d, want %d", got, exp)
	}
	if st := n1.Status(t); st.Instances != 1000 {
		t.Errorf("/v1/status instances = %d, want 1000", st.Instances)
	}

	// Instance documents must come back byte for byte. The one field allowed
	// to differ is leaseInfo.lastRenewalTimestamp: docs/design.md, "Leases"
	// gives every lease a full duration of grace when a cluster
	// restarts, and a server may implement that by moving the renewal time
	// forward (never backward). Everything else, including
	// registrationTimestamp, lastUpdatedTimestamp, lastDirtyTimestamp and
	// actionType, is replicated state and must be unchanged.
	identical, graced := 0, 0
	for _, r := range regs {
		code, body := getInstance(t, n1, r)
		if code != http.StatusOK {
			t.Errorf("GET %s after restart: %d %q", r.instanceURL(n1), code, body)
			continue
		}
		old := bodies[r.key()]
		if bytes.Equal(old, body) {
			identical++
			continue
		}
		a, tsOld, errA := withoutLastRenewal(old)
		b, tsNew, errB := withoutLastRenewal(body)
		if errA != nil || errB != nil || !bytes.Equal(a, b) || !notEarlier(tsNew, tsOld) {
			t.Errorf("%s changed across restart:\nbefore: %s\nafter:  %s", r.key(), old, body)
			continue
		}
		graced++
	}
	t.Logf("after restart: %d instance documents byte-identical, %d differing only in a later leaseInfo.lastRenewalTimestamp", identical, graced)

	// The full registry lists the same instance documents.
	beforeRaw := before.ByKey()
	for _, in := range after.Instances {
		old := beforeRaw[in.Key()].Raw
		if bytes.Equal(old, in.Raw) {
			continue
		}
		a, _, errA := withoutLastRenewal([]byte(`{"instance":` + string(old) + `}`))
		b, _, errB := withoutLastRenewal([]byte(`{"instance":` + string(in.Raw) + `}`))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("GET /eureka/apps: %s changed across restart:\nbefore: %s\nafter:  %s", in.Key(), old, in.Raw)
		}
	}
	if before.HashCode != after.HashCode {
		t.Errorf("apps__hashcode = %q after restart, %q before", after.HashCode, before.HashCode)
	}
}

// memberProblems lists what is wrong with GET /v1/members on nd, given
// that c's live nodes are the members and leader leads.
func memberProblems(c *Cluster, nd, leader *Node) []string {
	code, body, _, err := TryDo("GET", nd.URL("/v1/members"), nil)
	if err != nil || code != http.StatusOK {
		return []string{fmt.Sprintf("GET /v1/members: %d %q %v", code, body, err)}
	}
	var m Members
	if err := json.Unmarshal(body, &m); err != nil {
		return []string{fmt.Sprintf("GET /v1/members: %v in %s", err, body)}
	}
	var problems []string
	if got, exp := len(m.Members), len(c.Nodes); got != exp {
		problems = append(problems, fmt.Sprintf("%d members, want %d", got, exp))
	}
	for _, mb := range m.Members {
		want := c.Node(mb.ID)
		switch {
		case want == nil:
			problems = append(problems, fmt.Sprintf("unknown member %+v", mb))
		case mb.RaftAddr != want.RaftAddr || mb.HTTPAddr != want.HTTPAddr || !mb.Voter || mb.Leader != (want == leader):
			problems = append(problems, fmt.Sprintf("%+v, want raft_addr %s http_addr %s voter leader=%v",
				mb, want.RaftAddr, want.HTTPAddr, want == leader))
		}
	}
	return problems
}

// TestThreeNodesForwardFailoverCatchUp writes through a follower, kills the
// leader, checks a new one is elected quickly and takes writes, then restarts
// the old leader and checks all three nodes converge on one registry.
func TestThreeNodesForwardFailoverCatchUp(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: cacheArgs})
	leader := c.WaitLeader(t, 15*time.Second)
	follower := c.Followers(leader)[0]

	var regs []reg
	for i := range 5 {
		regs = append(regs, reg{app: "forwarded", id: fmt.Sprintf("fwd-%d", i)})
	}
	registerAll(t, follower.BaseURL(), regs, 1)
	for _, nd := range c.Nodes {
		for _, r := range regs {
			WaitFor(t, 10*time.Second, func() bool {
				code, _, _, err := TryDo("GET", r.instanceURL(nd), nil)
				return err == nil && code == http.StatusOK
			}, fmt.Sprintf("%s readable on %s", r.key(), nd.ID))
		}
	}

	// Every node names itself and the leader in its headers and its member list.
	_, _, hdr := Do(t, "GET", follower.URL("/eureka/apps"), nil)
	checkNodeHeaders(t, "GET /eureka/apps on follower", hdr, follower.ID, leader.ID)
	// Members record their own HTTP address through the log shortly after
	// start-up, so the list is polled briefly.
	var problems []string
	ok := Eventually(5*time.Second, func() bool {
		problems = memberProblems(c, follower, leader)
		return len(problems) == 0
	})
	if !ok {
		t.Errorf("/v1/members on %s still wrong after 5s: %s", follower.ID, strings.Join(problems, "; "))
	}

	// A paused (SIGSTOP) follower does not stop writes; it catches up once
	// resumed (checked with everything else at the end).
	paused := c.Followers(leader)[1]
	paused.Pause()
	var whilePaused []reg
	for i := range 2 {
		whilePaused = append(whilePaused, reg{app: "while-paused", id: fmt.Sprintf("p-%d", i)})
	}
	registerAll(t, follower.BaseURL(), whilePaused, 1)
	regs = append(regs, whilePaused...)
	paused.Resume()
	leader = c.WaitLeader(t, 15*time.Second)

	// Kill the leader; the other two elect a new one within 5 s.
	old := leader
	killed := time.Now()
	old.Kill()
	leader = c.WaitLeader(t, 15*time.Second)
	elected := time.Since(killed)
	t.Logf("new leader %s elected %v after SIGKILL of %s", leader.ID, elected, old.ID)
	if leader == old {
		t.Fatalf("killed node %s still reported as leader", old.ID)
	}
	if elected > 5*time.Second {
		t.Errorf("new leader took %v to be elected, want ≤ 5s", elected)
	}

	// Writes continue through both remaining nodes.
	for _, nd := range c.Live() {
		var more []reg
		for i := range 3 {
			more = append(more, reg{app: "after-failover", id: fmt.Sprintf("via-%s-%d", nd.ID, i)})
		}
		registerAll(t, nd.BaseURL(), more, 1)
		regs = append(regs, more...)
	}

	// The old leader comes back as a follower and catches up.
	old.Restart(t)
	c.WaitLeader(t, 15*time.Second)
	want := keySet(regs)
	var views [][]string
	ok = Eventually(20*time.Second, func() bool {
		views = views[:0]
		for _, nd := range c.Nodes {
			a, err := TryGetApps(nd.BaseURL())
			if err != nil {
				return false
			}
			views = append(views, registryView(a))
		}
		for _, v := range views {
			if len(v) != len(want) || !slices.Equal(v, views[0]) {
				return false
			}
		}
		return true
	})
	if !ok {
		for i, v := range views {
			t.Errorf("%s lists %d instances: %v", c.Nodes[i].ID, len(v), v)
		}
		t.Fatalf("nodes did not converge on the %d expected instances within 20s", len(want))
	}
	for i, line := range views[0] {
		if !strings.HasPrefix(line, want[i]+" ") {
			t.Fatalf("registry lists %q where %q was expected", line, want[i])
		}
	}
}

// snapshotArgs make a node snapshot after 100 entries, check every 200 ms and
// keep only 10 entries of log behind a snapshot.
var snapshotArgs = []string{"--snapshot-threshold", "100", "--snapshot-interval", "200ms", "--trailing-logs", "10"}

// waitTruncated waits until nd reports a snapshot in /v1/status and, if the
// server reports first_log_index, until its log starts after index 1 without
// a gap behind the snapshot. It returns the status.
func waitTruncated(t *testing.T, nd *Node) Status {
	t.Helper()
	var st Status
	ok := Eventually(20*time.Second, func() bool {
		var err error
		st, err = nd.TryStatus()
		return err == nil && st.LastSnapshotIndex > 0 && (!st.Has("first_log_index") || st.FirstLogIndex > 1)
	})
	if !ok {
		t.Fatalf("%s: no last_snapshot_index > 0 with first_log_index > 1 in /v1/status within 20s; last: last_snapshot_index=%d first_log_index=%d commit_index=%d",
			nd.ID, st.LastSnapshotIndex, st.FirstLogIndex, st.CommitIndex)
	}
	if st.Has("first_log_index") {
		if st.FirstLogIndex > st.LastSnapshotIndex+1 {
			t.Errorf("%s: log starts at %d, after the snapshot at %d: entries lost", nd.ID, st.FirstLogIndex, st.LastSnapshotIndex)
		}
		t.Logf("%s: snapshot at %d, log truncated to start at %d", nd.ID, st.LastSnapshotIndex, st.FirstLogIndex)
	} else {
		t.Logf("%s: /v1/status has no first_log_index; log truncation is checked only indirectly (snapshot on disk, restart)", nd.ID)
	}
	return st
}

// TestSnapshotTruncatesLogAndRestores fills a single node past its snapshot
// threshold, checks a snapshot was taken and the log truncated, writes a log
// tail after the snapshot, kills the node and checks that snapshot plus tail
// restore every instance.
func TestSnapshotTruncatesLogAndRestores(t *testing.T) {
	c := StartCluster(t, 1, Options{ExtraArgs: append(slices.Clone(cacheArgs), snapshotArgs...)})
	n1 := c.WaitLeader(t, 10*time.Second)

	regs := variedRegs(600, 6, "snap")
	registerAll(t, n1.BaseURL(), regs, 8)
	snap := waitTruncated(t, n1)

	// The data dir holds the log in raft.db and each snapshot in
	// snapshots/<id>/ (docs/design.md, "The data directory"; hashicorp/raft's file snapshot
	// store writes meta.json and state.bin into each).
	if _, err := os.Stat(filepath.Join(n1.DataDir, "raft.db")); err != nil {
		t.Errorf("no Raft log at <data-dir>/raft.db: %v; data dir holds %v", err, listTree(n1.DataDir, 1))
	}
	if dirs := snapshotDirs(n1.DataDir); len(dirs) == 0 {
		t.Errorf("no finished snapshot (a directory with meta.json) directly under <data-dir>/snapshots (%s); it holds: %v",
			filepath.Join(n1.DataDir, "snapshots"), listTree(filepath.Join(n1.DataDir, "snapshots"), 3))
	}

	// Write a tail that only the log holds. A node snapshots once the log
	// has grown by the threshold (100) since the last snapshot, counted in
	// entries or in commands (a packed entry holds several writes), so
	// first let any pending snapshot happen, then make sure the tail cannot
	// reach the threshold (topping up past it first when it is too close).
	const threshold, tailLen = 100, 5
	pending := func(st Status) uint64 {
		return max(st.CommitIndex-st.LastSnapshotIndex, st.CommandsSinceSnapshot)
	}
	var st Status
	for attempt := 0; ; attempt++ {
		WaitFor(t, 20*time.Second, func() bool {
			var err error
			st, err = n1.TryStatus()
			return err == nil && pending(st) < threshold
		}, "no snapshot pending (fewer than 100 entries and commands since the last)")
		if pending(st)+tailLen < threshold {
			break
		}
		if attempt == 3 {
			t.Fatalf("could not leave room for a %d-entry log tail: commit %d, snapshot %d, commands since %d",
				tailLen, st.CommitIndex, st.LastSnapshotIndex, st.CommandsSinceSnapshot)
		}
		var filler []reg
		for i := range threshold - int(pending(st)) {
			filler = append(filler, reg{app: "snap-filler", id: fmt.Sprintf("f%d-%d", attempt, i)})
		}
		registerAll(t, n1.BaseURL(), filler, 4)
		regs = append(regs, filler...)
	}
	tailFrom := st.CommitIndex + 1
	var tail []reg
	for i := range tailLen {
		tail = append(tail, reg{app: "snap-tail", id: fmt.Sprintf("tail-%d", i)})
	}
	registerAll(t, n1.BaseURL(), tail, 1)
	regs = append(regs, tail...)
	want := keySet(regs)
	waitAppsKeys(t, n1, want, 10*time.Second)
	if st := n1.Status(t); st.LastSnapshotIndex >= tailFrom {
		t.Fatalf("test bug: a snapshot at %d covers the tail starting at %d", st.LastSnapshotIndex, tailFrom)
	}

	n1.Kill()
	n1.Restart(t)
	c.WaitLeader(t, 10*time.Second)
	waitAppsKeys(t, n1, want, 20*time.Second)
	for _, r := range tail {
		if code, body := getInstance(t, n1, r); code != http.StatusOK {
			t.Errorf("GET %s after restart: %d %q", r.instanceURL(n1), code, body)
		}
	}
	// The restarted node restored a snapshot taken before the tail and
	// replayed the tail from the log.
	if st := n1.Status(t); st.LastSnapshotIndex < snap.LastSnapshotIndex || st.LastSnapshotIndex >= tailFrom {
		t.Errorf("last_snapshot_index after restart = %d, want in [%d, %d)", st.LastSnapshotIndex, snap.LastSnapshotIndex, tailFrom)
	}
}

// TestSnapshotCatchesUpLaggingFollower kills a follower, writes enough for
// the leader to snapshot and truncate its log past what the follower has,
// restarts the follower and checks it catches up (which it can only do from
// the leader's snapshot).
func TestSnapshotCatchesUpLaggingFollower(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: append(slices.Clone(cacheArgs), snapshotArgs...)})
	leader := c.WaitLeader(t, 15*time.Second)
	lagger := c.Followers(leader)[0]
	lagger.Kill()

	regs := variedRegs(300, 5, "lag")
	registerAll(t, leader.BaseURL(), regs, 8)
	snap := waitTruncated(t, leader)
	if snap.Has("first_log_index") {
		// Only with a truncated log is the follower forced onto the snapshot.
		WaitFor(t, 10*time.Second, func() bool {
			st, err := leader.TryStatus()
			return err == nil && st.FirstLogIndex > 20
		}, "leader's log truncated well past the lagging follower's last index")
	}

	lagger.Restart(t)
	c.WaitLeader(t, 15*time.Second)
	want := keySet(regs)
	waitAppsKeys(t, lagger, want, 20*time.Second)
	st := lagger.Status(t)
	t.Logf("%s caught up: last_snapshot_index=%d applied_index=%d", lagger.ID, st.LastSnapshotIndex, st.AppliedIndex)
	if snap.Has("first_log_index") && st.LastSnapshotIndex == 0 {
		t.Errorf("%s caught up from a log truncated at %d yet reports no snapshot", lagger.ID, snap.FirstLogIndex)
	}
}

// TestSecondProcessOnSameDataDirExits2 starts a node, then a second `heureka
// serve` on the same data dir (other ports): the second must exit with code 2
// and say why, and the first must be unharmed.
func TestSecondProcessOnSameDataDirExits2(t *testing.T) {
	c := StartCluster(t, 1, Options{ExtraArgs: cacheArgs})
	n1 := c.WaitLeader(t, 10*time.Second)
	first := reg{app: "lock", id: "before"}
	registerAll(t, n1.BaseURL(), []reg{first}, 1)

	args := n1.Args()
	for i, a := range args {
		switch a {
		case n1.HTTPAddr:
			args[i] = FreeAddr(t)
		case n1.RaftAddr:
			args[i] = FreeAddr(t)
		}
	}
	res := RunBinary(t, 15*time.Second, nil, args...)
	t.Logf("second process: exit %d after %v; stderr: %s", res.ExitCode, res.Elapsed, strings.TrimSpace(res.Stderr))
	if res.TimedOut {
		t.Fatalf("second `heureka serve` on %s still running after 15s (killed); stdout: %s", n1.DataDir, res.Stdout)
	}
	if got, exp := res.ExitCode, 2; got != exp {
		t.Errorf("second process exit code = %d, want %d; stdout: %s", got, exp, res.Stdout)
	}
	if res.Elapsed > 5*time.Second {
		t.Errorf("second process took %v to exit, want a few seconds at most", res.Elapsed)
	}
	msg := strings.ToLower(res.Stderr)
	if !strings.Contains(msg, strings.ToLower(n1.DataDir)) && !strings.Contains(msg, "lock") {
		t.Errorf("stderr of the second process mentions neither the data dir %s nor a lock: %q", n1.DataDir, res.Stderr)
	}

	// The first process still owns the directory and works.
	if !n1.Running() {
		t.Fatalf("first process exited (code %d)", n1.ExitCode())
	}
	if st := n1.Status(t); st.State != "Leader" {
		t.Errorf("first node state = %q after the second process, want Leader", st.State)
	}
	second := reg{app: "lock", id: "after"}
	registerAll(t, n1.BaseURL(), []reg{second}, 1)
	for _, r := range []reg{first, second} {
		if code, body := getInstance(t, n1, r); code != http.StatusOK {
			t.Errorf("GET %s: %d %q", r.instanceURL(n1), code, body)
		}
	}

	// SIGTERM is a clean shutdown: exit code 0.
	if code := n1.Stop(); code != 0 {
		t.Errorf("first process exited with %d on SIGTERM, want 0", code)
	}
}

// TestBadInputNothingRecorded sends malformed and invalid writes to a
// follower and to the leader of a 3-node cluster: each gets 400 with a
// message (or 404 with an empty body for unknown instances), and nothing
// reaches the Raft log.
func TestBadInputNothingRecorded(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: cacheArgs})
	leader := c.WaitLeader(t, 15*time.Second)
	follower := c.Followers(leader)[0]
	known := reg{app: "known", id: "known-1"}
	registerAll(t, leader.BaseURL(), []reg{known}, 1)
	before := waitCommitStable(t, c, time.Second, 15*time.Second)

	valid := RegisterBody("bad", "bad-1", nil)
	badRegs := []struct {
		name string
		body []byte
		msg  string // the response body must contain it ("" = any non-empty message)
	}{
		{"malformed JSON", []byte(`{"instance": {"instanceId": "x", "hostName": }`), ""},
		{"truncated body", valid[:len(valid)/2], ""},
		{"empty body", []byte{}, ""},
		{"not an object", []byte(`["instance"]`), ""},
		// A non-numeric port is read as 0, as eureka-server reads it
		// (docs/eureka-compat.md); a data-center name outside Eureka's enum
		// is refused, since Java clients could not parse it back.
		{"dataCenterInfo name outside the enum", RegisterBody("bad", "bad-1", map[string]any{"dataCenterInfo": map[string]any{
			"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "myown"}}), ""},
		{"port an object in the number", RegisterBody("bad", "bad-1", map[string]any{"port": map[string]any{"$": map[string]any{"n": 1}, "@enabled": "true"}}), ""},
		{"no instanceId and no hostName", RegisterBody("bad", "bad-1", map[string]any{"instanceId": nil, "hostName": nil}), "Missing instanceId"},
		{"no hostName", RegisterBody("bad", "bad-1", map[string]any{"hostName": nil}), "Missing hostname"},
		{"no ipAddr", RegisterBody("bad", "bad-1", map[string]any{"ipAddr": nil}), "Missing ip address"},
		{"app mismatch", RegisterBody("bad", "bad-1", map[string]any{"app": "OTHER"}), "Mismatched appName"},
		{"no dataCenterInfo", RegisterBody("bad", "bad-1", map[string]any{"dataCenterInfo": nil}), "Missing dataCenterInfo"},
	}
	notFound := []struct{ method, path string }{
		{"PUT", "/eureka/apps/NO-SUCH-APP/no-such-id"},
		{"PUT", "/eureka/apps/KNOWN/no-such-id"},
		{"DELETE", "/eureka/apps/NO-SUCH-APP/no-such-id"},
		{"DELETE", "/eureka/apps/KNOWN/no-such-id"},
	}

	// After each request the leader's commit index is read again, so a
	// failure names the request that wrote to the log.
	last := before
	checkCommit := func(what string) {
		t.Helper()
		if got := leader.Status(t).CommitIndex; got != last {
			t.Errorf("%s: leader commit_index moved from %d to %d: the request was written to the log", what, last, got)
			last = got
		}
	}
	for _, nd := range []*Node{follower, leader} {
		role := "follower " + nd.ID
		if nd == leader {
			role = "leader " + nd.ID
		}
		for _, tc := range badRegs {
			code, body, hdr := Do(t, "POST", nd.URL("/eureka/apps/bad"), tc.body)
			what := fmt.Sprintf("%s: POST /eureka/apps/bad with %s", role, tc.name)
			checkCommit(what)
			if code != http.StatusBadRequest {
				t.Errorf("%s: got %d %q, want 400", what, code, body)
				continue
			}
			if len(bytes.TrimSpace(body)) == 0 {
				t.Errorf("%s: 400 with an empty body, want a message", what)
			}
			if tc.msg != "" && !bytes.Contains(body, []byte(tc.msg)) {
				t.Errorf("%s: 400 body %q does not say %q", what, body, tc.msg)
			}
			checkNodeHeaders(t, what, hdr, nd.ID, leader.ID)
		}
		for _, tc := range notFound {
			code, body, hdr := Do(t, tc.method, nd.URL(tc.path), nil)
			what := fmt.Sprintf("%s: %s %s", role, tc.method, tc.path)
			checkCommit(what)
			if code != http.StatusNotFound || len(body) != 0 {
				t.Errorf("%s: got %d %q, want 404 with an empty body", what, code, body)
			}
			checkNodeHeaders(t, what, hdr, nd.ID, leader.ID)
		}
	}

	// Nothing reached the log: the leader's commit index has not moved.
	if got := leader.Status(t).CommitIndex; got != before {
		t.Errorf("leader commit_index = %d after the bad requests, was %d: something was written to the log", got, before)
	}
	// No bad registration became visible anywhere.
	for _, nd := range c.Nodes {
		code, body, _ := Do(t, "GET", nd.URL("/eureka/apps/BAD"), nil)
		if code != http.StatusNotFound {
			t.Errorf("%s: GET /eureka/apps/BAD = %d %q, want 404", nd.ID, code, body)
		}
	}

	// The cluster still takes a valid registration through the follower.
	good := reg{app: "bad", id: "bad-1"}
	registerAll(t, follower.BaseURL(), []reg{good}, 1)
	if got := leader.Status(t).CommitIndex; got <= before {
		t.Errorf("leader commit_index = %d after a valid register, want > %d", got, before)
	}
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			code, _, _, err := TryDo("GET", good.instanceURL(nd), nil)
			return err == nil && code == http.StatusOK
		}, fmt.Sprintf("%s readable on %s", good.key(), nd.ID))
	}
}

// TestJoinedNodeReceivesSnapshot adds a node with --join to a single node
// whose log has been truncated behind a snapshot: the new member can only
// get the registry from that snapshot, and must end up with all of it.
func TestJoinedNodeReceivesSnapshot(t *testing.T) {
	c := StartCluster(t, 1, Options{ExtraArgs: append(slices.Clone(cacheArgs), snapshotArgs...)})
	n1 := c.WaitLeader(t, 10*time.Second)
	regs := variedRegs(250, 5, "join")
	registerAll(t, n1.BaseURL(), regs, 8)
	waitTruncated(t, n1)

	n2 := c.StartNode(t, "n2", n1.HTTPAddr)
	WaitFor(t, 15*time.Second, func() bool {
		return len(memberProblems(c, n1, n1)) == 0
	}, "n2 listed by n1's /v1/members as a voter with its addresses")
	c.WaitLeader(t, 15*time.Second)
	waitAppsKeys(t, n2, keySet(regs), 20*time.Second)
	if st := n2.Status(t); st.LastSnapshotIndex == 0 {
		t.Errorf("n2 caught up from a truncated log yet reports last_snapshot_index 0")
	}
}
