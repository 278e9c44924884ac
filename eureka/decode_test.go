package eureka

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

const now = 1718000009999

// Register bodies as the clients of docs/eureka-api.md, "Register bodies clients send" send them, all describing the
// same instance.
var clientBodies = []struct {
	name   string
	format Format
	body   string
	// tweak turns the common expectation into this client's (fields that the
	// client cannot express or sets differently).
	tweak func(in *fsm.Instance)
}{
	{"java-codec", JSON, `{"instance":{"instanceId":"10.0.0.5:orders:8080","hostName":"10.0.0.5","app":"ORDERS",` +
		`"ipAddr":"10.0.0.5","status":"UP","overriddenStatus":"UNKNOWN","port":{"$":8080,"@enabled":"true"},` +
		`"securePort":{"$":443,"@enabled":"false"},"countryId":1,"dataCenterInfo":` +
		`{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},"leaseInfo":` +
		`{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":0,"lastRenewalTimestamp":0,` +
		`"evictionTimestamp":0,"serviceUpTimestamp":0},"metadata":{"zone":"z1","management.port":"8081"},` +
		`"homePageUrl":"http://10.0.0.5:8080/","statusPageUrl":"http://10.0.0.5:8080/info",` +
		`"healthCheckUrl":"http://10.0.0.5:8080/health","vipAddress":"orders","secureVipAddress":"orders",` +
		`"isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"1718000000000",` +
		`"lastDirtyTimestamp":"1718000000000"}}`, nil},
	{"spring-jackson", JSON, `{"instance":{"instanceId":"10.0.0.5:orders:8080","app":"ORDERS","appGroupName":null,` +
		`"ipAddr":"10.0.0.5","sid":"na","homePageUrl":"http://10.0.0.5:8080/","statusPageUrl":"http://10.0.0.5:8080/info",` +
		`"healthCheckUrl":"http://10.0.0.5:8080/health","secureHealthCheckUrl":null,"vipAddress":"orders",` +
		`"secureVipAddress":"orders","countryId":1,"dataCenterInfo":{"@class":` +
		`"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},"hostName":"10.0.0.5",` +
		`"status":"UP","overriddenStatus":"UNKNOWN","leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,` +
		`"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,"serviceUpTimestamp":0},` +
		`"isCoordinatingDiscoveryServer":false,"lastUpdatedTimestamp":1718000000000,` +
		`"lastDirtyTimestamp":1718000000000,"actionType":null,"asgName":null,"port":{"$":8080,"@enabled":true},` +
		`"securePort":{"$":443,"@enabled":false},"metadata":{"management.port":"8081","zone":"z1"}}}`, nil},
	{"eureka-js-client", JSON, `{"instance":{"instanceId":"10.0.0.5:orders:8080","app":"orders","hostName":"10.0.0.5",` +
		`"ipAddr":"10.0.0.5","status":"UP","port":8080,"securePort":{"$":443,"@enabled":false},` +
		`"vipAddress":"orders","secureVipAddress":"orders","homePageUrl":"http://10.0.0.5:8080/",` +
		`"statusPageUrl":"http://10.0.0.5:8080/info","healthCheckUrl":"http://10.0.0.5:8080/health",` +
		`"dataCenterInfo":{"name":"MyOwn"},"metadata":{"zone":"z1","management.port":8081}}}`,
		func(in *fsm.Instance) {
			in.RenewalIntervalSecs, in.DurationSecs, in.LastDirtyTimestamp = 0, 0, now
		}},
	{"eureka-js-client-boolean-enabled", JSON, `{"instance":{"instanceId":"10.0.0.5:orders:8080","app":"orders",` +
		`"hostName":"10.0.0.5","ipAddr":"10.0.0.5","status":"UP","port":{"$":8080,"@enabled":true},` +
		`"securePort":{"$":"443","@enabled":"false"},"vipAddress":"orders","secureVipAddress":"orders",` +
		`"homePageUrl":"http://10.0.0.5:8080/","statusPageUrl":"http://10.0.0.5:8080/info",` +
		`"healthCheckUrl":"http://10.0.0.5:8080/health","dataCenterInfo":{"name":"MyOwn"},` +
		`"leaseInfo":{"renewalIntervalInSecs":"30","durationInSecs":90.0},"lastDirtyTimestamp":1718000000000,` +
		`"metadata":{"zone":"z1","management.port":"8081"}}}`, nil},
	{"fargo-json", JSON, `{"instance":{"hostName":"10.0.0.5","homePageUrl":"http://10.0.0.5:8080/",` +
		`"statusPageUrl":"http://10.0.0.5:8080/info","healthCheckUrl":"http://10.0.0.5:8080/health",` +
		`"secureHealthCheckUrl":"","app":"orders","ipAddr":"10.0.0.5","vipAddress":"orders",` +
		`"secureVipAddress":"orders","status":"UP","overriddenstatus":"","port":{"$":"8080","@enabled":"true"},` +
		`"securePort":{"$":"443","@enabled":"false"},"countryId":0,"dataCenterInfo":{"name":"MyOwn",` +
		`"@class":"com.netflix.appinfo.MyDataCenterInfo","metadata":null},"leaseInfo":{"renewalIntervalInSecs":30,` +
		`"durationInSecs":90,"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,` +
		`"serviceUpTimestamp":0},"metadata":{"zone":"z1","management.port":"8081"},"instanceId":"",` +
		`"lastDirtyTimestamp":"1718000000000","asgName":""}}`,
		func(in *fsm.Instance) {
			in.InstanceID, in.CountryID = "", 0
			in.DataCenterInfo.Class = "com.netflix.appinfo.MyDataCenterInfo"
		}},
	{"fargo-xml", XML, `<instance><hostName>10.0.0.5</hostName><homePageUrl>http://10.0.0.5:8080/</homePageUrl>` +
		`<statusPageUrl>http://10.0.0.5:8080/info</statusPageUrl><healthCheckUrl>http://10.0.0.5:8080/health</healthCheckUrl>` +
		`<secureHealthCheckUrl></secureHealthCheckUrl><app>orders</app><ipAddr>10.0.0.5</ipAddr>` +
		`<vipAddress>orders</vipAddress><secureVipAddress>orders</secureVipAddress><status>UP</status>` +
		`<overriddenstatus></overriddenstatus><countryId>0</countryId><dataCenterInfo><name>MyOwn</name>` +
		`<metadata></metadata></dataCenterInfo><leaseInfo><renewalIntervalInSecs>30</renewalIntervalInSecs>` +
		`<durationInSecs>90</durationInSecs></leaseInfo><metadata><zone>z1</zone><management.port>8081</management.port>` +
		`</metadata><instanceId>10.0.0.5:orders:8080</instanceId><lastDirtyTimestamp>1718000000000</lastDirtyTimestamp>` +
		`<port enabled="true">8080</port><securePort enabled="false">443</securePort></instance>`,
		func(in *fsm.Instance) { in.CountryID = 0 }},
	{"java-xml-pretty", XML, `<?xml version="1.0" encoding="UTF-8"?>
<instance>
  <instanceId>10.0.0.5:orders:8080</instanceId>
  <hostName>10.0.0.5</hostName>
  <app>ORDERS</app>
  <ipAddr>10.0.0.5</ipAddr>
  <status>up</status>
  <overriddenStatus>unknown</overriddenStatus>
  <port enabled="true">8080</port>
  <securePort enabled="false">443</securePort>
  <countryId>1</countryId>
  <dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo">
    <name>MyOwn</name>
  </dataCenterInfo>
  <leaseInfo>
    <renewalIntervalInSecs>30</renewalIntervalInSecs>
    <durationInSecs>90</durationInSecs>
  </leaseInfo>
  <metadata>
    <management.port>8081</management.port>
    <zone>z1</zone>
  </metadata>
  <homePageUrl>http://10.0.0.5:8080/</homePageUrl>
  <statusPageUrl>http://10.0.0.5:8080/info</statusPageUrl>
  <healthCheckUrl>http://10.0.0.5:8080/health</healthCheckUrl>
  <vipAddress>orders</vipAddress>
  <secureVipAddress>orders</secureVipAddress>
  <isCoordinatingDiscoveryServer>false</isCoordinatingDiscoveryServer>
  <lastDirtyTimestamp>1718000000000</lastDirtyTimestamp>
</instance>
`, nil},
}

