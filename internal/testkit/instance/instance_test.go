package instance

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestAppIDsReadsWhatDocWrites(t *testing.T) {
	var instances []map[string]any
	for _, id := range []string{"b-1", "a-2"} {
		instances = append(instances, Doc(Fields{ID: id, App: "APP", Host: id, IP: "10.0.0.1", Status: "UP"}))
	}
	body, err := json.Marshal(map[string]any{"application": map[string]any{"name": "APP", "instance": instances}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := AppIDs(body)
	if err != nil || !slices.Equal(ids, []string{"b-1", "a-2"}) {
		t.Fatalf("AppIDs = %v, %v; want [b-1 a-2] in document order", ids, err)
	}
	if ids, err := AppIDs([]byte(`{"application":{"name":"APP","instance":[]}}`)); err != nil || ids == nil || len(ids) != 0 {
		t.Fatalf("empty application: %v, %v; want an empty list", ids, err)
	}
	if _, err := AppIDs([]byte(`{"application":`)); err == nil {
		t.Fatal("a truncated document decoded")
	}
}
