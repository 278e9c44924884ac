package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

func mustRegister(t *testing.T, url, app, body string) {
	t.Helper()
	if code, resp, _ := do(t, "POST", url+"/eureka/apps/"+app, "application/json", body); code != 204 {
		t.Fatalf("register: %d %s", code, resp)
	}
}

// TestEureka_OddBodiesAccepted: bodies eureka-server accepts register here
// too, normalised the same way (unknown status UNKNOWN, non-numeric port 0).
func TestEureka_OddBodiesAccepted(t *testing.T) {
	ts, fc := newTestServer(t)
	mustRegister(t, ts.URL, "svc", strings.Replace(instanceJSON("svc", "i-1"), `"status":"UP"`, `"status":"up"`, 1))
	mustRegister(t, ts.URL, "svc", strings.Replace(instanceJSON("svc", "i-2"), `"$":8080`, `"$":"abc"`, 1))
	fc.fsm.Read(func(r *fsm.Registry) {
		if e := r.Get("SVC", "i-1"); e == nil || e.Instance.Status != fsm.StatusUnknown {
			t.Errorf("status \"up\": %+v", e)
		}
		if e := r.Get("SVC", "i-2"); e == nil || e.Instance.Port != 0 {
			t.Errorf("port \"abc\": %+v", e)
		}
	})
}

// TestEureka_UnsupportedContentType: register with a body type other than
// JSON or XML is 415 and records nothing; no type at all is still sniffed.
func TestEureka_UnsupportedContentType(t *testing.T) {
	ts, fc := newTestServer(t)
	code, body, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", "text/plain", instanceJSON("svc", "i-1"))
	if code != http.StatusUnsupportedMediaType || !strings.Contains(body, "error") || fc.applied != 0 {
		t.Fatalf("text/plain: %d %q applied %d", code, body, fc.applied)
	}
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	req, _ := http.NewRequest("POST", ts.URL+"/eureka/apps/svc", strings.NewReader(instanceJSON("svc", "i-2")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("no content type: %d", resp.StatusCode)
	}
}

// TestEureka_AmazonInstanceID: an Amazon dataCenterInfo without an
// instance-id metadata key gets the instance's id there, as eureka-server's
// register does.
func TestEureka_AmazonInstanceID(t *testing.T) {
	ts, _ := newTestServer(t)
	body := strings.Replace(instanceJSON("svc", "i-1"),
		`{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}`,
		`{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon","metadata":{"availability-zone":"z1"}}`, 1)
	mustRegister(t, ts.URL, "svc", body)
	_, got, _ := do(t, "GET", ts.URL+"/eureka/apps/svc/i-1", "", "", "Accept", "application/json")
	if !strings.Contains(got, `"instance-id":"i-1"`) || !strings.Contains(got, `"availability-zone":"z1"`) {
		t.Fatalf("amazon metadata: %s", got)
	}
}