func wantClientInstance() *fsm.Instance {
	return &fsm.Instance{
		InstanceID: "10.0.0.5:orders:8080", HostName: "10.0.0.5", App: "ORDERS", IPAddr: "10.0.0.5", Sid: "na",
		Status: fsm.StatusUp, OverriddenStatus: fsm.StatusUnknown,
		Port: 8080, PortEnabled: true, SecurePort: 443, CountryID: 1,
		DataCenterInfo:      fsm.DataCenterInfo{Class: classDefaultInfo, Name: "MyOwn"},
		RenewalIntervalSecs: 30, DurationSecs: 90,
		Metadata:    fsm.MetadataOf(map[string]string{"zone": "z1", "management.port": "8081"}),
		HomePageURL: "http://10.0.0.5:8080/", StatusPageURL: "http://10.0.0.5:8080/info",
		HealthCheckURL: "http://10.0.0.5:8080/health", VIPAddress: "orders", SecureVIPAddress: "orders",
		LastDirtyTimestamp: 1718000000000,
	}
}

func TestDecodeClientBodies(t *testing.T) {
	for _, c := range clientBodies {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeInstance([]byte(c.body), c.format, now)
			if err != nil {
				t.Fatal(err)
			}
			want := wantClientInstance()
			if c.tweak != nil {
				c.tweak(want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
			}
			if err := ValidateInstance(got, "orders"); err != nil {
				t.Errorf("validate: %v", err)
			}
			if got.ID() != "10.0.0.5:orders:8080" && got.ID() != "10.0.0.5" {
				t.Errorf("ID() = %q", got.ID())
			}
		})
	}
}

