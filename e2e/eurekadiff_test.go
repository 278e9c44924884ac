package e2e

// The differential test (docs/eureka-compat.md): the same sequence of Eureka REST
// requests goes to a real eureka-server (Spring Cloud Netflix, e2e/eurekaserver,
// standalone, readOnly response cache off) and to heureka; the answers are
// normalised and compared on status code, Content-Type and body. Every
// difference that remains must be listed in diffAllowed with the section of
// docs/eureka-compat.md that explains it.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

const eurekaServerJar = "eurekaserver/target/eurekaserver.jar"

// diffCase is one request of the sequence.
type diffCase struct {
	name    string
	method  string
	path    string   // after the server's base URL
	headers []string // name/value pairs
	body    string
}

// diffAllowed lists the cases whose remaining difference is intentional,
// each with the section of docs/eureka-compat.md that says why.
var diffAllowed = map[string]string{
	"status/xml":                   "#status-document",
	"status/json":                  "#status-document",
	"statusoverrides":              "#status-overrides",
	"register/no-content-type":     "#content-types",
	"register/port-bare-number":    "#lenient-register-bodies",
	"app/odd/json":                 "#lenient-register-bodies",
	"app/odd/xml":                  "#lenient-register-bodies",
	"app/refused-bodies":           "#content-types",
	"instance/after-oos/xml":       "#status-rewrite-for-v1-clients",
	"v1/app/xml":                   "#version-segments",
	"instance/after-metadata":      "#metadata-updates",
	"apps/after-odd/json":          "#lenient-register-bodies",
	"apps/after-odd/xml":           "#lenient-register-bodies",
	"delta/json":                   "#delta",
	"delta/xml":                    "#delta",
	"renew/bad-lastDirtyTimestamp": "#query-parameters",
	"status/bad-value":             "#query-parameters",
	"status/lower-case-value":      "#query-parameters",
	"status/missing-value":         "#query-parameters",
}

func diffInstanceJSON(app, id string, extra string) string {
	return `{"instance":{"instanceId":"` + id + `","hostName":"` + id + `.diff.test","app":"` + app + `","ipAddr":"10.2.0.1",` +
		`"status":"UP","overriddenStatus":"UNKNOWN","port":{"$":8080,"@enabled":"true"},"securePort":{"$":8443,"@enabled":"false"},` +
		`"countryId":1,"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{"zone":"z1"},` +
		`"vipAddress":"` + strings.ToLower(app) + `.vip","secureVipAddress":"` + strings.ToLower(app) + `.svip",` +
		`"homePageUrl":"http://` + id + `.diff.test:8080/","lastDirtyTimestamp":"1700000000000"` + extra + `}}`
}

func diffInstanceXML(app, id string, extra string) string {
	return `<instance><instanceId>` + id + `</instanceId><hostName>` + id + `.diff.test</hostName><app>` + app + `</app>` +
		`<ipAddr>10.2.0.2</ipAddr><status>UP</status><overriddenstatus>UNKNOWN</overriddenstatus>` +
		`<port enabled="true">8080</port><securePort enabled="false">8443</securePort><countryId>1</countryId>` +
		`<dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>` +
		`<leaseInfo><renewalIntervalInSecs>30</renewalIntervalInSecs><durationInSecs>90</durationInSecs></leaseInfo>` +
		`<metadata><zone>z2</zone></metadata><vipAddress>` + strings.ToLower(app) + `.vip</vipAddress>` +
		`<lastDirtyTimestamp>1700000000000</lastDirtyTimestamp>` + extra + `</instance>`
}

