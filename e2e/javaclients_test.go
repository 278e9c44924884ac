package e2e

// The clients most Eureka users run: Spring Cloud Netflix's Eureka
// client (e2e/springclient, a Spring Boot app built by Maven from `make
// deps`), Netflix's plain eureka-client (a main class in the same jar, no
// Spring context) and py-eureka-client from PyPI (e2e/pyclient), all against
// a 3-node cluster. py-eureka-client registers in JSON and reads the registry
// in XML.
//
// The Java clients run twice, once with JSON and once with XML on the wire,
// each time against a fresh cluster behind a recording proxy (wiretap_test.go)
// that shows which format each request and answer really had:
//   - JSON: Spring's default transport (RestTemplate, Spring Cloud Netflix
//     4.3) and the plain client on eureka-client 2.0's Jersey 3 transport.
//   - XML: no Eureka client transport has an XML setting. Spring's own
//     transports (RestTemplateEurekaHttpClient, RestClientEurekaHttpClient,
//     WebClientEurekaHttpClient) set Content-Type and Accept to
//     application/json and read with a Jackson-only converter or codec;
//     eureka-client's Jersey 3 transport (AbstractJersey3EurekaHttpClient)
//     also hard-codes application/json, and EurekaClientConfig's
//     getEncoderName/getDecoderName only pick the JSON codec, while
//     getClientDataAccept only adds "X-Eureka-Accept: compact". But the
//     Jersey 3 transport's body provider (DiscoveryJerseyProvider) reads and
//     writes XML with Eureka's XStream codec whenever the media type says so,
//     and request filters are its extension point: a filter (WireFilter)
//     switches Accept and the registration's Content-Type to XML. The plain
//     client gets it directly; Spring's client runs on the Jersey 3 transport
//     by declaring Jersey3TransportClientFactories and
//     Jersey3DiscoveryClientOptionalArgs beans (XmlTransportConfig), the way
//     Spring Cloud Netflix 4.3 leaves the choice of Jersey to the application.
// The evidence: docs/eureka-compat.md, "Eureka's Java clients and XML".

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	springJar     = "springclient/target/springclient.jar"
	pyVenvPython  = "pyclient/.venv/bin/python"
	pyScenario    = "pyclient/scenario.py"
	clientTimeout = 60 * time.Second // bound of each wait on a client
)

// javaTools finds java and the Spring client jar.
func javaTools() (java, jar string, err error) {
	if java, err = exec.LookPath("java"); err != nil {
		return "", "", fmt.Errorf("java is not installed (%v)", err)
	}
	jar, _ = filepath.Abs(springJar)
	if _, err := os.Stat(jar); err != nil {
		return "", "", fmt.Errorf("e2e/%s is not built (run `make deps`, i.e. mvn package in e2e/springclient): %v", springJar, err)
	}
	return java, jar, nil
}

// jvmArgs keep a client JVM's start-up cheap on a small machine.
var jvmArgs = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xss512k"}

// springState is the Spring app's GET /state.
type springState struct {
	Services       map[string][]string          `json:"services"`
	Statuses       map[string]map[string]string `json:"statuses"`
	AppsHashCode   string                       `json:"appsHashCode"`
	FullFetches    int                          `json:"fullFetches"`
	DeltaFetches   int                          `json:"deltaFetches"`
	HashMismatches int                          `json:"hashMismatches"`
	DeltaRefused   int                          `json:"deltaRefused"`
	FetchErrors    int                          `json:"fetchErrors"`
	Errors         int                          `json:"errors"`
	ParseErrors    int                          `json:"parseErrors"`
	InstanceID     string                       `json:"instanceId"`
	Status         string                       `json:"status"`
	Transport      string                       `json:"transport"`
}

// oddBody is a register body eureka-server accepts although it is odd, and
// the status heureka must store for it.
type oddBody struct {
	app, id, contentType, body, status string
}

