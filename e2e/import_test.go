package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// importSourceDoc is an eureka-server's GET /eureka/apps: an instance out
// of service with its lastDirtyTimestamp, and one whose instanceId is null
// and which names no host, which heureka refuses to record.
const importSourceDoc = `{"applications":{"versions__delta":"1","apps__hashcode":"UP_1_","application":[
{"name":"GOOD","instance":[{"instanceId":"g-1","hostName":"g-1.local","app":"GOOD","ipAddr":"10.0.0.1",
 "status":"OUT_OF_SERVICE","overriddenStatus":"OUT_OF_SERVICE","port":{"$":8080,"@enabled":"true"},
 "dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
 "lastDirtyTimestamp":"1234567"}]},
{"name":"NULLID","instance":[{"instanceId":null,"hostName":"","app":"NULLID","ipAddr":"10.0.0.2",
 "status":"UP","port":{"$":8080,"@enabled":"true"},
 "dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
 "lastDirtyTimestamp":"1234567"}]}]}}`

// TestImportCountsWhatWasRecorded runs heureka import from an
// eureka-server's registry into a real node: the instance the node refuses
// is named and counted as failed (exit 1), the other is recorded with its
// status and lastDirtyTimestamp, and the summary says so.
func TestImportCountsWhatWasRecorded(t *testing.T) {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(importSourceDoc))
	}))
	defer src.Close()
	c := StartCluster(t, 1, Options{})
	c.WaitLeader(t, 15*time.Second)
	nd := c.Nodes[0]

	res := RunBinary(t, time.Minute, nil, "import", "--from", src.URL+"/eureka/", "--to", nd.URL("/eureka/"))
	if res.ExitCode != 1 || res.Stdout != "instances 2 registered 1 failed 1\n" || !strings.Contains(res.Stderr, "NULLID/") ||
		!strings.Contains(res.Stderr, "400") {
		t.Fatalf("heureka import: exit %d, stdout %q, stderr %q; want 1, one registered, NULLID refused with 400", res.ExitCode, res.Stdout, res.Stderr)
	}
	var got AppInstance
	if !Eventually(10*time.Second, func() bool {
		apps, err := TryGetApps(nd.BaseURL())
		if err != nil || len(apps.Instances) != 1 {
			return false
		}
		got = apps.Instances[0]
		return true
	}) {
		t.Fatalf("the node does not list exactly the one imported instance: %+v", GetApps(t, nd.BaseURL()))
	}
	if got.Key() != "GOOD/g-1" || got.Status != "OUT_OF_SERVICE" || got.LastDirtyTimestamp != "1234567" {
		t.Fatalf("imported %s as %s/%s, want GOOD/g-1 as OUT_OF_SERVICE/1234567", got.Key(), got.Status, got.LastDirtyTimestamp)
	}

	// Importing again is safe and registers the same instance again.
	res = RunBinary(t, time.Minute, nil, "import", "--from", src.URL+"/eureka/", "--to", nd.URL("/eureka/"))
	if res.ExitCode != 1 || res.Stdout != "instances 2 registered 1 failed 1\n" {
		t.Fatalf("second import: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}
