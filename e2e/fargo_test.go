package e2e

// Real clients (docs/eureka-api.md, "Client traps"): hudl/fargo (Go) against a 3-node cluster, in JSON
// mode (UseJson) and in fargo's default XML mode, with each client talking to
// a different node. fargo has no delta support (its config's EnableDelta is a
// TODO), so its "app updates" are its polling helpers: ScheduleAppUpdates,
// NewAppSource, ScheduleVIPAddressUpdates and NewInstanceSetSourceForVIPAddress.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hudl/fargo"
	logging "github.com/op/go-logging"
)

const (
	fgWait    = 10 * time.Second       // bound for every wait on replication and caches
	fgPoll    = 100 * time.Millisecond // fargo's polling interval in the app-update checks
	fgLogEnv  = "HEUREKA_FARGO_LOG"    // set to anything to see fargo's own log
	fgLeaseS  = 300                    // lease duration the instances register with
	fgRenewS  = 10                     // renewal interval they register with
	fgCountry = 1
)

// fgQuietLogs silences fargo's logger (it logs every request at DEBUG and
// every expected 404 at ERROR) unless HEUREKA_FARGO_LOG is set.
func fgQuietLogs() {
	if os.Getenv(fgLogEnv) != "" {
		return
	}
	for _, module := range []string{"fargo", "fargo.metadata", "fargo.marshal"} {
		logging.SetLevel(logging.CRITICAL, module)
	}
}

// fgConn is a fargo connection to one node only (fargo picks a random
// service URL per request; one URL pins it).
func fgConn(nd *Node, useJSON bool) *fargo.EurekaConnection {
	conn := fargo.NewConn(nd.URL("/eureka"))
	conn.UseJson = useJSON
	conn.PollInterval = fgPoll
	return &conn
}

// fgWant is what an instance must look like when read back.
type fgWant struct {
	app, id, host, ip  string
	status, overridden fargo.StatusType
	port, securePort   int
	portOn, secureOn   bool
	vip, svip          string
	metadata           map[string]string
	amazonID           string // "" for MyOwn
}

// fgSpec builds the instance fargo registers and what reading it back must
// give.
func fgSpec(app, instanceID, host, ip string, port int, status fargo.StatusType, vip, svip string, md map[string]string, amazonID string) (*fargo.Instance, fgWant) {
	base := fmt.Sprintf("http://%s:%d", host, port)
	ins := &fargo.Instance{
		InstanceId:        instanceID,
		HostName:          host,
		App:               app,
		IPAddr:            ip,
		VipAddress:        vip,
		SecureVipAddress:  svip,
		Status:            status,
		Port:              port,
		PortEnabled:       true,
		SecurePort:        port + 363,
		SecurePortEnabled: svip != "",
		HomePageUrl:       base + "/",
		StatusPageUrl:     base + "/info",
		HealthCheckUrl:    base + "/health",
		CountryId:         fgCountry,
		DataCenterInfo:    fargo.DataCenterInfo{Name: fargo.MyOwn},
		LeaseInfo:         fargo.LeaseInfo{RenewalIntervalInSecs: fgRenewS, DurationInSecs: fgLeaseS},
	}
	if amazonID != "" {
		ins.DataCenterInfo = fargo.DataCenterInfo{Name: fargo.Amazon, Metadata: fargo.AmazonMetadataType{
			InstanceID: amazonID, AvailabilityZone: "us-east-1a", LocalIpv4: ip, InstanceType: "m5.large", AmiID: "ami-0fedcba987",
		}}
	}
	for k, v := range md {
		ins.SetMetadataString(k, v)
	}
	id := instanceID
	if id == "" {
		id = host
		if amazonID != "" {
			id = amazonID
		}
	}
	w := fgWant{
		app: strings.ToUpper(app), id: id, host: host, ip: ip, status: status, overridden: fargo.UNKNOWN,
		port: port, securePort: port + 363, portOn: true, secureOn: svip != "",
		vip: vip, svip: svip, metadata: md, amazonID: amazonID,
	}
	return ins, w
}

