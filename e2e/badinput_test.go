package e2e

// Bad input (docs/eureka-api.md, "Status codes and bodies"). Malformed JSON or XML, wrong types, an
// instance whose app disagrees with the path, unknown status values and bad
// query parameters must get 400 with a message, and nothing may be recorded:
// the leader's commit index, every node's registry version and every node's
// registry stay as they were.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// biCase is one bad request.
type biCase struct {
	name        string
	method      string
	path        string // after the node's base URL
	contentType string // "" for no body
	body        string
	wantMsg     string // exact error message, or "" for any non-empty one
}

// biJSON is a valid JSON register body for app BADIN with the given
// instance fields replaced (raw JSON values).
func biJSON(id string, fields map[string]string) string {
	base := map[string]string{
		"instanceId":     `"` + id + `"`,
		"hostName":       `"` + id + `.bad.test"`,
		"app":            `"BADIN"`,
		"ipAddr":         `"10.9.9.9"`,
		"status":         `"UP"`,
		"port":           `{"$": 8080, "@enabled": "true"}`,
		"dataCenterInfo": `{"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"}`,
	}
	for k, v := range fields {
		if v == "" {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	keys := make([]string, 0, len(base))
	for k := range base {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%q: %s", k, base[k]))
	}
	return `{"instance": {` + strings.Join(parts, ", ") + `}}`
}

// biXML is a valid XML register body (fargo's shape) for app BADIN with the
// given child elements replaced (raw XML), in a fixed order.
func biXML(id string, fields map[string]string) string {
	order := []string{"instanceId", "hostName", "app", "ipAddr", "status", "overriddenstatus", "port", "dataCenterInfo"}
	base := map[string]string{
		"instanceId":       "<instanceId>" + id + "</instanceId>",
		"hostName":         "<hostName>" + id + ".bad.test</hostName>",
		"app":              "<app>BADIN</app>",
		"ipAddr":           "<ipAddr>10.9.9.9</ipAddr>",
		"status":           "<status>UP</status>",
		"overriddenstatus": "<overriddenstatus></overriddenstatus>",
		"port":             `<port enabled="true">8080</port>`,
		"dataCenterInfo":   "<dataCenterInfo><name>MyOwn</name><metadata></metadata></dataCenterInfo>",
	}
	for k, v := range fields {
		base[k] = v
	}
	var b strings.Builder
	b.WriteString("<instance>")
	for _, k := range order {
		b.WriteString(base[k])
	}
	b.WriteString("</instance>")
	return b.String()
}

func biCases() []biCase {
	const (
		js  = "application/json"
		xm  = "application/xml"
		reg = "/eureka/apps/badin"
	)
	j := func(name string, fields map[string]string) biCase {
		return biCase{name: "json/" + name, method: "POST", path: reg, contentType: js, body: biJSON("bad-"+name, fields)}
	}
	x := func(name string, fields map[string]string) biCase {
		return biCase{name: "xml/" + name, method: "POST", path: reg, contentType: xm, body: biXML("bad-"+name, fields)}
	}
	withMsg := func(c biCase, msg string) biCase { c.wantMsg = msg; return c }
	cases := []biCase{
		// Malformed documents.
		{name: "json/truncated", method: "POST", path: reg, contentType: js, body: `{"instance": {"instanceId": "bad-1", "app": "BADIN"`},
		{name: "json/trailing-comma", method: "POST", path: reg, contentType: js, body: `{"instance": {"instanceId": "bad-2", "app": "BADIN",}}`},
		{name: "json/garbage-after", method: "POST", path: reg, contentType: js, body: biJSON("bad-3", nil) + " {}"},
		{name: "json/not-json", method: "POST", path: reg, contentType: js, body: `instance=bad-4&app=BADIN`},
		{name: "json/array-root", method: "POST", path: reg, contentType: js, body: `[` + biJSON("bad-5", nil) + `]`},
		{name: "json/null", method: "POST", path: reg, contentType: js, body: `null`},
		{name: "json/empty", method: "POST", path: reg, contentType: js, body: ``},
		{name: "json/truncated-invalid-utf8", method: "POST", path: reg, contentType: js, body: "{\"instance\": {\"instanceId\": \"bad-\xff\xfe\", \"app\": \"BADIN\""},
		{name: "xml/unclosed", method: "POST", path: reg, contentType: xm, body: `<instance><instanceId>bad-6</instanceId><app>BADIN</app>`},
		{name: "xml/mismatched-tags", method: "POST", path: reg, contentType: xm, body: strings.Replace(biXML("bad-7", nil), "</app>", "</ap>", 1)},
		{name: "xml/wrong-root", method: "POST", path: reg, contentType: xm, body: `<application><name>BADIN</name></application>`},
		{name: "xml/not-xml", method: "POST", path: reg, contentType: xm, body: `<<instance>>`},
		// Wrong types.
		j("port-object-in-number", map[string]string{"port": `{"$": {"n": 1}, "@enabled": "true"}`}),
		j("port-too-big", map[string]string{"port": `{"$": 99999999999, "@enabled": "true"}`}),
		j("hostname-array", map[string]string{"hostName": `["a", "b"]`}),
		j("metadata-string", map[string]string{"metadata": `"zone=a"`}),
		j("metadata-nested", map[string]string{"metadata": `{"zone": {"name": "a"}}`}),
		j("datacenter-string", map[string]string{"dataCenterInfo": `"MyOwn"`}),
		j("instance-string", map[string]string{"instanceId": `{"id": 1}`}),
		{name: "json/instance-not-object", method: "POST", path: reg, contentType: js, body: `{"instance": "bad-8"}`},
		x("port-word", map[string]string{"port": `<port enabled="true">eighty</port>`}),
		x("hostname-element", map[string]string{"hostName": `<hostName><first>a</first></hostName>`}),
		// The body's app disagrees with the path.
		withMsg(j("app-mismatch", map[string]string{"app": `"OTHER"`}), "Mismatched appName, expecting BADIN but was OTHER"),
		withMsg(x("app-mismatch", map[string]string{"app": "<app>other</app>"}), "Mismatched appName, expecting BADIN but was OTHER"),
		// Eureka's register validations (docs/eureka-api.md, "Register").
		withMsg(j("no-ids", map[string]string{"instanceId": "", "hostName": ""}), "Missing instanceId"),
		withMsg(j("no-ip", map[string]string{"ipAddr": ""}), "Missing ip address"),
		withMsg(j("no-app", map[string]string{"app": ""}), "Missing appName"),
		withMsg(j("no-datacenter", map[string]string{"dataCenterInfo": ""}), "Missing dataCenterInfo"),
		// A data-center name Eureka's codecs cannot read. (Unknown status
		// values and non-numeric JSON numbers are accepted, as eureka-server
		// accepts them: see TestOddBodiesAccepted.)
		j("datacenter-lower-case", map[string]string{"dataCenterInfo": `{"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "myown"}`}),
		x("datacenter-unknown", map[string]string{"dataCenterInfo": `<dataCenterInfo><name>Google</name></dataCenterInfo>`}),
		// Bad query parameters on the instance endpoints (heureka answers 400
		// where Eureka lets a parse exception become a 500).
		{name: "override/unknown", method: "PUT", path: "/eureka/apps/BADIN/keep-1/status?value=HAPPY"},
		{name: "override/lower-case", method: "PUT", path: "/eureka/apps/BADIN/keep-1/status?value=out_of_service"},
		{name: "override/missing", method: "PUT", path: "/eureka/apps/BADIN/keep-1/status"},
		{name: "override/bad-ldt", method: "PUT", path: "/eureka/apps/BADIN/keep-1/status?value=DOWN&lastDirtyTimestamp=soon"},
		{name: "override-delete/unknown", method: "DELETE", path: "/eureka/apps/BADIN/keep-1/status?value=NOPE"},
		{name: "override-delete/bad-ldt", method: "DELETE", path: "/eureka/apps/BADIN/keep-1/status?lastDirtyTimestamp=-5"},
		{name: "renew/bad-ldt", method: "PUT", path: "/eureka/apps/BADIN/keep-1?lastDirtyTimestamp=abc"},
	}
	return cases
}

func TestBadInput(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3, Options{ExtraArgs: edCacheArgs})
	leader := c.WaitLeader(t, 15*time.Second)
	follower := c.Followers(leader)[0]

	// One good instance, so the instance endpoints have a target and the
	// registry is not trivially empty.
	RegisterJSON(t, follower.BaseURL(), "badin", "keep-1", map[string]any{
		"metadata": map[string]any{"zone": "a"},
	})
	waitCommitStable(t, c, 1200*time.Millisecond, 15*time.Second)
	type nodeState struct {
		version uint64
		states  []string
		hash    string
	}
	snapshot := func() (Status, map[string]nodeState) {
		out := map[string]nodeState{}
		for _, nd := range c.Nodes {
			st := nd.Status(t)
			var doc edDoc
			var err error
			// Wait for each node's cached full registry to show the good
			// instance (it may be up to one cache refresh behind).
			WaitFor(t, 5*time.Second, func() bool {
				doc, err = edFetch(nd.URL("/eureka/apps"), "json")
				return err == nil && len(doc.Instances) == 1
			}, nd.ID+" to list BADIN/keep-1")
			out[nd.ID] = nodeState{version: st.RegistryVersion, states: edStates(doc.Instances), hash: doc.HashCode}
		}
		return leader.Status(t), out
	}
	leaderBefore, before := snapshot()
	commitBefore := leaderBefore.CommitIndex

	for _, tc := range biCases() {
		for _, nd := range []*Node{follower, leader} {
			var body []byte
			headers := []string{"Accept", "application/json"}
			if tc.method == "POST" {
				body = []byte(tc.body)
				headers = append(headers, "Content-Type", tc.contentType)
			}
			code, resp, hdr := Do(t, tc.method, nd.URL(tc.path), body, headers...)
			what := fmt.Sprintf("%s via %s (%s %s)", tc.name, nd.ID, tc.method, tc.path)
			if code != http.StatusBadRequest {
				t.Errorf("%s: got %d %q, want 400", what, code, resp)
				continue
			}
			var msg struct {
				Error *string `json:"error"`
			}
			if err := json.Unmarshal(resp, &msg); err != nil || msg.Error == nil || strings.TrimSpace(*msg.Error) == "" {
				t.Errorf("%s: 400 body %q (Content-Type %q) carries no {\"error\": message}", what, resp, hdr.Get("Content-Type"))
				continue
			}
			if tc.wantMsg != "" && *msg.Error != tc.wantMsg {
				t.Errorf("%s: message %q, want %q", what, *msg.Error, tc.wantMsg)
			}
			if nd == follower && testing.Verbose() {
				t.Logf("%-36s 400 %s", tc.name, *msg.Error)
			}
		}
	}

	// Nothing was recorded: the leader committed nothing, no node's registry
	// moved, and every node still serves exactly the one good instance.
	leaderAfter, after := snapshot()
	switch {
	case leaderAfter.Term != leaderBefore.Term || leaderAfter.State != "Leader":
		// A new term appends a no-op entry of its own; the registry checks
		// below still stand.
		t.Logf("leadership changed during the test (term %d -> %d); commit index check skipped", leaderBefore.Term, leaderAfter.Term)
	case leaderAfter.CommitIndex != commitBefore:
		t.Errorf("leader %s commit_index moved from %d to %d while only bad requests were sent", leader.ID, commitBefore, leaderAfter.CommitIndex)
	}
	for id, b := range before {
		a := after[id]
		if a.version != b.version {
			t.Errorf("%s: registry_version moved from %d to %d", id, b.version, a.version)
		}
		if !slices.Equal(a.states, b.states) || a.hash != b.hash {
			t.Errorf("%s: registry changed: before %q (%s), after %q (%s)", id, b.states, b.hash, a.states, a.hash)
		}
	}
	for _, nd := range c.Nodes {
		if code, _, _ := Do(t, "GET", nd.URL("/eureka/apps/BADIN/keep-1"), nil); code != http.StatusOK {
			t.Errorf("%s: the good instance answers %d after the bad requests", nd.ID, code)
		}
		if code, _, _ := Do(t, "GET", nd.URL("/eureka/apps/OTHER"), nil); code != http.StatusNotFound {
			t.Errorf("%s: GET /eureka/apps/OTHER answers %d, want 404", nd.ID, code)
		}
	}

	// The commit index is a live measure: a good write still goes through
	// and moves it.
	RegisterJSON(t, follower.BaseURL(), "badin", "keep-2", nil)
	WaitFor(t, 5*time.Second, func() bool {
		st, err := leader.TryStatus()
		return err == nil && st.CommitIndex > commitBefore
	}, "the leader's commit index to move after a good write")
	t.Logf("TestBadInput took %v", time.Since(start).Round(time.Millisecond))
}
