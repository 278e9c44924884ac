package eureka

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// TestRoundTripEntry checks DecodeEntry(AppendInstanceDoc(e)) == e, up to the
// normalisations of doc.go (applied by wireEntry).
func TestRoundTripEntry(t *testing.T) {
	sparse := orderA()
	in := sparse.Instance
	in.InstanceID, in.Sid, in.OverriddenStatus, in.Metadata = "", "unknown", "", fsm.MetadataOf(map[string]string{})
	in.RenewalIntervalSecs, in.DurationSecs, in.SecureVIPAddress, in.VIPAddress = 0, -3, "", ""
	in.DataCenterInfo = fsm.DataCenterInfo{Class: "com.netflix.appinfo.MyDataCenterInfo", Name: "MyOwn", Metadata: fsm.MetadataOf(map[string]string{"x": "y"})}
	sparse.ActionType, sparse.ID, sparse.ModifyIndex = "", "10.20.1.15", 7

	noDC := orderA()
	noDC.Instance.DataCenterInfo = fsm.DataCenterInfo{}

	controls := orderA()
	controls.Instance.HostName = "ctl\x00\x1f\x7f\uFFFE bad\xff"
	controls.Instance.Metadata = fsm.MetadataOf(map[string]string{"9starts-with-digit": "v", "k": "\x01", "": "empty key", "a:b": "colon"})

	entries := map[string]*fsm.Entry{
		"orderA": orderA(), "orderB": orderB(), "payments": payments(), "deleted": paymentsDeleted(),
		"odd": oddEntry(), "sparse": sparse, "noDataCenter": noDC, "controls": controls,
	}
	for name, e := range entries {
		for _, f := range formats {
			t.Run(name+"."+f.String(), func(t *testing.T) {
				doc := AppendInstanceDoc(nil, f, e)
				got, err := DecodeEntry(doc, f)
				if err != nil {
					t.Fatalf("%v\n%s", err, doc)
				}
				if want := wireEntry(e, f); !reflect.DeepEqual(got, want) {
					t.Errorf("round trip differs\n got: %s\nwant: %s\n doc: %s", show(got), show(want), doc)
				}
			})
		}
	}
}

func show(e *fsm.Entry) string {
	return fmt.Sprintf("%+v %+v", *e, *e.Instance)
}