func diffCases() []diffCase {
	js := []string{"Accept", "application/json"}
	xm := []string{"Accept", "application/xml"}
	post := func(name, app, ctype, body string) diffCase {
		return diffCase{name: name, method: "POST", path: "/eureka/apps/" + app, headers: []string{"Content-Type", ctype}, body: body}
	}
	get := func(name, path string, accept []string) diffCase {
		return diffCase{name: name, method: "GET", path: path, headers: accept}
	}
	put := func(name, path string) diffCase { return diffCase{name: name, method: "PUT", path: path} }
	del := func(name, path string) diffCase { return diffCase{name: name, method: "DELETE", path: path} }
	return []diffCase{
		get("apps/empty/json", "/eureka/apps", js),
		get("apps/empty/xml", "/eureka/apps", xm),
		post("register/json", "DIFFA", "application/json", diffInstanceJSON("DIFFA", "a-1", "")),
		post("register/xml", "DIFFA", "application/xml", diffInstanceXML("DIFFA", "a-2", "")),
		post("register/other-app", "DIFFB", "application/json", diffInstanceJSON("DIFFB", "b-1", "")),
		get("apps/json", "/eureka/apps", js),
		get("apps/xml", "/eureka/apps/", xm),
		get("app/json", "/eureka/apps/DIFFA", js),
		get("app/compact/json", "/eureka/apps/DIFFA", append([]string{"X-Eureka-Accept", "compact"}, js...)),
		get("app/compact/xml", "/eureka/apps/DIFFA", append([]string{"X-Eureka-Accept", "compact"}, xm...)),
		get("app/xml", "/eureka/apps/diffa", xm),
		get("instance/json", "/eureka/apps/DIFFA/a-1", js),
		get("instance/xml", "/eureka/apps/DIFFA/a-2", xm),
		get("instance-by-id/json", "/eureka/instances/a-1", js),
		get("vip/json", "/eureka/vips/diffa.vip", js),
		get("svip/xml", "/eureka/svips/diffb.svip", xm),
		{name: "head/apps", method: "HEAD", path: "/eureka/apps", headers: js},
		put("renew", "/eureka/apps/DIFFA/a-1"),
		put("renew/with-ldt", "/eureka/apps/DIFFA/a-1?status=UP&lastDirtyTimestamp=1700000000000"),
		put("status/same", "/eureka/apps/DIFFA/a-1/status?value=UP"),
		get("instance/after-same-status", "/eureka/apps/DIFFA/a-1", js),
		put("status/oos", "/eureka/apps/DIFFA/a-1/status?value=OUT_OF_SERVICE"),
		get("instance/after-oos/json", "/eureka/apps/DIFFA/a-1", js),
		get("instance/after-oos/xml", "/eureka/apps/DIFFA/a-1", xm),
		get("v1/app/xml", "/eureka/v1/apps/DIFFA", xm),
		get("statusoverrides", "/eureka/serverinfo/statusoverrides", js),
		del("status/delete", "/eureka/apps/DIFFA/a-1/status?value=UP"),
		get("instance/after-delete-status", "/eureka/apps/DIFFA/a-1", js),
		put("metadata", "/eureka/apps/DIFFA/a-2/metadata?color=blue&zone=z9"),
		get("instance/after-metadata", "/eureka/apps/DIFFA/a-2", xm),
		// Odd bodies eureka-server accepts, and bodies it refuses.
		post("register/status-lower", "DIFFODD", "application/json", diffInstanceJSON("DIFFODD", "o-1", `,"status":"up"`)),
		post("register/status-bogus", "DIFFODD", "application/json", diffInstanceJSON("DIFFODD", "o-2", `,"status":"bogus"`)),
		post("register/port-word", "DIFFODD", "application/json", strings.Replace(diffInstanceJSON("DIFFODD", "o-3", ""), `"$":8080`, `"$":"eighty"`, 1)),
		post("register/country-word", "DIFFODD", "application/json", strings.Replace(diffInstanceJSON("DIFFODD", "o-4", ""), `"countryId":1`, `"countryId":"one"`, 1)),
		post("register/lease-words", "DIFFODD", "application/json", strings.Replace(diffInstanceJSON("DIFFODD", "o-5", ""), `"durationInSecs":90`, `"durationInSecs":"ninety"`, 1)),
		post("register/xml-status-lower", "DIFFODD", "application/xml", strings.Replace(diffInstanceXML("DIFFODD", "o-6", ""), "<status>UP</status>", "<status>down</status>", 1)),
		post("register/amazon-no-id", "DIFFODD", "application/json", strings.Replace(diffInstanceJSON("DIFFODD", "o-7", ""),
			`{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}`,
			`{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon","metadata":{"availability-zone":"z1"}}`, 1)),
		post("register/port-bare-number", "DIFFODD", "application/json", strings.Replace(diffInstanceJSON("DIFFODD", "o-8", ""), `{"$":8080,"@enabled":"true"}`, `8080`, 1)),
		post("register/xml-amazon-lower", "DIFFODD", "application/xml", strings.Replace(diffInstanceXML("DIFFODD", "o-9", ""), "<name>MyOwn</name>", "<name>amazon</name>", 1)),
		get("app/odd/json", "/eureka/apps/DIFFODD", js),
		get("app/odd/xml", "/eureka/apps/DIFFODD", xm),
		post("register/datacenter-lower", "DIFFBAD", "application/json", strings.Replace(diffInstanceJSON("DIFFBAD", "x-1", ""), `"name":"MyOwn"`, `"name":"myown"`, 1)),
		post("register/xml-datacenter-unknown", "DIFFBAD", "application/xml", strings.Replace(diffInstanceXML("DIFFBAD", "x-2", ""), "<name>MyOwn</name>", "<name>Google</name>", 1)),
		post("register/xml-port-word", "DIFFBAD", "application/xml", strings.Replace(diffInstanceXML("DIFFBAD", "x-3", ""), `>8080<`, `>eighty<`, 1)),
		post("register/truncated", "DIFFBAD", "application/json", diffInstanceJSON("DIFFBAD", "x-4", "")[:80]),
		post("register/app-mismatch", "DIFFBAD", "application/json", diffInstanceJSON("OTHER", "x-5", "")),
		post("register/no-ip", "DIFFBAD", "application/json", strings.Replace(diffInstanceJSON("DIFFBAD", "x-6", ""), `"ipAddr":"10.2.0.1",`, "", 1)),
		post("register/text-plain", "DIFFBAD", "text/plain", diffInstanceJSON("DIFFBAD", "x-7", "")),
		{name: "register/no-content-type", method: "POST", path: "/eureka/apps/DIFFBAD", body: diffInstanceJSON("DIFFBAD", "x-8", "")},
		get("app/refused-bodies", "/eureka/apps/DIFFBAD", js),
		get("apps/after-odd/json", "/eureka/apps", js),
		get("apps/after-odd/xml", "/eureka/apps", xm),
		// Misses.
		get("app/unknown", "/eureka/apps/NOPE", js),
		get("instance/unknown", "/eureka/apps/DIFFA/nope", js),
		get("instance-by-id/unknown", "/eureka/instances/nope", js),
		put("renew/unknown", "/eureka/apps/DIFFA/nope"),
		put("renew/bad-lastDirtyTimestamp", "/eureka/apps/DIFFA/a-1?lastDirtyTimestamp=soon"),
		put("status/unknown-instance", "/eureka/apps/DIFFA/nope/status?value=DOWN"),
		put("status/bad-value", "/eureka/apps/DIFFA/a-1/status?value=SLEEPY"),
		put("status/lower-case-value", "/eureka/apps/DIFFA/a-1/status?value=down"),
		put("status/missing-value", "/eureka/apps/DIFFA/a-1/status"),
		put("metadata/unknown", "/eureka/apps/DIFFA/nope/metadata?a=b"),
		del("cancel/unknown", "/eureka/apps/DIFFA/nope"),
		// Cancel, then the instance is gone.
		del("cancel", "/eureka/apps/DIFFA/a-2"),
		get("instance/after-cancel", "/eureka/apps/DIFFA/a-2", js),
		get("delta/json", "/eureka/apps/delta", js),
		get("delta/xml", "/eureka/apps/delta", xm),
		get("status/xml", "/eureka/status", xm),
		get("status/json", "/eureka/status", js),
	}
}