// TestDecodeSpecExamples reads the documents of docs/eureka-api.md, "Example" back into
// the fixtures they were built from.
func TestDecodeSpecExamples(t *testing.T) {
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			b, err := os.ReadFile("testdata/spec/applications." + f.String())
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeApplications(b, f)
			if err != nil {
				t.Fatal(err)
			}
			want := &Applications{VersionsDelta: "1", AppsHashCode: "OUT_OF_SERVICE_1_UP_2_", Applications: []Application{
				{Name: "ORDER-SERVICE", Instances: []*fsm.Entry{wireEntry(orderA(), f), wireEntry(orderB(), f)}},
				{Name: "PAYMENTS", Instances: []*fsm.Entry{wireEntry(payments(), f)}},
			}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%s\nwant\n%s", dump(got), dump(want))
			}
		})
	}
}

func dump(a *Applications) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q\n", a.VersionsDelta, a.AppsHashCode)
	for _, app := range a.Applications {
		for _, e := range app.Instances {
			fmt.Fprintf(&b, "%s: %+v %+v\n", app.Name, *e, *e.Instance)
		}
	}
	return b.String()
}

func TestDecodeSingleObjectsAndWrappers(t *testing.T) {
	inst := string(AppendInstance(nil, JSON, orderA()))
	docs := map[string]string{
		"single objects": `{"applications":{"versions__delta":2,"apps__hashcode":"UP_1_","application":{"name":"ORDER-SERVICE","instance":` + inst + `}}}`,
		"bare":           `{"versions__delta":"2","apps__hashcode":"UP_1_","application":[{"name":"ORDER-SERVICE","instance":[` + inst + `]}]}`,
	}
	for name, doc := range docs {
		got, err := DecodeApplications([]byte(doc), JSON)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.VersionsDelta != "2" || len(got.Applications) != 1 || len(got.Applications[0].Instances) != 1 ||
			!reflect.DeepEqual(got.Applications[0].Instances[0], wireEntry(orderA(), JSON)) {
			t.Errorf("%s: %+v", name, got)
		}
	}
	for _, f := range formats {
		frag := AppendApplication(nil, f, "ORDER-SERVICE", []*fsm.Entry{orderA(), orderB()})
		for _, b := range [][]byte{AppendApplicationDoc(nil, f, frag), frag} {
			a, err := DecodeApplication(b, f)
			if err != nil {
				t.Fatal(err)
			}
			want := &Application{Name: "ORDER-SERVICE", Instances: []*fsm.Entry{wireEntry(orderA(), f), wireEntry(orderB(), f)}}
			if !reflect.DeepEqual(a, want) {
				t.Errorf("%v application: %+v", f, a)
			}
		}
		empty, err := DecodeApplications(AppendApplications(nil, f, "1", "", nil), f)
		if err != nil || !reflect.DeepEqual(empty, &Applications{VersionsDelta: "1"}) {
			t.Errorf("%v empty applications: %+v, %v", f, empty, err)
		}
	}
	// A bare instance is accepted on register.
	if _, err := DecodeInstance([]byte(inst), JSON, now); err != nil {
		t.Errorf("bare instance: %v", err)
	}
}

