package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/instance"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/opapi"
)

// Status is the body of GET /v1/status (opapi.Status), with every
// top-level field also kept raw.
type Status struct {
	opapi.Status

	// Raw holds every top-level field of the response, including those
	// opapi.Status does not know.
	Raw map[string]json.RawMessage `json:"-"`
}

// Has reports whether the server sent the top-level field.
func (s Status) Has(field string) bool {
	_, ok := s.Raw[field]
	return ok
}

// Members is the body of GET /v1/members.
type Members = opapi.Members

// Member is one entry of Members.
type Member = opapi.Member

// Voters counts the voters among ms.
func Voters(ms []Member) int {
	n := 0
	for _, m := range ms {
		if m.Voter {
			n++
		}
	}
	return n
}

// httpClient is used for every request the harness makes. It never uses a
// proxy and gives up after 15 s.
var httpClient = &http.Client{
	Timeout: 15 * time.Second,
	Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
	},
}

// TryStatus fetches GET /v1/status without failing the test.
func (nd *Node) TryStatus() (Status, error) {
	st, body, err := nd.Node.Status(context.Background())
	if err != nil {
		return Status{}, err
	}
	out := Status{Status: st}
	if err := json.Unmarshal(body, &out.Raw); err != nil {
		return Status{}, fmt.Errorf("GET /v1/status: %v in %s", err, body)
	}
	return out, nil
}

// Status fetches GET /v1/status, failing the test on any error.
func (nd *Node) Status(t testing.TB) Status {
	t.Helper()
	st, err := nd.TryStatus()
	if err != nil {
		t.Fatalf("%s: %v", nd.ID, err)
	}
	return st
}

// Members fetches GET /v1/members, failing the test on any error.
func (nd *Node) Members(t testing.TB) Members {
	t.Helper()
	code, body, _ := Do(t, "GET", nd.URL("/v1/members"), nil)
	if code != http.StatusOK {
		t.Fatalf("%s: GET /v1/members: %d %s", nd.ID, code, body)
	}
	var m Members
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: GET /v1/members: %v in %s", nd.ID, err, body)
	}
	return m
}

// Do sends one request and returns the status code, body and headers,
// failing the test on a transport error. headers are name/value pairs. Unless
// given, Accept is application/json and, when body is non-nil, Content-Type is
// application/json.
func Do(t testing.TB, method, url string, body []byte, headers ...string) (int, []byte, http.Header) {
	t.Helper()
	code, respBody, hdr, err := TryDo(method, url, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return code, respBody, hdr
}

// TryDo is Do without the test: it reports transport errors instead. It is
// safe to call from any goroutine.
func TryDo(method, url string, body []byte, headers ...string) (int, []byte, http.Header, error) {
	return DoWith(httpClient, method, url, body, headers...)
}

// DoWith is TryDo through the client c (for example one that dials into a
// container's network namespace).
func DoWith(c *http.Client, method, url string, body []byte, headers ...string) (int, []byte, http.Header, error) {
	if len(headers)%2 != 0 {
		return 0, nil, nil, fmt.Errorf("headers must be name/value pairs, got %d strings", len(headers))
	}
	hdr := http.Header{}
	for i := 0; i < len(headers); i += 2 {
		hdr.Set(headers[i], headers[i+1])
	}
	return launch.Send(context.Background(), c, method, url, body, hdr)
}

// ---------------------------------------------------------------------------
// Eureka register bodies

// InstanceMap returns an instance as the Netflix Java client's codec writes it
// (docs/eureka-api.md, "Example" shape: timestamps and isCoordinatingDiscoveryServer as strings,
// port objects with a numeric "$" and a string "@enabled", a MyOwn
// dataCenterInfo, the empty-metadata marker). Keys in extra replace the
// defaults; a nil value removes the key.
func InstanceMap(app, instanceID string, extra map[string]any) map[string]any {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	host := "host-" + strings.NewReplacer(":", "-", "/", "-").Replace(instanceID) + ".e2e.test"
	m := instance.Doc(instance.Fields{
		ID: instanceID, App: strings.ToUpper(app), Host: host, IP: "10.0.0.1", Status: "UP",
		VIP: strings.ToLower(app), RenewalSecs: 30, LeaseSecs: 90, Timestamp: now,
	})
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// RegisterBody is InstanceMap wrapped as {"instance": {...}} and encoded.
func RegisterBody(app, instanceID string, extra map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"instance": InstanceMap(app, instanceID, extra)})
	if err != nil {
		panic(err) // only maps of JSON values go in
	}
	return b
}

// RegisterJSON POSTs RegisterBody(app, instanceID, extra) to
// <nodeURL>/eureka/apps/<app> and fails the test unless the answer is 204.
// nodeURL is a node's BaseURL.
func RegisterJSON(t testing.TB, nodeURL, app, instanceID string, extra map[string]any) {
	t.Helper()
	if err := TryRegisterJSON(nodeURL, app, instanceID, extra); err != nil {
		t.Fatal(err)
	}
}

