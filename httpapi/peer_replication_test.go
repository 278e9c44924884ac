package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

const replHdr = "x-netflix-discovery-replication"

// bareInstance is instanceJSON without its wrapper, as a batch carries it.
func bareInstance(app, id string, ldt int64, overridden string) string {
	s := instanceJSON(app, id)
	s = strings.TrimSuffix(strings.TrimPrefix(s, `{"instance":`), "}")
	s = strings.Replace(s, `"1700000000000"`, `"`+itoa(ldt)+`"`, 1)
	if overridden != "" {
		s = strings.Replace(s, `"status":"UP",`, `"status":"UP","overriddenStatus":"`+overridden+`",`, 1)
	}
	return s
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func getEntry(fc *fakeCluster, app, id string) *fsm.Entry {
	var e *fsm.Entry
	fc.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	return e
}

// TestPeer_SingleRequests: replicated register, heartbeat and cancel with
// the replication header get eureka-server's answers, and the log entries
// are marked replicated.
func TestPeer_SingleRequests(t *testing.T) {
	ts, fc := newTestServer(t)
	var changes []fsm.Change
	fc.Observe(func(c fsm.Change) { changes = append(changes, c) })
	base := ts.URL + "/eureka/apps/SVC"
	body := `{"instance":` + bareInstance("SVC", "i-1", 2000, "OUT_OF_SERVICE") + `}`
	if code, b, _ := do(t, "POST", base, "application/json", body, replHdr, "true"); code != 204 {
		t.Fatalf("replicated register: %d %s", code, b)
	}
	e := getEntry(fc, "SVC", "i-1")
	if e == nil || e.Override != fsm.StatusOutOfService || e.Instance.Status != fsm.StatusOutOfService {
		t.Fatalf("replicated overriddenstatus not stored: %+v", e)
	}
	if len(changes) != 1 || !changes[0].Replicated {
		t.Fatalf("replicated register not marked: %+v", changes)
	}
	cases := []struct {
		path string
		want int
	}{
		{"/i-1?lastDirtyTimestamp=2000", 200},
		{"/i-1", 200},
		{"/i-1?lastDirtyTimestamp=1000", 409}, // stored is newer: the peer gets it
		{"/i-1?lastDirtyTimestamp=3000", 404}, // the peer's is newer: it registers next
		{"/nobody?lastDirtyTimestamp=3000", 404},
		{"/i-1?lastDirtyTimestamp=x", 400},
	}
	for _, c := range cases {
		code, b, _ := do(t, "PUT", base+c.path, "", "", replHdr, "true", "Accept", "application/json")
		if code != c.want {
			t.Fatalf("replicated heartbeat %s: %d %s, want %d", c.path, code, b, c.want)
		}
		if code == 409 && (!strings.Contains(b, `"instanceId":"i-1"`) || !strings.Contains(b, `"lastDirtyTimestamp":"2000"`)) {
			t.Fatalf("409 must carry the stored instance: %s", b)
		}
	}
	// Without the header an older lastDirtyTimestamp is simply renewed.
	if code, b, _ := do(t, "PUT", base+"/i-1?lastDirtyTimestamp=1000", "", ""); code != 200 {
		t.Fatalf("client heartbeat: %d %s", code, b)
	}
	// A replicated write with a bad body gets a client's 400 and records nothing.
	applied := fc.applied
	for _, bad := range []string{`{"instance":{"instanceId":"i-2","app":"SVC"}}`, `{"instance":`, `not json`} {
		if code, b, _ := do(t, "POST", base, "application/json", bad, replHdr, "true"); code != 400 {
			t.Fatalf("replicated register %q: %d %s, want 400", bad, code, b)
		}
	}
	if code, _, _ := do(t, "PUT", base+"/i-1/status?value=ASLEEP", "", "", replHdr, "true"); code != 400 {
		t.Fatalf("replicated status with a bad value: %d, want 400", code)
	}
	if fc.applied != applied {
		t.Fatalf("bad replicated writes recorded %d entries", fc.applied-applied)
	}
	if code, _, _ := do(t, "DELETE", base+"/i-1", "", "", replHdr, "true"); code != 200 {
		t.Fatalf("replicated cancel: %d", code)
	}
	if code, _, _ := do(t, "DELETE", base+"/i-1", "", "", replHdr, "true"); code != 404 {
		t.Fatalf("replicated cancel of an unknown instance: %d", code)
	}
	if last := changes[len(changes)-1]; !last.Replicated || last.Type != fsm.CmdCancel {
		t.Fatalf("replicated cancel not marked: %+v", last)
	}
}

func batchItem(action, app, id string, ldt int64, extra string) string {
	s := `{"appName":"` + app + `","id":"` + id + `","action":"` + action + `"`
	if ldt != 0 {
		s += `,"lastDirtyTimestamp":` + itoa(ldt)
	}
	return s + extra + `}`
}

func postBatch(t *testing.T, url string, items ...string) (int, eureka.ReplicationListResponse, string) {
	t.Helper()
	code, b, _ := do(t, "POST", url+"/eureka/peerreplication/batch", "application/json",
		`{"replicationList":[`+strings.Join(items, ",")+`]}`, replHdr, "true")
	var r eureka.ReplicationListResponse
	if code == 200 {
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("batch response %q: %v", b, err)
		}
	}
	return code, r, b
}