// diffResult is one normalised answer.
type diffResult struct {
	Code        int
	ContentType string
	Body        string
}

func diffSend(base string, c diffCase) (diffResult, error) {
	var body []byte
	if c.body != "" {
		body = []byte(c.body)
	}
	headers := append([]string{"Accept", "application/xml"}, c.headers...)
	if c.body != "" && !hasHeader(c.headers, "Content-Type") {
		// TryDo would add application/json: send no Content-Type at all.
		return diffSendRaw(base, c)
	}
	code, respBody, hdr, err := TryDo(c.method, base+c.path, body, headers...)
	if err != nil {
		return diffResult{}, err
	}
	return diffNormalise(code, hdr.Get("Content-Type"), respBody, c.method), nil
}

func hasHeader(h []string, name string) bool {
	for i := 0; i+1 < len(h); i += 2 {
		if strings.EqualFold(h[i], name) {
			return true
		}
	}
	return false
}

func diffSendRaw(base string, c diffCase) (diffResult, error) {
	req, err := newRawRequest(c.method, base+c.path, c.body)
	if err != nil {
		return diffResult{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return diffResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return diffNormalise(resp.StatusCode, resp.Header.Get("Content-Type"), b, c.method), nil
}

// diffNormalise keeps what must match: the status code; for a success, the
// media type and the body with timestamps masked and lists sorted. Error
// bodies are not compared: eureka-server answers with Spring Boot's error
// page JSON, heureka with {"error": message} or, on a 404, nothing
// (docs/eureka-compat.md, the normalisations at its top).
func diffNormalise(code int, ctype string, body []byte, method string) diffResult {
	r := diffResult{Code: code}
	if code >= 300 || method == "HEAD" || len(bytes.TrimSpace(body)) == 0 {
		return r
	}
	mt, _, _ := strings.Cut(ctype, ";")
	r.ContentType = strings.TrimSpace(mt)
	switch {
	case strings.Contains(r.ContentType, "json"):
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			r.Body = "unparsable JSON: " + err.Error()
			return r
		}
		b, _ := json.MarshalIndent(normaliseValue("", v), "", " ")
		r.Body = string(b)
	case strings.Contains(r.ContentType, "xml"):
		v, err := xmlToValue(body)
		if err != nil {
			r.Body = "unparsable XML: " + err.Error()
			return r
		}
		b, _ := json.MarshalIndent(normaliseValue("", v), "", " ")
		r.Body = string(b)
	default:
		r.Body = string(body)
	}
	return r
}

// maskedKeys hold times set by the server; only zero versus non-zero is kept.
var maskedKeys = map[string]bool{
	"registrationTimestamp": true, "lastRenewalTimestamp": true, "evictionTimestamp": true,
	"serviceUpTimestamp": true, "lastUpdatedTimestamp": true, "lastDirtyTimestamp": true,
}

func normaliseValue(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normaliseValue(k, e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normaliseValue(key, e)
		}
		sort.SliceStable(out, func(i, j int) bool { return sortKey(out[i]) < sortKey(out[j]) })
		return out
	}
	if key == "versions__delta" {
		// eureka-server counts delta builds, heureka gives its log index:
		// both only ever grow (docs/eureka-compat.md, "Delta").
		if s := fmt.Sprint(v); s != "1" && s != "-1" {
			return "<version>"
		}
	}
	if maskedKeys[key] {
		if s := fmt.Sprint(v); s != "0" && s != "" {
			return "<time>"
		}
	}
	return v
}