func TestDecodeNormalisation(t *testing.T) {
	min := `"hostName":"h","app":"my-app","ipAddr":"1.2.3.4","dataCenterInfo":{"name":"MyOwn"}`
	cases := []decodeCase{
		{"defaults", JSON, `{"instance":{` + min + `}}`, func(in *fsm.Instance) bool {
			return in.App == "MY-APP" && in.Status == "UP" && in.OverriddenStatus == "UNKNOWN" && in.Sid == "na" &&
				in.Port == 7001 && in.PortEnabled && in.SecurePort == 7002 && !in.SecurePortEnabled &&
				in.CountryID == 1 && in.LastDirtyTimestamp == now && in.Metadata.IsNil() && in.ID() == "h" &&
				in.RenewalIntervalSecs == 0 && in.DurationSecs == 0
		}},
		{"empty status is UNKNOWN", JSON, `{` + min + `,"status":"","overriddenStatus":""}`, func(in *fsm.Instance) bool {
			return in.Status == "UNKNOWN" && in.OverriddenStatus == "UNKNOWN"
		}},
		{"null status is absent", JSON, `{` + min + `,"status":null}`, func(in *fsm.Instance) bool { return in.Status == "UP" }},
		{"xml status ignores case", XML, `<instance><status> down </status><overriddenstatus>Out_Of_Service</overriddenstatus></instance>`,
			func(in *fsm.Instance) bool { return in.Status == "DOWN" && in.OverriddenStatus == "OUT_OF_SERVICE" }},
		{"xml status empty", XML, `<instance><status/></instance>`, func(in *fsm.Instance) bool { return in.Status == "UNKNOWN" }},
		{"last overriddenStatus spelling wins", JSON, `{` + min + `,"overriddenStatus":"DOWN","overriddenstatus":"UP"}`,
			func(in *fsm.Instance) bool { return in.OverriddenStatus == "UP" }},
		{"overriddenStatus in xml", XML, `<instance><overriddenStatus>DOWN</overriddenStatus></instance>`,
			func(in *fsm.Instance) bool { return in.OverriddenStatus == "DOWN" }},
		{"lastDirtyTimestamp 0", JSON, `{` + min + `,"lastDirtyTimestamp":"0"}`, func(in *fsm.Instance) bool { return in.LastDirtyTimestamp == now }},
		{"lastDirtyTimestamp kept", JSON, `{` + min + `,"lastDirtyTimestamp":"17"}`, func(in *fsm.Instance) bool { return in.LastDirtyTimestamp == 17 }},
		{"server fields ignored", JSON, `{` + min + `,"isCoordinatingDiscoveryServer":{"x":1},"actionType":[1],"lastUpdatedTimestamp":"x",` +
			`"leaseInfo":{"registrationTimestamp":"x","durationInSecs":-5,"renewalIntervalInSecs":"10"}}`,
			func(in *fsm.Instance) bool {
				return !in.IsCoordinatingDiscoveryServer && in.DurationSecs == 0 && in.RenewalIntervalSecs == 10
			}},
		{"unknown keys ignored", JSON, `{` + min + `,"foo":{"bar":[1,2,{"baz":null}]},"@class":"x"}`, func(in *fsm.Instance) bool { return in.HostName == "h" }},
		{"appGroupName upper-cased", JSON, `{` + min + `,"appGroupName":"grp"}`, func(in *fsm.Instance) bool { return in.AppGroupName == "GRP" }},
		{"numbers as text", JSON, `{"hostName":12,"app":"a","ipAddr":true,"sid":""}`,
			func(in *fsm.Instance) bool { return in.HostName == "12" && in.IPAddr == "true" && in.Sid == "na" }},
		{"port object without $", JSON, `{` + min + `,"port":{"@enabled":"false"},"securePort":{"@enabled":"TRUE"}}`,
			func(in *fsm.Instance) bool {
				return in.Port == 7001 && !in.PortEnabled && in.SecurePort == 7002 && in.SecurePortEnabled
			}},
		{"bare secure port", JSON, `{` + min + `,"securePort":"8443"}`,
			func(in *fsm.Instance) bool { return in.SecurePort == 8443 && in.SecurePortEnabled }},
		{"integral float port", JSON, `{` + min + `,"port":{"$":8.08e3}}`, func(in *fsm.Instance) bool { return in.Port == 8080 }},
		{"xml port attributes", XML, `<instance><port enabled="yes">1</port><securePort enabled="yes">2</securePort></instance>`,
			func(in *fsm.Instance) bool { return in.PortEnabled && !in.SecurePortEnabled }},
		{"xml port disabled", XML, `<instance><port enabled="false">1</port><securePort enabled="true">2</securePort></instance>`,
			func(in *fsm.Instance) bool { return !in.PortEnabled && in.SecurePortEnabled }},
		{"xml port without attribute", XML, `<instance><port>1</port><securePort>2</securePort></instance>`,
			func(in *fsm.Instance) bool { return in.PortEnabled && !in.SecurePortEnabled && in.Port == 1 }},
		{"json metadata", JSON, `{` + min + `,"metadata":{"@class":"java.util.Collections$EmptyMap","n":1.50,"b":false,"z":null}}`,
			func(in *fsm.Instance) bool {
				return reflect.DeepEqual(in.Metadata.Map(), map[string]string{"n": "1.50", "b": "false"})
			}},
		{"json empty-map marker", JSON, `{` + min + `,"metadata":{"@class":"java.util.Collections$EmptyMap"}}`,
			func(in *fsm.Instance) bool { return in.Metadata.IsNil() }},
		{"xml metadata names", XML, `<instance><metadata class="x"><a__b>1</a__b><c_-d>2</c_-d><e_f> 3 </e_f><class>4</class></metadata></instance>`,
			func(in *fsm.Instance) bool {
				return reflect.DeepEqual(in.Metadata.Map(), map[string]string{"a_b": "1", "c$d": "2", "e_f": " 3 ", "class": "4"})
			}},
		{"xml empty metadata marker", XML, `<instance><metadata class="java.util.Collections$EmptyMap"/></instance>`,
			func(in *fsm.Instance) bool { return in.Metadata.IsNil() }},
		{"amazon metadata kept", JSON, `{"dataCenterInfo":{"name":"Amazon","metadata":{"instance-id":"i-1","ami-launch-index":0}}}`,
			func(in *fsm.Instance) bool {
				dc := in.DataCenterInfo
				return dc.Class == classAmazonInfo && in.ID() == "i-1" &&
					reflect.DeepEqual(dc.Metadata.Map(), map[string]string{"instance-id": "i-1", "ami-launch-index": "0"})
			}},
		{"non-amazon metadata dropped", JSON, `{"dataCenterInfo":{"name":"MyOwn","metadata":{"a":"b"}}}`,
			func(in *fsm.Instance) bool { return in.DataCenterInfo.Metadata.IsNil() }},
		{"client class kept", XML, `<instance><dataCenterInfo class="com.netflix.appinfo.MyDataCenterInfo"><name>MyOwn</name></dataCenterInfo></instance>`,
			func(in *fsm.Instance) bool {
				return reflect.DeepEqual(in.DataCenterInfo, fsm.DataCenterInfo{Class: "com.netflix.appinfo.MyDataCenterInfo", Name: "MyOwn"})
			}},
		{"absent dataCenterInfo", JSON, `{"dataCenterInfo":null}`,
			func(in *fsm.Instance) bool { return reflect.DeepEqual(in.DataCenterInfo, fsm.DataCenterInfo{}) }},
		{"empty dataCenterInfo", JSON, `{"dataCenterInfo":{}}`,
			func(in *fsm.Instance) bool {
				return reflect.DeepEqual(in.DataCenterInfo, fsm.DataCenterInfo{Class: classDefaultInfo})
			}},
		{"renewalTimestamp alias", JSON, `{"leaseInfo":{"renewalTimestamp":5}}`, func(in *fsm.Instance) bool { return true }},
		{"xml with BOM and latin1", XML, "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><instance><hostName>h\xe9</hostName></instance>",
			func(in *fsm.Instance) bool { return in.HostName == "hé" }},
		{"json with BOM", JSON, "\xef\xbb\xbf {\"hostName\":\"h\"} ", func(in *fsm.Instance) bool { return in.HostName == "h" }},
		{"json escapes", JSON, `{"hostName":"a\u00e9\ud83d\ude00\ud800x\n\/"}`,
			func(in *fsm.Instance) bool { return in.HostName == "aé😀\ufffdx\n/" }},
		{"invalid utf-8", JSON, "{\"hostName\":\"a\xffb\"}", func(in *fsm.Instance) bool { return in.HostName == "a\ufffdb" }},
		{"xml attributes on scalars ignored", XML, `<instance><hostName type="x">h</hostName></instance>`,
			func(in *fsm.Instance) bool { return in.HostName == "h" }},
	}
	runDecodeCases(t, cases)
}