// TestPeer_Batch: each item of a batch gets eureka-server's status code in
// order, a 409 carries the stored instance as responseEntity.
func TestPeer_Batch(t *testing.T) {
	ts, fc := newTestServer(t)
	code, r, b := postBatch(t, ts.URL,
		batchItem("Register", "SVC", "i-1", 2000, `,"instanceInfo":`+bareInstance("SVC", "i-1", 2000, "")),
		batchItem("Register", "SVC", "i-2", 2000, `,"instanceInfo":`+bareInstance("SVC", "i-2", 2000, "")),
		batchItem("Heartbeat", "SVC", "i-1", 2000, `,"status":"UP","overriddenStatus":"UNKNOWN"`),
		batchItem("Heartbeat", "SVC", "i-1", 1000, ""),
		batchItem("Heartbeat", "SVC", "ghost", 1000, ""),
		batchItem("StatusUpdate", "SVC", "i-2", 2100, `,"status":"DOWN"`),
		batchItem("DeleteStatusOverride", "SVC", "i-2", 2200, `,"status":"UP"`),
		batchItem("Cancel", "SVC", "i-1", 0, ""),
		batchItem("Cancel", "SVC", "ghost", 0, ""),
	)
	if code != 200 {
		t.Fatalf("batch: %d %s", code, b)
	}
	want := []int{200, 200, 200, 409, 404, 200, 200, 200, 404}
	if len(r.ResponseList) != len(want) {
		t.Fatalf("responses %s", b)
	}
	for i, w := range want {
		if r.ResponseList[i].StatusCode != w {
			t.Fatalf("item %d: %d, want %d (%s)", i, r.ResponseList[i].StatusCode, w, b)
		}
	}
	ent := string(r.ResponseList[3].ResponseEntity)
	if !strings.HasPrefix(ent, `{"instanceId":"i-1"`) || !strings.Contains(ent, `"lastDirtyTimestamp":"2000"`) {
		t.Fatalf("409 entity must be the bare stored instance: %s", ent)
	}
	if getEntry(fc, "SVC", "i-1") != nil {
		t.Fatal("cancelled instance still registered")
	}
	e := getEntry(fc, "SVC", "i-2")
	if e == nil || e.Instance.Status != fsm.StatusUp || e.Override != "" || e.Instance.LastDirtyTimestamp != 2200 {
		t.Fatalf("status update then override removal: %+v", e)
	}
	if fc.replicatedRenews == 0 {
		t.Fatal("batch heartbeats must renew as replicated")
	}
}

// TestPeer_BadBatches: a torn batch, an unknown action or an instance that
// cannot be read refuses the whole batch with 400 and records nothing; bad
// items get eureka-server's per-item answers and record nothing.
func TestPeer_BadBatches(t *testing.T) {
	ts, fc := newTestServer(t)
	good := batchItem("Register", "SVC", "i-1", 2000, `,"instanceInfo":`+bareInstance("SVC", "i-1", 2000, ""))
	for name, body := range map[string]string{
		"torn":           `{"replicationList":[` + good + `,{"appName":"SVC","id":"i-2","act`,
		"not json":       `replicationList=1`,
		"unknown action": `{"replicationList":[` + good + `,` + batchItem("Evict", "SVC", "i-1", 0, "") + `]}`,
		"wrong type":     `{"replicationList":[` + good + `,{"appName":"SVC","id":"i-1","action":"Heartbeat","lastDirtyTimestamp":"yesterday"}]}`,
		"bad instance":   `{"replicationList":[` + good + `,` + batchItem("Register", "SVC", "i-2", 0, `,"instanceInfo":{"instanceId":"i-2","dataCenterInfo":{"name":"Mars"}}`) + `]}`,
		"list not array": `{"replicationList":{}}`,
	} {
		code, b, _ := do(t, "POST", ts.URL+"/eureka/peerreplication/batch", "application/json", body, replHdr, "true")
		if code != 400 || !strings.Contains(b, "error") {
			t.Fatalf("%s: %d %s, want 400 with a message", name, code, b)
		}
		if fc.applied != 0 {
			t.Fatalf("%s: %d writes recorded from a refused batch", name, fc.applied)
		}
	}
	code, r, b := postBatch(t, ts.URL,
		batchItem("Register", "SVC", "i-9", 0, ""),                                                     // no instanceInfo: 500
		batchItem("Register", "SVC", "i-9", 0, `,"instanceInfo":`+bareInstance("OTHER", "i-9", 1, "")), // app mismatch: 200, ignored
		good,
		batchItem("StatusUpdate", "SVC", "i-1", 2100, `,"status":"SLEEPING"`), // 500
		batchItem("DeleteStatusOverride", "SVC", "i-1", 0, ""),                // no lastDirtyTimestamp: 500
		`{"appName":"SVC","id":"i-1"}`,                                        // no action: 500
	)
	if code != 200 {
		t.Fatalf("batch: %d %s", code, b)
	}
	want := []int{500, 200, 200, 500, 500, 500}
	for i, w := range want {
		if r.ResponseList[i].StatusCode != w {
			t.Fatalf("item %d: %d, want %d (%s)", i, r.ResponseList[i].StatusCode, w, b)
		}
	}
	if fc.applied != 1 || getEntry(fc, "SVC", "i-9") != nil || getEntry(fc, "OTHER", "i-9") != nil {
		t.Fatalf("bad items recorded something: %d writes", fc.applied)
	}
	if e := getEntry(fc, "SVC", "i-1"); e.Instance.Status != fsm.StatusUp {
		t.Fatalf("bad status update changed the status: %+v", e.Instance)
	}
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/peerreplication/batch", "", ""); code != 405 {
		t.Fatalf("GET batch: %d, want 405", code)
	}
}