// sortKey orders applications by name and instances by id.
func sortKey(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	for _, k := range []string{"instanceId", "name", "hostName"} {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	return ""
}

// xmlToValue turns an XML document into nested maps (attributes as "@name",
// text as "$" when an element also has attributes or children; repeated
// elements as lists), the same shape whatever the indentation.
func xmlToValue(body []byte) (any, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	type frame struct {
		name     string
		m        map[string]any
		text     strings.Builder
		children bool
	}
	var stack []*frame
	var root any
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return root, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			f := &frame{name: t.Name.Local, m: map[string]any{}}
			for _, a := range t.Attr {
				f.m["@"+a.Name.Local] = a.Value
			}
			if len(stack) > 0 {
				stack[len(stack)-1].children = true
			}
			stack = append(stack, f)
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(t)
			}
		case xml.EndElement:
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var val any
			text := strings.TrimSpace(f.text.String())
			switch {
			case !f.children && len(f.m) == 0:
				val = text
			case !f.children:
				f.m["$"] = text
				val = f.m
			default:
				val = f.m
			}
			if len(stack) == 0 {
				root = map[string]any{f.name: val}
				continue
			}
			p := stack[len(stack)-1].m
			switch old := p[f.name].(type) {
			case nil:
				p[f.name] = val
			case []any:
				p[f.name] = append(old, val)
			default:
				p[f.name] = []any{old, val}
			}
		}
	}
}