// TryRegisterJSON is RegisterJSON returning an error; safe from any goroutine.
func TryRegisterJSON(nodeURL, app, instanceID string, extra map[string]any) error {
	url := nodeURL + "/eureka/apps/" + app
	// A 503 means "no leader or quorum right now, retry" (an election on a
	// loaded machine, or an AP journal still replaying): retry it for a
	// while, as Eureka clients do; any other answer is final.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, _, err := TryDo("POST", url, RegisterBody(app, instanceID, extra))
		if err != nil {
			return fmt.Errorf("register %s/%s: POST %s: %v", app, instanceID, url, err)
		}
		if code == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if code != http.StatusNoContent {
			return fmt.Errorf("register %s/%s: POST %s: got %d %q, want 204", app, instanceID, url, code, body)
		}
		return nil
	}
}

// ---------------------------------------------------------------------------
// Reading the registry

// AppInstance is one instance from GET /eureka/apps (JSON).
type AppInstance struct {
	App                string // application name as listed
	ID                 string // instanceId, else Amazon instance-id, else hostName
	Status             string
	LastDirtyTimestamp string
	Raw                json.RawMessage // the instance object exactly as sent
}

// Key is "APP/id".
func (a AppInstance) Key() string { return a.App + "/" + a.ID }

// Apps is a decoded GET /eureka/apps answer.
type Apps struct {
	VersionsDelta string
	HashCode      string
	Instances     []AppInstance // sorted by Key
}

// ByKey indexes the instances by Key.
func (a Apps) ByKey() map[string]AppInstance {
	m := make(map[string]AppInstance, len(a.Instances))
	for _, in := range a.Instances {
		m[in.Key()] = in
	}
	return m
}

// TryGetApps fetches and decodes GET <nodeURL>/eureka/apps as JSON.
func TryGetApps(nodeURL string) (Apps, error) {
	code, body, _, err := TryDo("GET", nodeURL+"/eureka/apps", nil)
	if err != nil {
		return Apps{}, err
	}
	if code != http.StatusOK {
		return Apps{}, fmt.Errorf("GET /eureka/apps: %d %q", code, body)
	}
	return ParseApps(body)
}

// GetApps is TryGetApps failing the test on error.
func GetApps(t testing.TB, nodeURL string) Apps {
	t.Helper()
	a, err := TryGetApps(nodeURL)
	if err != nil {
		t.Fatalf("%s: %v", nodeURL, err)
	}
	return a
}

// appsJSON is a JSON {"applications": {...}} document, versions__delta
// read as a V and every instance as an I.
type appsJSON[V, I any] struct {
	Applications *struct {
		VersionsDelta V      `json:"versions__delta"`
		HashCode      string `json:"apps__hashcode"`
		Application   []struct {
			Name     string `json:"name"`
			Instance []I    `json:"instance"`
		} `json:"application"`
	} `json:"applications"`
}

// decodeAppsJSON decodes body as an appsJSON, which must have its
// "applications" root.
func decodeAppsJSON[V, I any](body []byte) (appsJSON[V, I], error) {
	var doc appsJSON[V, I]
	if err := json.Unmarshal(body, &doc); err != nil {
		return doc, fmt.Errorf("decode JSON applications: %v in %.300q", err, body)
	}
	if doc.Applications == nil {
		return doc, fmt.Errorf("no \"applications\" root in %.300q", body)
	}
	return doc, nil
}

// ParseApps decodes a JSON {"applications": {...}} document.
func ParseApps(body []byte) (Apps, error) {
	doc, err := decodeAppsJSON[flexString, json.RawMessage](body)
	if err != nil {
		return Apps{}, err
	}
	out := Apps{VersionsDelta: string(doc.Applications.VersionsDelta), HashCode: doc.Applications.HashCode}
	for _, app := range doc.Applications.Application {
		for _, raw := range app.Instance {
			in, err := parseInstance(raw)
			if err != nil {
				return Apps{}, fmt.Errorf("application %s: %v", app.Name, err)
			}
			in.App = app.Name
			out.Instances = append(out.Instances, in)
		}
	}
	sort.Slice(out.Instances, func(i, j int) bool { return out.Instances[i].Key() < out.Instances[j].Key() })
	return out, nil
}

func parseInstance(raw json.RawMessage) (AppInstance, error) {
	var in struct {
		InstanceID         string     `json:"instanceId"`
		HostName           string     `json:"hostName"`
		Status             string     `json:"status"`
		LastDirtyTimestamp flexString `json:"lastDirtyTimestamp"`
		DataCenterInfo     struct {
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"dataCenterInfo"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return AppInstance{}, fmt.Errorf("decode instance %.200s: %v", raw, err)
	}
	id := in.InstanceID
	if id == "" && in.DataCenterInfo.Name == "Amazon" {
		id = in.DataCenterInfo.Metadata["instance-id"]
	}
	if id == "" {
		id = in.HostName
	}
	return AppInstance{ID: id, Status: in.Status, LastDirtyTimestamp: string(in.LastDirtyTimestamp), Raw: raw}, nil
}

// flexString decodes a JSON string or number into its text.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	*f = flexString(bytes.TrimSpace(b))
	return nil
}
