package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

func regionEntry(app, id, status string) *fsm.Entry {
	in := &fsm.Instance{InstanceID: id, HostName: "h-" + id, App: app, IPAddr: "10.9.0.1", Status: status,
		OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"},
		RenewalIntervalSecs: 30, DurationSecs: 90, VIPAddress: strings.ToLower(app), LastDirtyTimestamp: 1700000000000}
	return &fsm.Entry{App: app, ID: id, Instance: in, RegistrationTs: 1700000000000, LastRenewalTs: 1700000000000}
}

func applyRegionUpdate(t *testing.T, fc *fakeCluster, b *fsm.RegionUpdateBody) {
	t.Helper()
	entry, err := fsm.Encode(fsm.CmdRegionUpdate|fsm.CmdIgnoreUnknown, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Apply(context.Background(), entry); err != nil {
		t.Fatal(err)
	}
}

// regionDoc is a decoded JSON applications document: its hash and
// "APP/id:STATUS" items in document order.
type regionDoc struct {
	hash, versions string
	items          []string
}

func getRegionDoc(t *testing.T, url string) (int, regionDoc, http.Header) {
	t.Helper()
	code, body, hdr := do(t, "GET", url, "", "", "Accept", "application/json")
	if code != 200 {
		return code, regionDoc{}, hdr
	}
	var doc struct {
		Applications struct {
			Versions    string `json:"versions__delta"`
			Hash        string `json:"apps__hashcode"`
			Application []struct {
				Name     string `json:"name"`
				Instance []struct {
					ID     string `json:"instanceId"`
					Status string `json:"status"`
				} `json:"instance"`
			} `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%s: %v\n%s", url, err, body)
	}
	d := regionDoc{hash: doc.Applications.Hash, versions: doc.Applications.Versions}
	for _, a := range doc.Applications.Application {
		for _, in := range a.Instance {
			d.items = append(d.items, a.Name+"/"+in.ID+":"+in.Status)
		}
	}
	return code, d, hdr
}

// regions= reads merge the copies as eureka-server does: refused until
// every region was copied once; one application per name, a region's
// instance replacing a local one of the same id; the whitelist; the
// region names parsed as eureka-server parses them; the hash of what is
// listed, and the delta under that hash; the fallback of /apps/{app}; an
// unreachable region's copy marked.
func TestRegions_ReadsMergeCopies(t *testing.T) {
	ts, fc := newTestServerWith(t, func(c *Config) {
		c.Regions = RegionConfig{Names: []string{"legacy", "west"}, Whitelist: map[string][]string{"legacy": {"LONLY"}}}
	})
	do(t, "POST", ts.URL+"/eureka/apps/SHARED", "application/json", instanceJSON("SHARED", "s-1"))
	do(t, "POST", ts.URL+"/eureka/apps/EONLY", "application/json", instanceJSON("EONLY", "e-1"))

	if code, _, _ := getRegionDoc(t, ts.URL+"/eureka/apps?regions=west"); code != http.StatusForbidden {
		t.Fatalf("regions=west before any copy: %d, want 403", code)
	}
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 1, Final: true,
		Put:    []*fsm.Entry{regionEntry("SHARED", "s-1", fsm.StatusDown), regionEntry("SHARED", "s-w", fsm.StatusUp), regionEntry("WONLY", "w-1", fsm.StatusUp)},
		Status: &fsm.RegionStatus{Loaded: true, Reachable: true, Kind: "heureka"}})
	if code, _, _ := getRegionDoc(t, ts.URL+"/eureka/apps?regions=west"); code != http.StatusForbidden {
		t.Fatalf("regions=west while legacy was never copied: %d, want 403 (eureka-server waits for every region)", code)
	}
	if code, _, _ := getRegionDoc(t, ts.URL+"/eureka/apps"); code != 200 {
		t.Fatalf("plain /apps while a region was never copied: %d, want 200", code)
	}
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "legacy", Pass: 1, Final: true,
		Put:    []*fsm.Entry{regionEntry("LONLY", "l-1", fsm.StatusUp), regionEntry("LOTHER", "x-1", fsm.StatusUp)},
		Status: &fsm.RegionStatus{Loaded: true, Reachable: false, Kind: "eureka", Error: "connection refused"}})

	_, west, hdr := getRegionDoc(t, ts.URL+"/eureka/apps?regions=west")
	if want := []string{"EONLY/e-1:UP", "SHARED/s-1:DOWN", "SHARED/s-w:UP", "WONLY/w-1:UP"}; !slices.Equal(west.items, want) {
		t.Fatalf("regions=west lists %v, want %v", west.items, want)
	}
	if west.hash != "DOWN_1_UP_3_" || west.versions != "1" || hdr.Get(RegionStaleHeader) != "" {
		t.Fatalf("regions=west: hash %q versions %q stale %q", west.hash, west.versions, hdr.Get(RegionStaleHeader))
	}
	// Upper case and order do not matter; a name with a space is not west.
	for q, want := range map[string][]string{
		"LEGACY,west":    {"EONLY/e-1:UP", "SHARED/s-1:DOWN", "SHARED/s-w:UP", "LONLY/l-1:UP", "WONLY/w-1:UP"},
		"legacy,%20west": {"EONLY/e-1:UP", "SHARED/s-1:UP", "LONLY/l-1:UP"},
		"east,nowhere":   {"EONLY/e-1:UP", "SHARED/s-1:UP"},
	} {
		_, d, hdr := getRegionDoc(t, ts.URL+"/eureka/apps?regions="+q)
		if !slices.Equal(d.items, want) {
			t.Errorf("regions=%s lists %v, want %v", q, d.items, want)
		}
		if stale := strings.Contains(q, "LEGACY") || strings.Contains(q, "legacy"); stale != (hdr.Get(RegionStaleHeader) == "legacy") {
			t.Errorf("regions=%s: %s %q", q, RegionStaleHeader, hdr.Get(RegionStaleHeader))
		}
	}
	_, delta, _ := getRegionDoc(t, ts.URL+"/eureka/apps/delta?regions=west")
	if delta.hash != west.hash || !slices.Contains(delta.items, "WONLY/w-1:UP") || !slices.Contains(delta.items, "SHARED/s-1:DOWN") {
		t.Fatalf("delta with regions=west: hash %q (full %q), items %v", delta.hash, west.hash, delta.items)
	}
	// The local region lacks WONLY: its document falls back to west's.
	if code, body, _ := do(t, "GET", ts.URL+"/eureka/apps/WONLY", "", "", "Accept", "application/json"); code != 200 || !strings.Contains(body, `"w-1"`) {
		t.Fatalf("GET /apps/WONLY: %d %s", code, body)
	}
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/WONLY/w-1", "", "", "Accept", "application/json"); code != 200 {
		t.Fatalf("GET /apps/WONLY/w-1: %d", code)
	}
	// A change to a copy reaches the cached documents.
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 2, Final: true,
		Delete: []fsm.KeyBody{{App: "WONLY", ID: "w-1"}}})
	_, west, _ = getRegionDoc(t, ts.URL+"/eureka/apps?regions=west")
	if slices.Contains(west.items, "WONLY/w-1:UP") || west.hash != "DOWN_1_UP_2_" {
		t.Fatalf("after west cancelled w-1: %v %q", west.items, west.hash)
	}
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/WONLY", "", "", "Accept", "application/json"); code != 404 {
		t.Fatalf("GET /apps/WONLY after west lost it: %d, want 404", code)
	}
	// /v1/status names each region's state.
	_, body, _ := do(t, "GET", ts.URL+"/v1/status", "", "")
	if !strings.Contains(body, `"name":"legacy","loaded":true,"reachable":false`) {
		t.Fatalf("/v1/status: %s", body)
	}
}

// With the fallback off, /apps/{app} of an application only a remote
// region holds is 404, as eureka-server's switch makes it.
func TestRegions_NoFallback(t *testing.T) {
	ts, fc := newTestServerWith(t, func(c *Config) {
		c.Regions = RegionConfig{Names: []string{"west"}, NoFallback: true}
	})
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 1, Final: true,
		Put: []*fsm.Entry{regionEntry("WONLY", "w-1", fsm.StatusUp)}, Status: &fsm.RegionStatus{Loaded: true, Reachable: true}})
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/WONLY", "", "", "Accept", "application/json"); code != 404 {
		t.Fatalf("GET /apps/WONLY with the fallback off: %d, want 404", code)
	}
}

// The readOnly level follows a copy: a blocking regions= read wakes on a
// change to the region and its document holds the change.
func TestRegions_BlockingReadWakesOnRegionChange(t *testing.T) {
	ts, fc := newTestServerWith(t, func(c *Config) {
		c.Regions = RegionConfig{Names: []string{"west"}}
		c.Cache.UseReadOnly = true
	})
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 1, Final: true,
		Put: []*fsm.Entry{regionEntry("WONLY", "w-1", fsm.StatusUp)}, Status: &fsm.RegionStatus{Loaded: true, Reachable: true}})
	code, _, hdr := do(t, "GET", ts.URL+"/eureka/apps?regions=west", "", "", "Accept", "application/json")
	if code != 200 {
		t.Fatalf("regions=west: %d", code)
	}
	done := make(chan regionDoc, 1)
	go func() {
		_, d, _ := getRegionDoc(t, ts.URL+"/eureka/apps?regions=west&wait=10s&index="+hdr.Get(IndexHeader))
		done <- d
	}()
	time.Sleep(100 * time.Millisecond)
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 2, Final: true,
		Put: []*fsm.Entry{regionEntry("WONLY", "w-2", fsm.StatusUp)}})
	select {
	case d := <-done:
		if !slices.Contains(d.items, "WONLY/w-2:UP") {
			t.Fatalf("woken read lists %v", d.items)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a blocking regions=west read did not wake on a change to west's copy")
	}
}

// GET /apps/delta?after=SEQ lists only the changes after SEQ, gives the
// new position in DeltaSeqHeader and the whole registry's hash, blocks
// with ?index=, and answers 410 once the changes asked for aged out.
func TestDeltaAfter(t *testing.T) {
	ts, _ := newTestServerWith(t, func(c *Config) { c.Cache.UseReadOnly = true })
	do(t, "POST", ts.URL+"/eureka/apps/A", "application/json", instanceJSON("A", "a-1"))
	code, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/delta?after=18446744073709551615", "", "", "Accept", "application/json")
	seq := hdr.Get(DeltaSeqHeader)
	if code != 200 || seq == "" {
		t.Fatalf("after the latest: %d, %s %q", code, DeltaSeqHeader, seq)
	}
	done := make(chan regionDoc, 1)
	go func() {
		_, d, _ := getRegionDoc(t, ts.URL+"/eureka/apps/delta?after="+seq+"&wait=10s&index="+hdr.Get(IndexHeader))
		done <- d
	}()
	time.Sleep(100 * time.Millisecond)
	do(t, "POST", ts.URL+"/eureka/apps/B", "application/json", instanceJSON("B", "b-1"))
	select {
	case d := <-done:
		if !slices.Equal(d.items, []string{"B/b-1:UP"}) || d.hash != "UP_2_" {
			t.Fatalf("changes after %s: %v hash %q, want only B/b-1 under UP_2_", seq, d.items, d.hash)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a blocking ?after= read did not wake on a registration")
	}
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/delta?after=x", "", ""); code != 400 {
		t.Fatalf("after=x: %d, want 400", code)
	}
}

// A change that aged out of the queue makes ?after= from before it 410.
func TestDeltaAfterGone(t *testing.T) {
	fc := &fakeCluster{fsm: fsm.New(time.Millisecond, nil)}
	ts, _ := startTestServer(t, DefaultConfig(), fc, nil)
	do(t, "POST", ts.URL+"/eureka/apps/A", "application/json", instanceJSON("A", "a-1"))
	time.Sleep(20 * time.Millisecond)
	do(t, "POST", ts.URL+"/eureka/apps/B", "application/json", instanceJSON("B", "b-1"))
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/delta?after=0", "", ""); code != http.StatusGone {
		t.Fatalf("after=0 once a-1 aged out: %d, want 410", code)
	}
}

// An application two regions hold is one application: the later region
// (in name order) replaces an instance of the same id, and the hash counts
// what is listed.
func TestRegions_SameApplicationInTwoRegions(t *testing.T) {
	ts, fc := newTestServerWith(t, func(c *Config) { c.Regions = RegionConfig{Names: []string{"legacy", "west"}} })
	loaded := &fsm.RegionStatus{Loaded: true, Reachable: true}
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "legacy", Pass: 1, Final: true, Status: loaded,
		Put: []*fsm.Entry{regionEntry("X", "x-1", fsm.StatusDown), regionEntry("X", "x-2", fsm.StatusUp), regionEntry("L", "l-1", fsm.StatusUp)}})
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 1, Final: true, Status: loaded,
		Put: []*fsm.Entry{regionEntry("X", "x-1", fsm.StatusUp), regionEntry("W", "w-1", fsm.StatusStarting)}})
	_, d, _ := getRegionDoc(t, ts.URL+"/eureka/apps?regions=west,legacy")
	if want := []string{"L/l-1:UP", "X/x-1:UP", "X/x-2:UP", "W/w-1:STARTING"}; !slices.Equal(d.items, want) || d.hash != "STARTING_1_UP_3_" {
		t.Fatalf("regions=legacy,west: %v %q, want %v STARTING_1_UP_3_", d.items, d.hash, want)
	}
	_, d, _ = getRegionDoc(t, ts.URL+"/eureka/apps?regions=legacy")
	if want := []string{"L/l-1:UP", "X/x-1:DOWN", "X/x-2:UP"}; !slices.Equal(d.items, want) || d.hash != "DOWN_1_UP_2_" {
		t.Fatalf("regions=legacy: %v %q", d.items, d.hash)
	}
}

// In a delta an application's deletions come after its other changes:
// the Java client drops a deletion for an application it does not hold
// yet and then takes the delta's whole application, so listed first, a
// cancelled instance would stay in the client's registry (and its hash
// would not match). Both the local and the regions= delta.
func TestDelta_DeletionsAfterAdditions(t *testing.T) {
	ts, fc := newTestServerWith(t, func(c *Config) { c.Regions = RegionConfig{Names: []string{"west"}} })
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 1, Final: true,
		Put: []*fsm.Entry{regionEntry("W", "w-a", fsm.StatusUp)}, Status: &fsm.RegionStatus{Loaded: true, Reachable: true}})
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 2, Final: true, Delete: []fsm.KeyBody{{App: "W", ID: "w-a"}}})
	applyRegionUpdate(t, fc, &fsm.RegionUpdateBody{Region: "west", Pass: 3, Final: true, Put: []*fsm.Entry{regionEntry("W", "w-b", fsm.StatusUp)}})
	do(t, "POST", ts.URL+"/eureka/apps/Q", "application/json", instanceJSON("Q", "a"))
	do(t, "DELETE", ts.URL+"/eureka/apps/Q/a", "", "")
	do(t, "POST", ts.URL+"/eureka/apps/Q", "application/json", instanceJSON("Q", "b"))
	do(t, "POST", ts.URL+"/eureka/apps/Q", "application/json", instanceJSON("Q", "c"))
	for _, path := range []string{"/eureka/apps/delta", "/eureka/apps/delta?regions=west"} {
		code, body, _ := do(t, "GET", ts.URL+path, "", "", "Accept", "application/json")
		if code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		for _, app := range []string{"Q", "W"} {
			if app == "W" && !strings.Contains(path, "regions") {
				continue
			}
			ids := deltaOrder(t, body, app)
			if len(ids) < 2 || ids[len(ids)-1] != map[string]string{"Q": "a:DELETED", "W": "w-a:DELETED"}[app] {
				t.Errorf("%s: %s lists %v, want its deletion last", path, app, ids)
			}
		}
	}
}

// deltaOrder lists "id:ACTION" of one application in a JSON delta, in
// document order.
func deltaOrder(t *testing.T, body, app string) []string {
	t.Helper()
	var doc struct {
		Applications struct {
			Application []struct {
				Name     string `json:"name"`
				Instance []struct {
					ID     string `json:"instanceId"`
					Action string `json:"actionType"`
				} `json:"instance"`
			} `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range doc.Applications.Application {
		if a.Name == app {
			for _, in := range a.Instance {
				out = append(out, in.ID+":"+in.Action)
			}
		}
	}
	return out
}