// oddBodies are registered before the clients start: every client must parse
// a registry holding them.
func oddBodies() []oddBody {
	j := func(id, status string, fields string) oddBody {
		body := `{"instance":{"instanceId":"` + id + `","hostName":"` + id + `.odd.test","app":"oddjson","ipAddr":"10.1.1.1",` +
			`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
			`"leaseInfo":{"durationInSecs":600}` + fields + `}}`
		return oddBody{"ODDJSON", id, "application/json", body, status}
	}
	x := func(id, status, fields string) oddBody {
		body := `<instance><instanceId>` + id + `</instanceId><hostName>` + id + `.odd.test</hostName><app>oddxml</app>` +
			`<ipAddr>10.1.1.2</ipAddr><leaseInfo><durationInSecs>600</durationInSecs></leaseInfo>` + fields + `</instance>`
		return oddBody{"ODDXML", id, "application/xml", body, status}
	}
	return []oddBody{
		j("status-lower", "UNKNOWN", `,"status":"up"`),
		j("status-bogus", "UNKNOWN", `,"status":"bogus"`),
		j("status-empty", "UNKNOWN", `,"status":""`),
		j("port-word", "UP", `,"port":{"$":"eighty","@enabled":"true"}`),
		j("port-bare", "UP", `,"port":8080`),
		j("port-fraction", "UP", `,"port":{"$":80.5,"@enabled":true},"securePort":{"$":"443","@enabled":"false"}`),
		j("country-word", "UP", `,"countryId":"one"`),
		j("ldt-word", "UP", `,"lastDirtyTimestamp":"yesterday"`),
		j("override-legacy", "OUT_OF_SERVICE", `,"overriddenstatus":"OUT_OF_SERVICE"`),
		j("metadata-odd", "UP", `,"metadata":{"@class":"java.util.Collections$EmptyMap","n":1.5,"b":false,"z":null,"a.b:c":"é ü"}`),
		j("vip-spaces", "UP", `,"vipAddress":" odd-a , odd-b ","secureVipAddress":"odd-s,"`),
		j("auto-fields", "UP", `,"homePageUrl":"http://x/","asgName":"asg","appGroupName":"grp","isCoordinatingDiscoveryServer":"true"`),
		{"ODDJSON", "i-amazon", "application/json", `{"instance":{"hostName":"amazon.odd.test","app":"ODDJSON","ipAddr":"10.1.1.3",` +
			`"leaseInfo":{"durationInSecs":600},"dataCenterInfo":{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon",` +
			`"metadata":{"instance-id":"i-amazon","availability-zone":"z1"}}}}`, "UP"},
		{"ODDJSON", "amazon-noid.odd.test", "application/json", `{"instance":{"hostName":"amazon-noid.odd.test","app":"ODDJSON","ipAddr":"10.1.1.4",` +
			`"leaseInfo":{"durationInSecs":600},"dataCenterInfo":{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon",` +
			`"metadata":{"availability-zone":"z1"}}}}`, "UP"},
		x("xml-status-lower", "DOWN", `<status>down</status><dataCenterInfo><name>MyOwn</name></dataCenterInfo>`),
		x("xml-status-bogus", "UNKNOWN", `<status>SLEEPY</status><dataCenterInfo><name>MyOwn</name></dataCenterInfo>`),
		x("xml-lease-word", "UP", `<dataCenterInfo><name>MyOwn</name></dataCenterInfo><leaseInfo><renewalIntervalInSecs>x</renewalIntervalInSecs></leaseInfo>`),
		x("xml-amazon-lower", "UP", `<dataCenterInfo><name>amazon</name><metadata><availability-zone>z1</availability-zone></metadata></dataCenterInfo>`),
		x("xml-metadata", "UP", `<dataCenterInfo><name>Netflix</name></dataCenterInfo><metadata><a__b>1</a__b><k>&lt;v&gt;</k></metadata>`),
	}
}

