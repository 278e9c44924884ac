package e2e

// Helpers shared by the real-client and delta tests (fargo_test.go,
// jsclient_test.go, delta_test.go, badinput_test.go): decoding Eureka
// applications documents in both formats into comparable records, the
// reconcile hash (docs/eureka-api.md, "Hash code"), writes that ride out an election, and waiting
// for a quiet cluster. Names start with "ed" so they cannot collide with the
// harness's helpers.

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// edCacheArgs makes every read see a write within ~100 ms.
var edCacheArgs = []string{"--response-cache-update-interval", "100ms"}

// edInstance is the comparable part of one instance record.
type edInstance struct {
	App        string
	ID         string
	HostName   string
	Status     string
	Overridden string
	LDT        string // lastDirtyTimestamp
	Action     string // actionType
	VIP        string
	SVIP       string
	Port       string // "8080/true"
	SecurePort string
	Metadata   map[string]string
}

// Key is "APP/id".
func (in edInstance) Key() string { return in.App + "/" + in.ID }

// State is the record as the delta test compares it: app, id, status,
// overridden status, metadata and lastDirtyTimestamp.
func (in edInstance) State() string {
	keys := make([]string, 0, len(in.Metadata))
	for k := range in.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var md strings.Builder
	for i, k := range keys {
		if i > 0 {
			md.WriteByte(',')
		}
		md.WriteString(k + "=" + in.Metadata[k])
	}
	return fmt.Sprintf("%s status=%s overridden=%s ldt=%s md={%s}", in.Key(), in.Status, in.Overridden, in.LDT, md.String())
}

// edDoc is a decoded applications document.
type edDoc struct {
	VersionsDelta string
	HashCode      string
	Instances     []edInstance // in document order
}

// edStates returns the sorted State lines of instances.
func edStates(instances []edInstance) []string { return sortedBy(instances, edInstance.State) }

// edHashCode is the reconcile hash of a set of instances (docs/eureka-api.md, "Hash code"):
// "<STATUS>_<count>_" per status present, statuses in ascending order.
func edHashCode(instances []edInstance) string {
	counts := map[string]int{}
	for _, in := range instances {
		counts[in.Status]++
	}
	return statusHash(counts)
}