// fgMetadata returns an instance's metadata as strings (fargo parses XML
// metadata with type recasting, so values are compared as text).
func fgMetadata(ins *fargo.Instance) (map[string]string, error) {
	if _, err := ins.Metadata.GetString("-"); err != nil { // forces the parse
		return nil, err
	}
	out := map[string]string{}
	for k, v := range ins.Metadata.GetMap() {
		out[k] = fmt.Sprint(v)
	}
	return out, nil
}

// fgDiff compares an instance fargo read back with w; "" means equal.
func fgDiff(got *fargo.Instance, w fgWant) string {
	if got == nil {
		return "no instance"
	}
	var d []string
	check := func(name string, g, want any) {
		if g != want {
			d = append(d, fmt.Sprintf("%s=%v want %v", name, g, want))
		}
	}
	check("app", got.App, w.app)
	check("id", got.Id(), w.id)
	check("hostName", got.HostName, w.host)
	check("ipAddr", got.IPAddr, w.ip)
	check("status", got.Status, w.status)
	check("overriddenstatus", got.Overriddenstatus, w.overridden)
	check("port", got.Port, w.port)
	check("port.enabled", got.PortEnabled, w.portOn)
	check("securePort", got.SecurePort, w.securePort)
	check("securePort.enabled", got.SecurePortEnabled, w.secureOn)
	check("vipAddress", got.VipAddress, w.vip)
	check("secureVipAddress", got.SecureVipAddress, w.svip)
	check("countryId", got.CountryId, int64(fgCountry))
	check("leaseInfo.durationInSecs", got.LeaseInfo.DurationInSecs, int32(fgLeaseS))
	check("leaseInfo.renewalIntervalInSecs", got.LeaseInfo.RenewalIntervalInSecs, int32(fgRenewS))
	if got.LeaseInfo.RegistrationTimestamp <= 0 {
		d = append(d, fmt.Sprintf("leaseInfo.registrationTimestamp=%d", got.LeaseInfo.RegistrationTimestamp))
	}
	if w.amazonID != "" {
		check("dataCenterInfo.name", got.DataCenterInfo.Name, fargo.Amazon)
		check("dataCenterInfo.metadata.instance-id", got.DataCenterInfo.Metadata.InstanceID, w.amazonID)
		check("dataCenterInfo.metadata.availability-zone", got.DataCenterInfo.Metadata.AvailabilityZone, "us-east-1a")
	} else {
		check("dataCenterInfo.name", got.DataCenterInfo.Name, fargo.MyOwn)
	}
	md, err := fgMetadata(got)
	if err != nil {
		d = append(d, "metadata: "+err.Error())
	} else if fmt.Sprint(md) != fmt.Sprint(w.metadata) {
		d = append(d, fmt.Sprintf("metadata=%v want %v", md, w.metadata))
	}
	return strings.Join(d, "; ")
}

// fgWaitInstance polls conn.GetInstance until the instance matches w.
func fgWaitInstance(t *testing.T, conn *fargo.EurekaConnection, w fgWant, what string) *fargo.Instance {
	t.Helper()
	var got *fargo.Instance
	var last string
	ok := Eventually(fgWait, func() bool {
		ins, err := conn.GetInstance(w.app, w.id)
		if err != nil {
			last = err.Error()
			return false
		}
		got, last = ins, fgDiff(ins, w)
		return last == ""
	})
	if !ok {
		t.Fatalf("%s: GetInstance(%s, %s) via %s never matched: %s", what, w.app, w.id, conn.ServiceUrls[0], last)
	}
	return got
}

// fgIDs returns the sorted ids of instances.
func fgIDs(instances []*fargo.Instance) []string { return sortedBy(instances, (*fargo.Instance).Id) }

