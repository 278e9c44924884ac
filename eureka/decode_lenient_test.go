package eureka

import (
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// TestDecodeLikeEurekaServer covers register bodies eureka-server accepts
// although they are odd: its codecs read an unknown status as UNKNOWN and a
// non-numeric JSON number as 0, so heureka must register them too, the same
// way.
func TestDecodeLikeEurekaServer(t *testing.T) {
	cases := []decodeCase{
		{"lower-case status", JSON, `{"status":"up"}`, func(in *fsm.Instance) bool { return in.Status == fsm.StatusUnknown }},
		{"bogus status", JSON, `{"status":"bogus"}`, func(in *fsm.Instance) bool { return in.Status == fsm.StatusUnknown }},
		{"status number", JSON, `{"status":1}`, func(in *fsm.Instance) bool { return in.Status == fsm.StatusUnknown }},
		{"bogus overriddenStatus", JSON, `{"overriddenStatus":"NONE"}`,
			func(in *fsm.Instance) bool { return in.OverriddenStatus == fsm.StatusUnknown }},
		{"xml lower-case status", XML, `<instance><status>down</status></instance>`,
			func(in *fsm.Instance) bool { return in.Status == fsm.StatusDown }},
		{"xml bogus status", XML, `<instance><status>RUNNING</status><overriddenstatus>NONE</overriddenstatus></instance>`,
			func(in *fsm.Instance) bool {
				return in.Status == fsm.StatusUnknown && in.OverriddenStatus == fsm.StatusUnknown
			}},
		{"port abc", JSON, `{"port":{"$":"abc","@enabled":"true"}}`, func(in *fsm.Instance) bool { return in.Port == 0 && in.PortEnabled }},
		{"bare port abc", JSON, `{"port":"abc"}`, func(in *fsm.Instance) bool { return in.Port == 0 }},
		{"port fraction", JSON, `{"port":{"$":80.5}}`, func(in *fsm.Instance) bool { return in.Port == 80 }},
		{"port true", JSON, `{"port":{"$":true}}`, func(in *fsm.Instance) bool { return in.Port == 1 }},
		{"countryId string", JSON, `{"countryId":"one"}`, func(in *fsm.Instance) bool { return in.CountryID == 0 }},
		{"lastDirtyTimestamp string", JSON, `{"lastDirtyTimestamp":"yesterday"}`,
			func(in *fsm.Instance) bool { return in.LastDirtyTimestamp == now }},
		{"lease values", JSON, `{"leaseInfo":{"durationInSecs":"ninety","renewalIntervalInSecs":"x"}}`,
			func(in *fsm.Instance) bool { return in.DurationSecs == 0 && in.RenewalIntervalSecs == 0 }},
		{"xml lease values", XML, `<instance><leaseInfo><durationInSecs>ninety</durationInSecs></leaseInfo></instance>`,
			func(in *fsm.Instance) bool { return in.DurationSecs == 0 }},
		{"xml lastDirtyTimestamp", XML, `<instance><lastDirtyTimestamp>x</lastDirtyTimestamp></instance>`,
			func(in *fsm.Instance) bool { return in.LastDirtyTimestamp == now }},
		{"xml amazon any case", XML, `<instance><dataCenterInfo><name>amazon</name><metadata><instance-id>i-1</instance-id></metadata></dataCenterInfo></instance>`,
			func(in *fsm.Instance) bool {
				return in.DataCenterInfo.Name == "Amazon" && in.DataCenterInfo.Metadata.Map()["instance-id"] == "i-1"
			}},
		{"every enum name", JSON, `{"dataCenterInfo":{"name":"Netflix"}}`,
			func(in *fsm.Instance) bool { return in.DataCenterInfo.Name == "Netflix" }},
	}
	runDecodeCases(t, cases)
}

// decodeCase is a register body that must decode, and a check of the result.
type decodeCase struct {
	name   string
	format Format
	body   string
	check  func(in *fsm.Instance) bool
}

func runDecodeCases(t *testing.T, cases []decodeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := DecodeInstance([]byte(c.body), c.format, now)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(in) {
				t.Errorf("unexpected result: %+v", *in)
			}
		})
	}
}

// TestDecodeDocumentsStayStrict: documents (not register bodies) are read
// as written, so a registry holding an odd name still decodes.
func TestDecodeDocumentsStayStrict(t *testing.T) {
	e, err := DecodeEntry([]byte(`{"instance":{"hostName":"h","app":"a","dataCenterInfo":{"name":"myown"}}}`), JSON)
	if err != nil {
		t.Fatal(err)
	}
	if e.Instance.DataCenterInfo.Name != "myown" {
		t.Errorf("name %q", e.Instance.DataCenterInfo.Name)
	}
}