// withMetadata replaces an instance's metadata block with n entries.
func withMetadata(instance string, n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Replace(instance, `"metadata":{"zone":"a"}`, `"metadata":{`+strings.Join(entries, ",")+`}`, 1)
}

// TestPeer_BatchRegisterAppliesInputLimits: a batch's registrations pass
// the limits a client's registration passes. A refused item gets
// eureka-server's answer to a register it refused (200) and records
// nothing: an instance the /apps paths could not then read, renew or
// cancel never enters the registry.
func TestPeer_BatchRegisterAppliesInputLimits(t *testing.T) {
	ts, fc := newStrictServer(t, true)
	long := strings.Repeat("L", 300)
	register := func(app, id string, instance string) string {
		return batchItem("Register", app, id, 2000, `,"instanceInfo":`+instance)
	}
	control := strings.ReplaceAll(bareInstance("SVC", "cXd", 2000, ""), "cXd", `c\u0001d`)
	code, r, b := postBatch(t, ts.URL,
		register("SVC", "a/b", bareInstance("SVC", "a/b", 2000, "")),
		register("SVC", `c\u0001d`, control),
		register(long, "i-long", bareInstance(long, "i-long", 2000, "")),
		register("SVC", "i-md", withMetadata(bareInstance("SVC", "i-md", 2000, ""), 1100)),
		register("SVC", "i-ok", bareInstance("SVC", "i-ok", 2000, "")),
	)
	if code != 200 || len(r.ResponseList) != 5 {
		t.Fatalf("batch: %d %.300s", code, b)
	}
	for i, item := range r.ResponseList {
		if item.StatusCode != 200 {
			t.Errorf("item %d: %d, want eureka-server's 200", i, item.StatusCode)
		}
	}
	var ids []string
	fc.Read(func(reg *fsm.Registry) { reg.Each(func(e *fsm.Entry) { ids = append(ids, e.App+"/"+e.ID) }) })
	if fc.applied != 1 || len(ids) != 1 || ids[0] != "SVC/i-ok" {
		t.Fatalf("refused items recorded: %d writes, registry %q", fc.applied, ids)
	}
}

// A peer's header is recognised however its name and value are cased, as
// net/http hands it over, and asking costs a heartbeat no allocation.
func TestIsReplication_AnyCaseNoAllocation(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{replHdr, "true", true},
		{"X-Netflix-Discovery-Replication", "TRUE", true},
		{"X-NETFLIX-DISCOVERY-REPLICATION", "True", true},
		{replHdr, "false", false},
		{replHdr, "", false},
		{"x-netflix-discovery", "true", false},
	} {
		r := httptest.NewRequest(http.MethodPut, "/eureka/apps/A/a", nil)
		r.Header.Set(tc.name, tc.value)
		c := &gin.Context{Request: r}
		if got := isReplication(c); got != tc.want {
			t.Errorf("%s: %q: got %v, want %v", tc.name, tc.value, got, tc.want)
		}
		if n := testing.AllocsPerRun(100, func() { isReplication(c) }); n != 0 {
			t.Errorf("%s: %q: %v allocations a call, want 0", tc.name, tc.value, n)
		}
	}
	if isReplication(&gin.Context{Request: httptest.NewRequest(http.MethodPut, "/eureka/apps/A/a", nil)}) {
		t.Error("a request without the header counted as replication")
	}
}