func fgSorted(ids ...string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

// fgStatusCode is the HTTP status behind a fargo error (0 if none).
func fgStatusCode(err error) int {
	code, _ := fargo.HTTPResponseStatusCode(err)
	return code
}

func TestFargo(t *testing.T) {
	fgQuietLogs()
	start := time.Now()
	c := StartCluster(t, 3, Options{ExtraArgs: edCacheArgs})
	c.WaitLeader(t, 15*time.Second)
	for _, mode := range []string{"JSON", "XML"} {
		t.Run(mode, func(t *testing.T) { fargoScenario(t, c, mode == "JSON") })
	}
	t.Logf("TestFargo took %v", time.Since(start).Round(time.Millisecond))
}

func fargoScenario(t *testing.T, c *Cluster, useJSON bool) {
	m := "xml"
	accept := "application/xml"
	if useJSON {
		m, accept = "json", "application/json"
	}
	conns := make([]*fargo.EurekaConnection, len(c.Nodes))
	for i, nd := range c.Nodes {
		conns[i] = fgConn(nd, useJSON)
	}
	orders, billing := "fg-"+m+"-orders", "fg-"+m+"-billing" // fargo sends names as given
	all := "fg-" + m + "-all"
	insA, wantA := fgSpec(orders, "orders-a-"+m, "orders-a."+m+".fargo.test", "10.30.0.1", 8080, fargo.UP,
		orders+","+all, orders+"-secure", map[string]string{"zone": "z1", "build": "b-42"}, "")
	insB, wantB := fgSpec(orders, "", "orders-b."+m+".fargo.test", "10.30.0.2", 8081, fargo.STARTING,
		orders+","+all, orders+"-secure", map[string]string{"zone": "z2"}, "")
	insC, wantC := fgSpec(billing, "", "billing-c."+m+".fargo.test", "10.30.0.3", 9090, fargo.UP,
		billing+","+all, "", map[string]string{"zone": "z1", "team": "payments"}, "i-0fg"+m+"c")
	ORDERS, BILLING := wantA.app, wantC.app

	// Register: fargo GETs the instance (404), POSTs it (204) and GETs it
	// back into the struct — each through a different node.
	for i, r := range []struct {
		ins  *fargo.Instance
		want fgWant
	}{{insA, wantA}, {insB, wantB}, {insC, wantC}} {
		if err := conns[i].RegisterInstance(r.ins); err != nil {
			t.Fatalf("RegisterInstance %s via %s: %v", r.want.id, c.Nodes[i].ID, err)
		}
		if d := fgDiff(r.ins, r.want); d != "" {
			t.Errorf("RegisterInstance %s via %s read back: %s", r.want.id, c.Nodes[i].ID, d)
		}
	}

	// A second RegisterInstance through the same node finds the instance
	// (GET 200) and must not POST again: nothing reaches the log.
	leader := c.WaitLeader(t, fgWait)
	// Entries of the cluster's own (a renewal batch, a member record) may
	// still follow the registrations above: compare from a commit index
	// that has stopped moving.
	before := leader.Status(t)
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		now := leader.Status(t)
		if now.Term == before.Term && now.CommitIndex == before.CommitIndex {
			break
		}
		before = now
	}
	again, _ := fgSpec(orders, "orders-a-"+m, "orders-a."+m+".fargo.test", "10.30.0.1", 8080, fargo.UP,
		orders+","+all, orders+"-secure", map[string]string{"zone": "z1", "build": "b-42"}, "")
	if err := conns[0].RegisterInstance(again); err != nil {
		t.Fatalf("second RegisterInstance: %v", err)
	}
	if after := leader.Status(t); after.Term == before.Term && after.CommitIndex != before.CommitIndex {
		t.Errorf("second RegisterInstance of a registered instance wrote to the log (commit %d -> %d); fargo should have skipped the POST", before.CommitIndex, after.CommitIndex)
	}

	// Every node lists both applications with exactly what was registered.
	for i, conn := range conns {
		var last string
		ok := Eventually(fgWait, func() bool {
			apps, err := conn.GetApps()
			if err != nil {
				last = err.Error()
				return false
			}
			var d []string
			for _, exp := range []struct {
				app   string
				wants []fgWant
			}{{ORDERS, []fgWant{wantA, wantB}}, {BILLING, []fgWant{wantC}}} {
				a := apps[exp.app]
				if a == nil {
					d = append(d, "no application "+exp.app)
					continue
				}
				if a.Name != exp.app || len(a.Instances) != len(exp.wants) {
					d = append(d, fmt.Sprintf("%s: name %q, %d instances (want %d)", exp.app, a.Name, len(a.Instances), len(exp.wants)))
					continue
				}
				for _, w := range exp.wants {
					idx := slices.IndexFunc(a.Instances, func(in *fargo.Instance) bool { return in.Id() == w.id })
					if idx < 0 {
						d = append(d, exp.app+": no instance "+w.id)
					} else if diff := fgDiff(a.Instances[idx], w); diff != "" {
						d = append(d, w.id+": "+diff)
					}
				}
			}
			last = strings.Join(d, "; ")
			return last == ""
		})
		if !ok {
			t.Fatalf("GetApps via %s: %s", c.Nodes[i].ID, last)
		}
	}

	// Heartbeats, each through a node other than the one registered through.
	for i, ins := range []*fargo.Instance{insA, insB, insC} {
		if err := conns[(i+1)%3].HeartBeatInstance(ins); err != nil {
			t.Errorf("HeartBeatInstance %s via %s: %v", ins.Id(), c.Nodes[(i+1)%3].ID, err)
		}
	}
	ghost, _ := fgSpec(orders, "ghost-"+m, "ghost."+m+".fargo.test", "10.30.0.9", 8080, fargo.UP, orders, "", nil, "")
	if err := conns[1].HeartBeatInstance(ghost); fgStatusCode(err) != http.StatusNotFound {
		t.Errorf("HeartBeatInstance of an unregistered instance: %v, want a 404 error", err)
	}

	// GetApp (lower-case name, upper-cased by the server) and its 404.
	app, err := conns[2].GetApp(orders)
	if err != nil {
		t.Fatalf("GetApp(%s): %v", orders, err)
	}
	if app.Name != ORDERS || !slices.Equal(fgIDs(app.Instances), fgSorted(wantA.id, wantB.id)) {
		t.Errorf("GetApp(%s) = %s %v, want %s %v", orders, app.Name, fgIDs(app.Instances), ORDERS, fgSorted(wantA.id, wantB.id))
	}
	if _, err := conns[1].GetApp("fg-" + m + "-nosuch"); !errors.As(err, new(fargo.AppNotFoundError)) {
		t.Errorf("GetApp of an unknown application: %v, want fargo.AppNotFoundError", err)
	}

	// GetInstance on every node.
	for _, conn := range conns {
		for _, w := range []fgWant{wantA, wantB, wantC} {
			fgWaitInstance(t, conn, w, "GetInstance")
		}
	}
	if _, err := conns[0].GetInstance(ORDERS, "no-such-"+m); fgStatusCode(err) != http.StatusNotFound {
		t.Errorf("GetInstance of an unknown id: %v, want a 404 error", err)
	}

	// VIP queries: single and comma-separated VIPs, secure VIPs, status
	// filters, unknown VIPs (200 with nothing) and exact-case matching.
	vipCases := []struct {
		vip    string
		secure bool
		opts   []fargo.InstanceQueryOption
		want   []string
	}{
		{orders, false, nil, fgSorted(wantA.id, wantB.id)},
		{billing, false, nil, fgSorted(wantC.id)},
		{all, false, nil, fgSorted(wantA.id, wantB.id, wantC.id)},
		{all, false, []fargo.InstanceQueryOption{fargo.ThatAreUp}, fgSorted(wantA.id, wantC.id)},
		{orders, false, []fargo.InstanceQueryOption{fargo.WithStatus(fargo.STARTING)}, fgSorted(wantB.id)},
		{orders + "-secure", true, nil, fgSorted(wantA.id, wantB.id)},
		{orders + "-secure", false, nil, []string{}},
		{"fg-" + m + "-nothing", false, nil, []string{}},
		{strings.ToUpper(orders), false, nil, []string{}},
	}
	for _, vc := range vipCases {
		for i, conn := range conns {
			var got []string
			var err error
			ok := Eventually(fgWait, func() bool {
				var ins []*fargo.Instance
				ins, err = conn.GetInstancesByVIPAddress(vc.vip, vc.secure, vc.opts...)
				got = fgIDs(ins)
				return err == nil && slices.Equal(got, vc.want)
			})
			if !ok {
				t.Errorf("GetInstancesByVIPAddress(%q, secure=%v, %d options) via %s = %v, %v; want %v",
					vc.vip, vc.secure, len(vc.opts), c.Nodes[i].ID, got, err, vc.want)
			}
		}
	}

	// Status override on: OUT_OF_SERVICE everywhere, heartbeats still 200.
	if err := conns[1].UpdateInstanceStatus(insA, fargo.OUTOFSERVICE); err != nil {
		t.Fatalf("UpdateInstanceStatus OUT_OF_SERVICE: %v", err)
	}
	oos := wantA
	oos.status, oos.overridden = fargo.OUTOFSERVICE, fargo.OUTOFSERVICE
	for _, conn := range conns {
		fgWaitInstance(t, conn, oos, "after UpdateInstanceStatus OUT_OF_SERVICE")
	}
	if err := conns[0].HeartBeatInstance(insA); err != nil {
		t.Errorf("HeartBeatInstance under an OUT_OF_SERVICE override: %v", err)
	}
	// The override survives the client re-registering itself as UP (rule 2
	// of the override chain); the re-registration makes a new lease.
	oldReg := fgWaitInstance(t, conns[0], oos, "before re-register").LeaseInfo.RegistrationTimestamp
	up, _ := fgSpec(orders, "orders-a-"+m, "orders-a."+m+".fargo.test", "10.30.0.1", 8080, fargo.UP,
		orders+","+all, orders+"-secure", map[string]string{"zone": "z1", "build": "b-42"}, "")
	if err := conns[2].ReregisterInstance(up); err != nil {
		t.Fatalf("ReregisterInstance UP under an override: %v", err)
	}
	ok := Eventually(fgWait, func() bool {
		got, err := conns[0].GetInstance(ORDERS, wantA.id)
		return err == nil && got.LeaseInfo.RegistrationTimestamp > oldReg && fgDiff(got, oos) == ""
	})
	if !ok {
		got, err := conns[0].GetInstance(ORDERS, wantA.id)
		t.Fatalf("after re-registering UP under an OUT_OF_SERVICE override: %v %v (want a new lease, %s)", fgDiff(got, oos), err, "status and override OUT_OF_SERVICE")
	}

	// Status override off: fargo has no call for it, so a plain DELETE
	// …/status. The status drops to UNKNOWN, the next heartbeat is a 404
	// (the client must re-register), and re-registering UP sticks.
	code, body, _, err := TryDo("DELETE", c.Nodes[2].URL("/eureka/apps/"+ORDERS+"/"+wantA.id+"/status"), nil, "Accept", accept)
	if err != nil || code != http.StatusOK {
		t.Fatalf("DELETE status override: %d %q %v, want 200", code, body, err)
	}
	unknown := wantA
	unknown.status = fargo.UNKNOWN
	for _, conn := range conns {
		fgWaitInstance(t, conn, unknown, "after deleting the override")
	}
	if err := conns[1].HeartBeatInstance(insA); fgStatusCode(err) != http.StatusNotFound {
		t.Errorf("HeartBeatInstance after the override was deleted: %v, want a 404 error", err)
	}
	up, _ = fgSpec(orders, "orders-a-"+m, "orders-a."+m+".fargo.test", "10.30.0.1", 8080, fargo.UP,
		orders+","+all, orders+"-secure", map[string]string{"zone": "z1", "build": "b-42"}, "")
	if err := conns[1].ReregisterInstance(up); err != nil {
		t.Fatalf("ReregisterInstance after the override was deleted: %v", err)
	}
	for _, conn := range conns {
		fgWaitInstance(t, conn, wantA, "after re-registering UP")
	}
	if err := conns[2].HeartBeatInstance(insA); err != nil {
		t.Errorf("HeartBeatInstance after re-registering: %v", err)
	}

	// Metadata: AddMetadataString merges one key into the stored map.
	if err := conns[2].AddMetadataString(insA, "color", "blue"); err != nil {
		t.Fatalf("AddMetadataString: %v", err)
	}
	withColor := wantA
	withColor.metadata = map[string]string{"zone": "z1", "build": "b-42", "color": "blue"}
	for _, conn := range conns {
		fgWaitInstance(t, conn, withColor, "after AddMetadataString")
	}

	// App updates (fargo polls full documents; it has no delta support).
	done := make(chan struct{})
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(done)
		}
	}
	t.Cleanup(stop)
	appUpdates := conns[1].ScheduleAppUpdates(orders, true, done)
	vipUpdates, err := conns[0].ScheduleVIPAddressUpdates(all, false, true, done, fargo.ThatAreUp)
	if err != nil {
		t.Fatal(err)
	}
	appSource := conns[2].NewAppSource(orders, true)
	t.Cleanup(appSource.Stop)
	setSource, err := conns[1].NewInstanceSetSourceForVIPAddress(orders, false, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(setSource.Stop)

	insD, wantD := fgSpec(orders, "orders-d-"+m, "orders-d."+m+".fargo.test", "10.30.0.4", 8082, fargo.UP,
		orders+","+all, "", map[string]string{"zone": "z3"}, "")
	waitUpdates := func(phase string, wantOrders, wantUp []string) {
		t.Helper()
		deadline := time.After(fgWait)
		var lastApp, lastVIP []string
		appOK, vipOK := false, false
		for !appOK || !vipOK {
			select {
			case u, ok := <-appUpdates:
				if !ok {
					t.Fatalf("%s: ScheduleAppUpdates channel closed", phase)
				}
				if u.Err == nil {
					lastApp = fgIDs(u.App.Instances)
					appOK = slices.Equal(lastApp, wantOrders)
				}
			case u, ok := <-vipUpdates:
				if !ok {
					t.Fatalf("%s: ScheduleVIPAddressUpdates channel closed", phase)
				}
				if u.Err == nil {
					lastVIP = fgIDs(u.Instances)
					vipOK = slices.Equal(lastVIP, wantUp)
				}
			case <-deadline:
				t.Fatalf("%s: app updates never showed %v (last %v) or UP VIP updates %v (last %v)", phase, wantOrders, lastApp, wantUp, lastVIP)
			}
		}
		WaitFor(t, fgWait, func() bool {
			a := appSource.Latest()
			return a != nil && slices.Equal(fgIDs(a.Instances), wantOrders) && slices.Equal(fgIDs(setSource.Latest()), wantOrders)
		}, phase+": NewAppSource and NewInstanceSetSourceForVIPAddress to show "+strings.Join(wantOrders, ","))
	}
	waitUpdates("before", fgSorted(wantA.id, wantB.id), fgSorted(wantA.id, wantC.id))
	if err := conns[2].RegisterInstance(insD); err != nil {
		t.Fatalf("RegisterInstance %s: %v", wantD.id, err)
	}
	if d := fgDiff(insD, wantD); d != "" {
		t.Errorf("RegisterInstance %s read back: %s", wantD.id, d)
	}
	waitUpdates("after registering "+wantD.id, fgSorted(wantA.id, wantB.id, wantD.id), fgSorted(wantA.id, wantC.id, wantD.id))
	if err := conns[0].DeregisterInstance(insD); err != nil {
		t.Fatalf("DeregisterInstance %s: %v", wantD.id, err)
	}
	waitUpdates("after deregistering "+wantD.id, fgSorted(wantA.id, wantB.id), fgSorted(wantA.id, wantC.id))
	stop()
	for range appUpdates { // closed once the poller sees done
	}
	for range vipUpdates {
	}

	// Deregister: 200, then the instance is gone everywhere, and a second
	// deregistration is a 404.
	if err := conns[1].DeregisterInstance(insB); err != nil {
		t.Fatalf("DeregisterInstance %s: %v", wantB.id, err)
	}
	for i, conn := range conns {
		WaitFor(t, fgWait, func() bool {
			_, err := conn.GetInstance(ORDERS, wantB.id)
			app, aerr := conn.GetApp(orders)
			return fgStatusCode(err) == http.StatusNotFound && aerr == nil && slices.Equal(fgIDs(app.Instances), []string{wantA.id})
		}, fmt.Sprintf("%s gone from %s", wantB.id, c.Nodes[i].ID))
	}
	if err := conns[2].DeregisterInstance(insB); fgStatusCode(err) != http.StatusNotFound {
		t.Errorf("second DeregisterInstance: %v, want a 404 error", err)
	}
	for i, ins := range []*fargo.Instance{insA, insC} {
		if err := conns[i].DeregisterInstance(ins); err != nil {
			t.Errorf("DeregisterInstance %s: %v", ins.Id(), err)
		}
	}
	for i, conn := range conns {
		WaitFor(t, fgWait, func() bool {
			apps, err := conn.GetApps()
			_, aerr := conn.GetApp(orders)
			return err == nil && apps[ORDERS] == nil && apps[BILLING] == nil && errors.As(aerr, new(fargo.AppNotFoundError))
		}, fmt.Sprintf("%s and %s gone from %s", ORDERS, BILLING, c.Nodes[i].ID))
	}
}