func TestDecodeEntryLease(t *testing.T) {
	body := `{"instance":{"hostName":"h","app":"a","leaseInfo":{"renewalTimestamp":"5","registrationTimestamp":1,` +
		`"evictionTimestamp":2,"serviceUpTimestamp":3},"lastUpdatedTimestamp":4,"actionType":"DELETED",` +
		`"isCoordinatingDiscoveryServer":"true","overriddenStatus":"DOWN"}}`
	e, err := DecodeEntry([]byte(body), JSON)
	if err != nil {
		t.Fatal(err)
	}
	if e.LastRenewalTs != 5 || e.RegistrationTs != 1 || e.EvictionTs != 2 || e.ServiceUpTs != 3 ||
		e.LastUpdatedTs != 4 || e.ActionType != "DELETED" || !e.Instance.IsCoordinatingDiscoveryServer ||
		e.App != "A" || e.ID != "h" || e.Override != "DOWN" || e.Instance.LastDirtyTimestamp != 0 {
		t.Errorf("%+v %+v", *e, *e.Instance)
	}
}

func TestDecodeBadInput(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		body   string
		msg    string // substring of the error
	}{
		{"empty json", JSON, "", "unexpected end of input"},
		{"empty xml", XML, "", "no root element"},
		{"malformed json", JSON, `{"instance":{"hostName":"h",}}`, "expected a member name"},
		{"truncated json", JSON, `{"instance":{"hostName":"h"`, "malformed JSON"},
		{"truncated string", JSON, `{"instance":{"hostName":"h`, "unterminated string"},
		{"trailing data", JSON, `{"instance":{}} {}`, "after the document"},
		{"bad literal", JSON, `{"hostName":tru}`, "expected true"},
		{"bad number", JSON, `{"countryId":01}`, "expected ',' or '}'"},
		{"bad escape", JSON, `{"hostName":"\x"}`, "invalid escape"},
		{"raw control char", JSON, "{\"hostName\":\"a\x01\"}", "control character"},
		{"json array root", JSON, `[]`, "instance: expected an object, got an array"},
		{"wrapper not an object", JSON, `{"instance":"x"}`, "instance: expected an object, got a string"},
		{"deep nesting", JSON, strings.Repeat("[", 100) + strings.Repeat("]", 100), "nesting deeper"},
		{"deep unknown key", JSON, `{"x":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat("}", 101), "nesting deeper"},
		{"malformed xml", XML, `<instance><hostName>h</instance>`, "malformed XML"},
		{"truncated xml", XML, `<instance><hostName>h</hostName>`, "malformed XML"},
		{"wrong xml root", XML, `<application/>`, "root element is <application>, expected <instance>"},
		{"two xml roots", XML, `<instance/><instance/>`, "more than one root"},
		{"text after xml root", XML, `<instance/>x`, "text outside"},
		{"unknown entity", XML, `<instance><hostName>&nbsp;</hostName></instance>`, "malformed XML"},
		{"unsupported charset", XML, `<?xml version="1.0" encoding="UTF-16"?><instance/>`, "malformed XML"},
		{"port bool", JSON, `{"port":true}`, "port: expected a port object or number, got a boolean"},
		{"port out of range", JSON, `{"port":{"$":4294967296}}`, "port.$: 4294967296 is out of range"},
		{"xml port abc", XML, `<instance><port>abc</port></instance>`, `port: "abc" is not an integer`},
		{"xml port element", XML, `<instance><port><x/></port></instance>`, "port: expected a port number"},
		{"enabled object", JSON, `{"port":{"@enabled":{}}}`, "port.@enabled: expected a boolean"},
		{"hostName object", JSON, `{"hostName":{"a":1}}`, "hostName: expected a string, got an object"},
		{"hostName array", JSON, `{"hostName":[]}`, "hostName: expected a string, got an array"},
		{"xml hostName element", XML, `<instance><hostName><a/></hostName></instance>`, "hostName: expected text"},
		{"lastDirtyTimestamp object", JSON, `{"lastDirtyTimestamp":{}}`, "lastDirtyTimestamp: expected a number"},
		{"lease string", JSON, `{"leaseInfo":"x"}`, "leaseInfo: expected an object"},
		{"dataCenterInfo string", JSON, `{"dataCenterInfo":"MyOwn"}`, "dataCenterInfo: expected an object"},
		{"xml dataCenterInfo text", XML, `<instance><dataCenterInfo>MyOwn</dataCenterInfo></instance>`, "dataCenterInfo: expected an object"},
		{"dataCenterInfo name object", JSON, `{"dataCenterInfo":{"name":{}}}`, "dataCenterInfo.name: expected a string"},
		{"dataCenterInfo name lower-case", JSON, `{"dataCenterInfo":{"name":"myown"}}`, `dataCenterInfo.name: "myown" is not one of`},
		{"dataCenterInfo name amazon json", JSON, `{"dataCenterInfo":{"name":"amazon"}}`, `"amazon" is not one of`},
		{"dataCenterInfo name unknown xml", XML, `<instance><dataCenterInfo><name>Google</name></dataCenterInfo></instance>`, `"Google" is not one of`},
		{"dataCenterInfo name myown xml", XML, `<instance><dataCenterInfo><name>myown</name></dataCenterInfo></instance>`, `"myown" is not one of`},
		{"metadata array", JSON, `{"metadata":[]}`, "metadata: expected an object, got an array"},
		{"metadata value object", JSON, `{"metadata":{"k":{}}}`, "metadata.k: expected a string"},
		{"xml metadata value element", XML, `<instance><metadata><k><v/></k></metadata></instance>`, "metadata.k: expected a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeInstance([]byte(c.body), c.format, now)
			var br *BadRequestError
			if !errors.As(err, &br) {
				t.Fatalf("error %v (%T), want *BadRequestError", err, err)
			}
			if !strings.Contains(br.Msg, c.msg) {
				t.Errorf("message %q does not contain %q", br.Msg, c.msg)
			}
		})
	}
}

func TestValidateInstance(t *testing.T) {
	valid := func() *fsm.Instance { return wantClientInstance() }
	cases := []struct {
		name    string
		pathApp string
		mutate  func(in *fsm.Instance)
		msg     string
	}{
		{"valid", "orders", func(in *fsm.Instance) {}, ""},
		{"path case ignored", "OrDeRs", func(in *fsm.Instance) {}, ""},
		{"id falls back to hostName", "orders", func(in *fsm.Instance) { in.InstanceID = "" }, ""},
		{"missing instanceId", "orders", func(in *fsm.Instance) { in.InstanceID, in.HostName = "", "" }, "Missing instanceId"},
		{"amazon id", "orders", func(in *fsm.Instance) {
			in.InstanceID, in.HostName = "", ""
			in.DataCenterInfo = fsm.DataCenterInfo{Class: classAmazonInfo, Name: "Amazon", Metadata: fsm.MetadataOf(map[string]string{"instance-id": "i-1"})}
		}, "Missing hostname"},
		{"missing hostname", "orders", func(in *fsm.Instance) { in.HostName = "" }, "Missing hostname"},
		{"missing ip", "orders", func(in *fsm.Instance) { in.IPAddr = "" }, "Missing ip address"},
		{"missing app", "orders", func(in *fsm.Instance) { in.App = "" }, "Missing appName"},
		{"mismatched app", "foo", func(in *fsm.Instance) { in.App = "bar" }, "Mismatched appName, expecting FOO but was BAR"},
		{"missing dataCenterInfo", "orders", func(in *fsm.Instance) { in.DataCenterInfo = fsm.DataCenterInfo{} }, "Missing dataCenterInfo"},
		{"missing dataCenterInfo name", "orders", func(in *fsm.Instance) { in.DataCenterInfo.Name = "" }, "Missing dataCenterInfo Name"},
		{"order: hostname before app", "x", func(in *fsm.Instance) { in.HostName, in.InstanceID = "", "id" }, "Missing hostname"},
		{"order: app before dataCenterInfo", "x", func(in *fsm.Instance) { in.DataCenterInfo = fsm.DataCenterInfo{} }, "Mismatched appName, expecting X but was ORDERS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := valid()
			c.mutate(in)
			err := ValidateInstance(in, c.pathApp)
			if c.msg == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var br *BadRequestError
			if !errors.As(err, &br) || br.Msg != c.msg {
				t.Fatalf("got %v, want %q", err, c.msg)
			}
		})
	}
	// Decoded bodies reach the data-center checks as described.
	for body, msg := range map[string]string{
		`{"instance":{"hostName":"h","app":"a","ipAddr":"i"}}`:                                       "Missing dataCenterInfo",
		`{"instance":{"hostName":"h","app":"a","ipAddr":"i","dataCenterInfo":{}}}`:                   "Missing dataCenterInfo Name",
		`{"instance":{"hostName":"h","app":"a","ipAddr":"i","dataCenterInfo":{"@class":""}}}`:        "Missing dataCenterInfo Name",
		`<instance><hostName>h</hostName><app>a</app><ipAddr>i</ipAddr><dataCenterInfo/></instance>`: "Missing dataCenterInfo Name",
		`<instance><hostName>h</hostName><app>a</app><ipAddr>i</ipAddr></instance>`:                  "Missing dataCenterInfo",
	} {
		f := RequestFormat("", []byte(body))
		in, err := DecodeInstance([]byte(body), f, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateInstance(in, "A"); err == nil || err.Error() != msg {
			t.Errorf("%s: got %v, want %q", body, err, msg)
		}
	}
}

func TestNormalizeAppName(t *testing.T) {
	for in, want := range map[string]string{"": "", "ABC": "ABC", "order-service": "ORDER-SERVICE", "café": "CAFé", "ı": "ı"} {
		if got := NormalizeAppName(in); got != want {
			t.Errorf("NormalizeAppName(%q) = %q, want %q", in, got, want)
		}
	}
}
