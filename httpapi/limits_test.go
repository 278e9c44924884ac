package httpapi

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func newStrictServer(t *testing.T, strict bool) (*httptest.Server, *fakeCluster) {
	t.Helper()
	return newTestServerWith(t, func(cfg *Config) { cfg.StrictInput = strict })
}

func TestStrictInput_Refusals(t *testing.T) {
	ts, fc := newStrictServer(t, true)
	js := "application/json"
	bigMD := map[string]string{}
	for i := range 1025 {
		bigMD[fmt.Sprintf("k%d", i)] = "v"
	}
	withMD := func(md map[string]string) string {
		parts := []string{}
		for k, v := range md {
			parts = append(parts, fmt.Sprintf("%q:%q", k, v))
		}
		return strings.Replace(instanceJSON("svc", "i-md"), `"metadata":{"zone":"a"}`, `"metadata":{`+strings.Join(parts, ",")+`}`, 1)
	}
	cases := []struct {
		name, method, path, body, want string
	}{
		{"path app control char", "POST", "/eureka/apps/sv%0Ac", instanceJSON("sv\nc", "i-1"), "app name"},
		{"path id slash", "PUT", "/eureka/apps/svc/a%2Fb", "", "instance id"},
		{"path id dotdot", "DELETE", "/eureka/apps/svc/..", "", "instance id"},
		{"path id too long", "PUT", "/eureka/apps/svc/" + strings.Repeat("x", 257), "", "instance id"},
		{"path app too long", "GET", "/eureka/apps/" + strings.Repeat("x", 257), "", "app name"},
		{"status id control", "PUT", "/eureka/apps/svc/i%01/status?value=UP", "", "instance id"},
		{"body id control", "POST", "/eureka/apps/svc", instanceJSON("svc", `i-\u0007`), "instance id"},
		{"body id too long", "POST", "/eureka/apps/svc", instanceJSON("svc", strings.Repeat("i", 300)), "instance id"},
		{"body too many metadata", "POST", "/eureka/apps/svc", withMD(bigMD), "metadata has 1025 entries"},
		{"body metadata key too long", "POST", "/eureka/apps/svc", withMD(map[string]string{strings.Repeat("k", 257): "v"}), "metadata key"},
		{"body metadata value too long", "POST", "/eureka/apps/svc", withMD(map[string]string{"k": strings.Repeat("v", 16<<10+1)}), "metadata value"},
		{"metadata query value too long", "PUT", "/eureka/apps/svc/i-ok/metadata?k=" + strings.Repeat("v", 16<<10+1), "", "metadata value"},
		{"metadata query key control", "PUT", "/eureka/apps/svc/i-ok/metadata?" + url.QueryEscape("a\x01") + "=1", "", "metadata key"},
	}
	if code, b, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", js, instanceJSON("svc", "i-ok")); code != 204 {
		t.Fatalf("good register: %d %s", code, b)
	}
	before := fc.applied
	for _, c := range cases {
		ct := ""
		if c.body != "" {
			ct = js
		}
		code, b, _ := do(t, c.method, ts.URL+c.path, ct, c.body)
		if code != 400 || !strings.Contains(b, c.want) {
			t.Errorf("%s: %d %.200s, want 400 mentioning %q", c.name, code, b, c.want)
		}
	}
	if fc.applied != before || fc.renews != 0 {
		t.Fatalf("refused requests reached the log: applied %d -> %d, renews %d", before, fc.applied, fc.renews)
	}
	// Limits leave good requests alone.
	if code, b, _ := do(t, "PUT", ts.URL+"/eureka/apps/svc/i-ok/metadata?zone=b", "", ""); code != 200 {
		t.Fatalf("good metadata: %d %s", code, b)
	}
	if code, b, _ := do(t, "GET", ts.URL+"/eureka/apps/delta", "", ""); code != 200 {
		t.Fatalf("delta: %d %s", code, b)
	}
}

// TestStrictInput_Off: with StrictInput off (--strict-input=false) a long id
// is accepted, as eureka-server would.
func TestStrictInput_Off(t *testing.T) {
	ts, _ := newStrictServer(t, false)
	if code, b, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", "application/json", instanceJSON("svc", strings.Repeat("i", 300))); code != 204 {
		t.Fatalf("long id without strict input: %d %s", code, b)
	}
}