// statusHash formats status counts as Eureka's reconcile hash:
// "<STATUS>_<count>_" per status present, statuses in ascending order.
func statusHash(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for s := range counts {
		names = append(names, s)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, s := range names {
		fmt.Fprintf(&b, "%s_%d_", s, counts[s])
	}
	return b.String()
}

// edID derives the registry id the way the server and every client do:
// instanceId, else an Amazon instance-id, else hostName.
func edID(instanceID, dcName string, dcMeta map[string]string, hostName string) string {
	if instanceID != "" {
		return instanceID
	}
	if dcName == "Amazon" && dcMeta["instance-id"] != "" {
		return dcMeta["instance-id"]
	}
	return hostName
}

// edEmptyMapClass is the legacy marker of an empty metadata map (docs/eureka-api.md, "Metadata map").
const edEmptyMapClass = "java.util.Collections$EmptyMap"

// ---------------------------------------------------------------------------
// JSON

type edJSONPort struct {
	Number  json.Number `json:"$"`
	Enabled string      `json:"@enabled"`
}

type edJSONInstance struct {
	InstanceID       string     `json:"instanceId"`
	HostName         string     `json:"hostName"`
	App              string     `json:"app"`
	Status           string     `json:"status"`
	OverriddenStatus string     `json:"overriddenStatus"`
	Port             edJSONPort `json:"port"`
	SecurePort       edJSONPort `json:"securePort"`
	DataCenterInfo   struct {
		Name     string            `json:"name"`
		Metadata map[string]string `json:"metadata"`
	} `json:"dataCenterInfo"`
	Metadata           map[string]string `json:"metadata"`
	VIPAddress         string            `json:"vipAddress"`
	SecureVIPAddress   string            `json:"secureVipAddress"`
	LastDirtyTimestamp string            `json:"lastDirtyTimestamp"`
	ActionType         string            `json:"actionType"`
}

func (j edJSONInstance) record(appName string) edInstance {
	md := map[string]string{}
	for k, v := range j.Metadata {
		md[k] = v
	}
	if len(md) == 1 && md["@class"] == edEmptyMapClass {
		delete(md, "@class")
	}
	app := j.App
	if app == "" {
		app = appName
	}
	return edInstance{
		App:        app,
		ID:         edID(j.InstanceID, j.DataCenterInfo.Name, j.DataCenterInfo.Metadata, j.HostName),
		HostName:   j.HostName,
		Status:     j.Status,
		Overridden: j.OverriddenStatus,
		LDT:        j.LastDirtyTimestamp,
		Action:     j.ActionType,
		VIP:        j.VIPAddress,
		SVIP:       j.SecureVIPAddress,
		Port:       string(j.Port.Number) + "/" + j.Port.Enabled,
		SecurePort: string(j.SecurePort.Number) + "/" + j.SecurePort.Enabled,
		Metadata:   md,
	}
}

// edParseJSON decodes {"applications": {...}} strictly enough to notice
// shape errors: application and instance must be arrays.
func edParseJSON(body []byte) (edDoc, error) {
	doc, err := decodeAppsJSON[string, edJSONInstance](body)
	if err != nil {
		return edDoc{}, err
	}
	out := edDoc{VersionsDelta: doc.Applications.VersionsDelta, HashCode: doc.Applications.HashCode}
	for _, app := range doc.Applications.Application {
		if err := edAdd(&out, app.Name, app.Instance); err != nil {
			return edDoc{}, err
		}
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// XML

type edXMLElem struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

type edXMLPort struct {
	Number  string `xml:",chardata"`
	Enabled string `xml:"enabled,attr"`
}

type edXMLInstance struct {
	InstanceID       string    `xml:"instanceId"`
	HostName         string    `xml:"hostName"`
	App              string    `xml:"app"`
	Status           string    `xml:"status"`
	OverriddenStatus string    `xml:"overriddenstatus"`
	Port             edXMLPort `xml:"port"`
	SecurePort       edXMLPort `xml:"securePort"`
	DataCenterInfo   struct {
		Name     string `xml:"name"`
		Metadata struct {
			Items []edXMLElem `xml:",any"`
		} `xml:"metadata"`
	} `xml:"dataCenterInfo"`
	Metadata struct {
		Class string      `xml:"class,attr"`
		Items []edXMLElem `xml:",any"`
	} `xml:"metadata"`
	VIPAddress         string `xml:"vipAddress"`
	SecureVIPAddress   string `xml:"secureVipAddress"`
	LastDirtyTimestamp string `xml:"lastDirtyTimestamp"`
	ActionType         string `xml:"actionType"`
}

// edXMLName reverses XStream's element-name escaping (docs/eureka-api.md, "Metadata map"): "__" is
// "_" and "_-" is "$".
func edXMLName(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && i+1 < len(s) {
			switch s[i+1] {
			case '_':
				b.WriteByte('_')
				i++
				continue
			case '-':
				b.WriteByte('$')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (x edXMLInstance) record(appName string) edInstance {
	md := map[string]string{}
	for _, it := range x.Metadata.Items {
		md[edXMLName(it.XMLName.Local)] = it.Value
	}
	dcMeta := map[string]string{}
	for _, it := range x.DataCenterInfo.Metadata.Items {
		dcMeta[it.XMLName.Local] = it.Value
	}
	app := x.App
	if app == "" {
		app = appName
	}
	return edInstance{
		App:        app,
		ID:         edID(x.InstanceID, x.DataCenterInfo.Name, dcMeta, x.HostName),
		HostName:   x.HostName,
		Status:     x.Status,
		Overridden: x.OverriddenStatus,
		LDT:        x.LastDirtyTimestamp,
		Action:     x.ActionType,
		VIP:        x.VIPAddress,
		SVIP:       x.SecureVIPAddress,
		Port:       x.Port.Number + "/" + x.Port.Enabled,
		SecurePort: x.SecurePort.Number + "/" + x.SecurePort.Enabled,
		Metadata:   md,
	}
}

// edParseXML decodes <applications>…</applications>.
func edParseXML(body []byte) (edDoc, error) {
	var doc struct {
		XMLName       xml.Name `xml:"applications"`
		VersionsDelta string   `xml:"versions__delta"`
		HashCode      string   `xml:"apps__hashcode"`
		Application   []struct {
			Name     string          `xml:"name"`
			Instance []edXMLInstance `xml:"instance"`
		} `xml:"application"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		return edDoc{}, fmt.Errorf("decode XML applications: %v in %.300s", err, body)
	}
	out := edDoc{VersionsDelta: doc.VersionsDelta, HashCode: doc.HashCode}
	for _, app := range doc.Application {
		if err := edAdd(&out, app.Name, app.Instance); err != nil {
			return edDoc{}, err
		}
	}
	return out, nil
}

// edFetch GETs an applications document (full registry, delta, VIP) from
// url in the given format ("json" or "xml") and decodes it.
func edFetch(url, format string) (edDoc, error) {
	accept := "application/json"
	if format == "xml" {
		accept = "application/xml"
	}
	code, body, hdr, err := TryDo("GET", url, nil, "Accept", accept)
	if err != nil {
		return edDoc{}, err
	}
	if code != http.StatusOK {
		return edDoc{}, fmt.Errorf("GET %s: %d %q", url, code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.Contains(ct, format) {
		return edDoc{}, fmt.Errorf("GET %s with Accept %s: Content-Type %q", url, accept, ct)
	}
	if format == "xml" {
		return edParseXML(body)
	}
	return edParseJSON(body)
}

// ---------------------------------------------------------------------------
// Writes and waiting

// edWrite sends one write and returns the status code, retrying 503 (no
// leader yet, or an election under way) for up to 10 s as Eureka clients do.
func edWrite(method, url string, body []byte, headers ...string) (int, []byte, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, resp, _, err := TryDo(method, url, body, headers...)
		if err != nil || code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return code, resp, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// edAdd records in d the instances listed under the application named app;
// an application without instances, or an instance of another application,
// is an error.
func edAdd[I interface{ record(string) edInstance }](d *edDoc, app string, instances []I) error {
	if len(instances) == 0 {
		return fmt.Errorf("application %s listed without instances", app)
	}
	for _, in := range instances {
		rec := in.record(app)
		if rec.App != app {
			return fmt.Errorf("instance %s listed under application %s", rec.Key(), app)
		}
		d.Instances = append(d.Instances, rec)
	}
	return nil
}

// edMillis is an epoch-millisecond value as Eureka writes it.
func edMillis(ms int64) string { return strconv.FormatInt(ms, 10) }