// startEurekaServer runs the reference eureka-server on a free port and
// waits until it answers.
func startEurekaServer(t *testing.T, java, jar string) string {
	t.Helper()
	host, port, _ := strings.Cut(FreeAddr(t), ":")
	es := launch.EurekaServer{Jar: jar, JVMArgs: jvmArgs, Host: host, Port: port,
		// Fresh reads (readOnly cache off): both sides must answer the
		// same request the same moment.
		Properties: []string{"--eureka.server.use-read-only-response-cache=false"}}
	p := StartProc(t, "eurekaserver", exec.Command(java, es.Argv()...))
	if err := launch.WaitEurekaServer(context.Background(), es.URL(), 2*clientTimeout, p.Running); err != nil {
		t.Fatalf("%v; tail:\n%s", err, p.Tail(40))
	}
	return es.URL()
}

// eurekaServerTools finds java and the reference eureka-server's jar, or
// ends the test what (ToolOrSkip).
func eurekaServerTools(t *testing.T, what string) (java, jar string) {
	t.Helper()
	java, _, err := javaTools()
	ToolOrSkip(t, what, err)
	jar, _ = filepath.Abs(eurekaServerJar)
	if _, err := os.Stat(jar); err != nil {
		ToolOrSkip(t, what, fmt.Errorf("e2e/%s is not built (run `make deps`): %v", eurekaServerJar, err))
	}
	return java, jar
}

func TestEurekaDifferential(t *testing.T) {
	java, jar := eurekaServerTools(t, "eureka-server differential")
	start := time.Now()
	ref := startEurekaServer(t, java, jar)
	c := StartCluster(t, 1, Options{ExtraArgs: append([]string{"--use-read-only-response-cache=false"}, edCacheArgs...)})
	c.WaitLeader(t, 15*time.Second)
	ours := c.Nodes[0].BaseURL()

	compareServers(t, "differential", ref, ours, diffCases(), diffAllowed, nil)
	t.Logf("differential took %.1fs", time.Since(start).Seconds())
}

// compareServers sends each case to eureka-server (ref) and to heureka
// (ours) and fails the test on a difference that allowed does not list
// (with the section of docs/eureka-compat.md that explains it), or on an
// allowed one that is gone. normalise, when set, adjusts both answers of a
// case before they are compared.
func compareServers(t *testing.T, what, ref, ours string, cases []diffCase, allowed map[string]string, normalise func(diffCase, *diffResult)) {
	t.Helper()
	known := 0
	var unexplained []string
	for _, tc := range cases {
		want, err := diffSend(ref, tc)
		if err != nil {
			t.Fatalf("%s: eureka-server: %v", tc.name, err)
		}
		got, err := diffSend(ours, tc)
		if err != nil {
			t.Fatalf("%s: heureka: %v", tc.name, err)
		}
		if normalise != nil {
			normalise(tc, &want)
			normalise(tc, &got)
		}
		doc, isAllowed := allowed[tc.name]
		switch {
		case reflect.DeepEqual(want, got):
			if isAllowed {
				t.Errorf("%s: no difference left, drop it from the allowed list (%s)", tc.name, doc)
			}
		case isAllowed:
			known++
			t.Logf("%s: known difference (docs/eureka-compat.md%s): eureka-server %d %s, heureka %d %s",
				tc.name, doc, want.Code, want.ContentType, got.Code, got.ContentType)
			if os.Getenv("HEUREKA_DIFF_VERBOSE") != "" {
				t.Logf("eureka-server body: %s\nheureka body: %s", want.Body, got.Body)
			}
		default:
			unexplained = append(unexplained, fmt.Sprintf("%s %s %s:\n  eureka-server: %d %s %s\n  heureka:       %d %s %s",
				tc.name, tc.method, tc.path, want.Code, want.ContentType, want.Body, got.Code, got.ContentType, got.Body))
		}
	}
	t.Logf("%s: %d cases compared, %d known differences, %d unexplained", what, len(cases), known, len(unexplained))
	if len(unexplained) > 0 {
		t.Fatalf("%d unexplained differences:\n%s", len(unexplained), strings.Join(unexplained, "\n"))
	}
}