// fgRecorder records the requests fargo makes (method, path, status).
type fgRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []string
}

func (r *fgRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	line := req.Method + " " + req.URL.Path
	if err != nil {
		line += " -> " + err.Error()
	} else {
		line += fmt.Sprintf(" -> %d", resp.StatusCode)
	}
	r.mu.Lock()
	r.log = append(r.log, line)
	r.mu.Unlock()
	return resp, err
}

func (r *fgRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}

// TestFargoReregisterAfterDeregister: a fargo program that deregisters and
// registers again (a restart, a redeploy on the same host) calls
// RegisterInstance, which first GETs the instance and skips the POST on a
// 200 (docs/eureka-api.md, "One instance", "Client traps"). GET /apps/{app}/{id} therefore must not answer
// from a cache that still holds the cancelled instance: Eureka does not
// cache GET /apps/{app}/{id}. With the default 30 s cache refresh the window is 30 s.
func TestFargoReregisterAfterDeregister(t *testing.T) {
	fgQuietLogs()
	rec := &fgRecorder{next: fargo.HttpClient.Transport}
	fargo.HttpClient.Transport = rec
	t.Cleanup(func() { fargo.HttpClient.Transport = rec.next })
	c := StartCluster(t, 1, Options{}) // default --response-cache-update-interval (30s)
	c.WaitLeader(t, 15*time.Second)
	for _, mode := range []string{"JSON", "XML"} {
		t.Run(mode, func(t *testing.T) {
			conn := fgConn(c.Nodes[0], mode == "JSON")
			app := "fg-restart-" + strings.ToLower(mode)
			ins, want := fgSpec(app, "restart-1", "restart-1.fargo.test", "10.30.1.1", 8080, fargo.UP, app, "", map[string]string{"zone": "z1"}, "")
			if err := conn.RegisterInstance(ins); err != nil {
				t.Fatalf("RegisterInstance: %v", err)
			}
			if d := fgDiff(ins, want); d != "" {
				t.Fatalf("RegisterInstance read back: %s", d)
			}
			if err := conn.DeregisterInstance(ins); err != nil {
				t.Fatalf("DeregisterInstance: %v", err)
			}
			rec.take()
			again, _ := fgSpec(app, "restart-1", "restart-1.fargo.test", "10.30.1.1", 8080, fargo.UP, app, "", map[string]string{"zone": "z1"}, "")
			if err := conn.RegisterInstance(again); err != nil {
				t.Fatalf("RegisterInstance after DeregisterInstance: %v", err)
			}
			requests := rec.take()
			// The heartbeat is not cached: it tells whether the instance is
			// registered now.
			if err := conn.HeartBeatInstance(again); err != nil {
				t.Errorf("after DeregisterInstance + RegisterInstance the instance is not registered (heartbeat: %v); "+
					"RegisterInstance made these requests: %q — the GET of the just-cancelled instance was answered 200 "+
					"(from the response cache), so fargo skipped the POST", err, requests)
			}
		})
	}
}
