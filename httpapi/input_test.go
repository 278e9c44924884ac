package httpapi

import (
	"strings"
	"testing"
)

// metadataOf is the stored metadata of app/id (nil when not registered).
func metadataOf(fc *fakeCluster, app, id string) map[string]string {
	if e := getEntry(fc, app, id); e != nil {
		return e.Instance.Metadata.Map()
	}
	return nil
}

// TestMetadata_UnparsableQueryIsRefused: a metadata update whose query
// does not parse is a 400 with the parser's message and records nothing,
// not a 200 that kept whichever pairs could be read.
func TestMetadata_UnparsableQueryIsRefused(t *testing.T) {
	ts, fc := newTestServer(t)
	base := ts.URL + "/eureka/apps/SVC/i-1/metadata"
	register(t, ts.URL, "SVC", "i-1")
	before := fc.applied
	for query, want := range map[string]string{
		"a=1;b=2":    "semicolon",
		"c=%zz&d=ok": "invalid URL escape",
	} {
		code, body, _ := do(t, "PUT", base+"?"+query, "", "")
		if code != 400 || !strings.Contains(body, want) {
			t.Errorf("PUT metadata?%s: %d %s, want 400 mentioning %q", query, code, body, want)
		}
	}
	if md := metadataOf(fc, "SVC", "i-1"); fc.applied != before || len(md) != 1 {
		t.Fatalf("refused updates recorded: %d writes, metadata %v", fc.applied-before, md)
	}
	if code, body, _ := do(t, "PUT", base+"?d=ok&e=%41", "", ""); code != 200 || metadataOf(fc, "SVC", "i-1")["e"] != "A" {
		t.Fatalf("good update: %d %s", code, body)
	}
}