func registerOddBodies(t *testing.T, nodeURL string) map[string]string {
	t.Helper()
	want := map[string]string{}
	for _, b := range oddBodies() {
		// A leader election on a loaded machine answers 503: retry, as clients do.
		var code int
		var body []byte
		for try := 0; try < 20; try++ {
			if code, body, _ = Do(t, "POST", nodeURL+"/eureka/apps/"+b.app, []byte(b.body), "Content-Type", b.contentType); code != 503 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if code != 204 {
			t.Fatalf("register odd body %s/%s: %d %s", b.app, b.id, code, body)
		}
		want[b.app+"/"+b.id] = b.status
	}
	return want
}

// springStateOf reads the Spring app's /state.
func springStateOf(base string) (springState, error) {
	var st springState
	code, body, _, err := TryDo("GET", base+"/state", nil)
	if err != nil {
		return st, err
	}
	if code != 200 {
		return st, fmt.Errorf("GET /state: %d %s", code, body)
	}
	return st, json.Unmarshal(body, &st)
}

// instanceStatus is the status of app/id on a node ("" when absent).
func instanceStatus(nodeURL, app, id string) string {
	code, body, _, err := TryDo("GET", nodeURL+"/eureka/apps/"+app+"/"+id+"?consistency=stale", nil)
	if err != nil || code != 200 {
		return ""
	}
	var doc struct {
		Instance struct {
			Status string `json:"status"`
		} `json:"instance"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	return doc.Instance.Status
}

// lastRenewal is app/id's lastRenewalTimestamp (0 when absent), read
// linearizably from the leader: the response cache does not change on
// heartbeats, a fresh build shows them.
func lastRenewal(leaderURL, app, id string) int64 {
	_, body, _, err := TryDo("GET", leaderURL+"/eureka/apps/"+app+"/"+id+"?consistency=linearizable", nil)
	if err != nil {
		return 0
	}
	var doc struct {
		Instance struct {
			LeaseInfo struct {
				LastRenewal int64 `json:"lastRenewalTimestamp"`
			} `json:"leaseInfo"`
		} `json:"instance"`
	}
	_ = json.Unmarshal(body, &doc)
	return doc.Instance.LeaseInfo.LastRenewal
}

// waitHeartbeats waits until app/id's last renewal on the leader moves
// forward twice, which only heartbeats do.
func waitHeartbeats(t *testing.T, c *Cluster, app, id string) {
	t.Helper()
	leader := c.WaitLeader(t, 15*time.Second).BaseURL()
	first := lastRenewal(leader, app, id)
	var seen []int64
	WaitFor(t, clientTimeout, func() bool {
		r := lastRenewal(leader, app, id)
		if r > first && (len(seen) == 0 || r > seen[len(seen)-1]) {
			seen = append(seen, r)
		}
		return len(seen) >= 2
	}, fmt.Sprintf("heartbeats of %s/%s (last renewal stayed at %d)", app, id, first))
}

// registerRetrying registers app/id through REST, retrying for a while
// when a leader election on a loaded machine makes the node answer 503.
func registerRetrying(t *testing.T, nodeURL, app, id string) {
	t.Helper()
	var err error
	if !Eventually(clientTimeout/2, func() bool {
		err = TryRegisterJSON(nodeURL, app, id, nil)
		return err == nil
	}) {
		t.Fatalf("register %s/%s: %v", app, id, err)
	}
}

// renewCount is how many heartbeats a node has answered (its
// heureka_http_requests_total for the renew route), or -1.
func renewCount(nd *Node) float64 {
	code, body, _, err := TryDo("GET", nd.URL("/metrics"), nil, "Accept", "text/plain")
	if err != nil || code != 200 {
		return -1
	}
	var n float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "heureka_http_requests_total{") && strings.Contains(line, `route="eureka_renew"`) {
			if f := strings.Fields(line); len(f) == 2 {
				var v float64
				if _, err := fmt.Sscan(f[1], &v); err == nil {
					n += v
				}
			}
		}
	}
	return n
}

// heartbeatTarget is the node whose renew count grows the most over three
// seconds: the one the (only heartbeating) client talks to.
func heartbeatTarget(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	before := make([]float64, len(nodes))
	for i, nd := range nodes {
		before[i] = renewCount(nd)
	}
	time.Sleep(3 * time.Second)
	best, most := nodes[0], 0.0
	for i, nd := range nodes {
		if d := renewCount(nd) - before[i]; d > most {
			best, most = nd, d
		}
	}
	if most == 0 {
		t.Fatalf("no node answered a heartbeat in 3 s")
	}
	return best
}

// wireTypes are the media types the Java clients' runs put on the wire.
var wireTypes = map[string]string{"json": "application/json", "xml": "application/xml"}

func TestEurekaClients(t *testing.T) {
	java, jar, err := javaTools()
	ToolOrSkip(t, "Spring Cloud client", err)
	start := time.Now()
	for _, codec := range []string{"json", "xml"} {
		t.Run(codec, func(t *testing.T) { runEurekaClients(t, java, jar, codec) })
	}
	t.Logf("TestEurekaClients took %.1fs", time.Since(start).Seconds())
}

// runEurekaClients runs the Spring client's scenario, the plain client's and
// (for json) py-eureka-client's against a fresh 3-node cluster, the Java
// clients with codec ("json" or "xml") on the wire.
func runEurekaClients(t *testing.T, java, jar, codec string) {
	start := time.Now()
	c := StartCluster(t, 3, Options{ExtraArgs: edCacheArgs})
	c.WaitLeader(t, 15*time.Second)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	tap := startWireTap(t, c.Nodes)
	zone := tap.URL(n1, "/eureka/") + "," + tap.URL(n2, "/eureka/") + "," + tap.URL(n3, "/eureka/")
	odd := registerOddBodies(t, n2.BaseURL())
	for key, status := range odd {
		app, id, _ := strings.Cut(key, "/")
		if got := instanceStatus(n2.BaseURL(), app, id); got != status {
			t.Errorf("odd body %s stored with status %q, want %q", key, got, status)
		}
	}

	props := []string{"--eureka.instance.instance-id=spring-1", "--eureka.client.service-url.defaultZone=" + zone}
	if codec == "xml" {
		props = append(props, "--heureka.codec=xml", "--eureka.client.jersey.enabled=true")
	}
	spring := startSpringApp(t, "springclient-"+codec, java, jar, props...)
	sbase, state, failf := spring.base, spring.state, spring.failf

	// It registers and heartbeats, on every node.
	if !Eventually(2*clientTimeout, func() bool {
		for _, nd := range c.Nodes {
			if instanceStatus(nd.BaseURL(), "SPRINGCLIENT", "spring-1") != "UP" {
				return false
			}
		}
		return true
	}) {
		failf("the Spring client did not show up UP on every node (running %v)", spring.Running())
	}
	t.Logf("Spring client (%s transport) registered %.1fs after the cluster was up", state().Transport, time.Since(start).Seconds())
	waitHeartbeats(t, c, "SPRINGCLIENT", "spring-1")

	// It parsed a registry holding every odd-but-accepted body, with the
	// statuses heureka stored.
	if !Eventually(clientTimeout, func() bool {
		s := state()
		for key, status := range odd {
			app, id, _ := strings.Cut(key, "/")
			if s.Statuses[app][id] != status {
				return false
			}
		}
		return true
	}) {
		failf("the Spring client does not see the odd instances as stored: want %v", odd)
	}

	// An app registered through REST on another node shows up in its
	// DiscoveryClient, through deltas: no further full fetch, no hash mismatch.
	fullBefore := state().FullFetches
	registerRetrying(t, n3.BaseURL(), "RESTAPP", "rest-1")
	if !Eventually(clientTimeout, func() bool {
		return len(state().Services["RESTAPP"]) == 1
	}) {
		failf("RESTAPP registered on n3 did not show up in DiscoveryClient")
	}
	s := state()
	// Transport hiccups on a loaded machine (a pooled connection timing
	// out) are logged as errors too; only a document the client could not
	// read, a hash mismatch or a refused delta counts against heureka.
	if s.FullFetches != fullBefore || s.DeltaFetches == 0 || s.HashMismatches != 0 || s.DeltaRefused != 0 ||
		s.ParseErrors != 0 {
		failf("want deltas only after the first full fetch, no mismatch and no unreadable document")
	}
	t.Logf("Spring client: %d full fetch(es), %d deltas, %d hash mismatches, %d unreadable documents, %d fetch errors, %d errors logged",
		s.FullFetches, s.DeltaFetches, s.HashMismatches, s.ParseErrors, s.FetchErrors, s.Errors)

	// A status change through ApplicationInfoManager reaches every node.
	for _, status := range []string{"DOWN", "UP"} {
		if code, body, _ := Do(t, "POST", sbase+"/status?value="+status, nil); code != 200 {
			failf("POST /status: %d %s", code, body)
		}
		if !Eventually(clientTimeout, func() bool {
			for _, nd := range c.Nodes {
				if instanceStatus(nd.BaseURL(), "SPRINGCLIENT", "spring-1") != status {
					return false
				}
			}
			return true
		}) {
			failf("status %s set in the app did not reach every node", status)
		}
	}
	if s := state(); s.HashMismatches != 0 || s.FullFetches != fullBefore {
		failf("status changes caused a hash mismatch or a full fetch")
	}

	// The first node of its list — the one it sends its heartbeats to (the
	// Eureka client shuffles defaultZone once) — is killed: it carries on
	// through the others. From here on n1 names the dead node.
	used := heartbeatTarget(t, c.Nodes)
	others := slices.DeleteFunc(slices.Clone(c.Nodes), func(nd *Node) bool { return nd == used })
	n1, n2, n3 = used, others[0], others[1]
	// The plain client's list: the dead node first. Its proxy goes with it.
	zone = tap.URL(n1, "/eureka/") + "," + tap.URL(n2, "/eureka/") + "," + tap.URL(n3, "/eureka/")
	t.Logf("the Spring client heartbeats to %s: killing it", n1.ID)
	n1.Kill()
	tap.close(n1)
	c.WaitLeader(t, 15*time.Second)
	waitHeartbeats(t, c, "SPRINGCLIENT", "spring-1")
	registerRetrying(t, n2.BaseURL(), "RESTAPP2", "rest-2")
	if !Eventually(clientTimeout, func() bool { return len(state().Services["RESTAPP2"]) == 1 }) {
		failf("with %s down, RESTAPP2 registered on %s did not show up in DiscoveryClient", n1.ID, n2.ID)
	}
	if s := state(); s.HashMismatches != 0 || s.ParseErrors != 0 {
		failf("hash mismatch or unreadable document after the first node was killed")
	}

	t.Run("plain eureka-client", func(t *testing.T) {
		// Its list starts with the dead node, kept in order: it must fail over.
		plain := StartProc(t, "plainclient-"+codec, exec.Command(java, append(jvmArgs,
			"-Dplain.app=PLAINAPP", "-Dplain.id=plain-1", "-Dplain.port=8081", "-Dplain.serviceUrls="+zone, "-Dplain.codec="+codec,
			"-Dloader.main=heureka.e2e.PlainClient", "-jar", jar)...))
		if !Eventually(2*clientTimeout, func() bool {
			l := plain.LastLine("apps ")
			return strings.Contains(l, "PLAINAPP=[plain-1:UP]") && strings.Contains(l, "SPRINGCLIENT=[spring-1:UP]") &&
				strings.Contains(l, "ODDXML=[") && strings.Contains(l, "RESTAPP2=[rest-2:UP]")
		}) {
			t.Fatalf("the plain client did not register and discover through %s/%s; output tail:\n%s", n2.ID, n3.ID, plain.Tail(30))
		}
		waitHeartbeats(t, c, "PLAINAPP", "plain-1")
		if !plain.Stop(20 * time.Second) {
			t.Fatalf("the plain client did not stop on SIGTERM; tail:\n%s", plain.Tail(20))
		}
		if plain.LastLine("cancelled") == "" {
			t.Fatalf("the plain client did not cancel; tail:\n%s", plain.Tail(20))
		}
		WaitFor(t, clientTimeout, func() bool {
			return instanceStatus(n2.BaseURL(), "PLAINAPP", "plain-1") == "" && instanceStatus(n3.BaseURL(), "PLAINAPP", "plain-1") == ""
		}, "plain-1 gone from n2 and n3 after its cancel")
		t.Log(tap.check(t, "plain", wireTypes[codec]))
	})

	// py-eureka-client's wire format is its own (JSON writes, XML reads): it
	// runs once, with the json run.
	if codec == "json" {
		t.Run("py-eureka-client", func(t *testing.T) {
			py, err := filepath.Abs(pyVenvPython)
			if err == nil {
				_, err = os.Stat(py)
			}
			ToolOrSkip(t, "py-eureka-client", err)
			urls := n1.URL("/eureka") + "," + n2.URL("/eureka") + "," + n3.URL("/eureka")
			p := StartProc(t, "pyclient", exec.Command(py, pyScenario, urls, "py-1", "8082"))
			if !Eventually(clientTimeout, func() bool {
				l := p.LastLine(`{"apps"`)
				return strings.Contains(l, `"PYAPP": ["py-1:UP"]`) && strings.Contains(l, `"SPRINGCLIENT": ["spring-1:UP"]`) &&
					strings.Contains(l, `"ODDJSON": [`)
			}) {
				t.Fatalf("py-eureka-client did not register and discover; output tail:\n%s", p.Tail(30))
			}
			for _, nd := range []*Node{n2, n3} {
				if got := instanceStatus(nd.BaseURL(), "PYAPP", "py-1"); got != "UP" {
					t.Fatalf("py-1 on %s: status %q", nd.ID, got)
				}
			}
			waitHeartbeats(t, c, "PYAPP", "py-1")
			if !p.Stop(20*time.Second) || p.LastLine(`{"cancelled"`) == "" {
				t.Fatalf("py-eureka-client did not cancel on SIGTERM; tail:\n%s", p.Tail(20))
			}
			WaitFor(t, clientTimeout, func() bool {
				return instanceStatus(n2.BaseURL(), "PYAPP", "py-1") == "" && instanceStatus(n3.BaseURL(), "PYAPP", "py-1") == ""
			}, "py-1 gone from n2 and n3 after its cancel")
		})
	}

	// On shutdown it cancels.
	if !spring.Stop(30 * time.Second) {
		failf("the Spring client did not stop on SIGTERM")
	}
	WaitFor(t, clientTimeout, func() bool {
		return instanceStatus(n2.BaseURL(), "SPRINGCLIENT", "spring-1") == "" && instanceStatus(n3.BaseURL(), "SPRINGCLIENT", "spring-1") == ""
	}, "spring-1 gone from n2 and n3 after shutdown")
	t.Log(tap.check(t, "spring", wireTypes[codec]))
	t.Logf("the %s run took %.1fs", codec, time.Since(start).Seconds())
}
