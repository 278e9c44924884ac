package limits

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

func TestCheckName(t *testing.T) {
	good := []string{"svc", "SVC-1.internal:8080", "i-0abc", "host.example.com:svc:8080", "ünïcode", strings.Repeat("a", 256)}
	bad := []string{"", ".", "..", "a/b", `a\b`, "EVIL/../X", "a\x00b", "a\nb", "tab\there", "del\x7f", strings.Repeat("a", 257), "bad-\xff"}
	for _, s := range good {
		if err := CheckName("app name", s); err != nil {
			t.Errorf("CheckName(%q): %v", s, err)
		}
	}
	for _, s := range bad {
		err := CheckName("app name", s)
		if err == nil {
			t.Errorf("CheckName(%q) accepted", s)
			continue
		}
		if !errors.Is(err, fsm.ErrBadCommand) {
			t.Errorf("CheckName(%q): %v is not a bad command", s, err)
		}
	}
}

// TestCheckCommand decodes what a peer could send and checks it as the
// leader does.
func TestCheckCommand(t *testing.T) {
	in := func(app, id string) *fsm.Instance {
		return &fsm.Instance{InstanceID: id, HostName: "h", App: app, IPAddr: "10.0.0.1", Status: "UP",
			DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}}
	}
	cases := []struct {
		name string
		t    fsm.CmdType
		body any
		ok   bool
	}{
		{"register", fsm.CmdRegister, &fsm.RegisterBody{Instance: in("SVC", "i-1")}, true},
		{"register path trick", fsm.CmdRegister, &fsm.RegisterBody{Instance: in("EVIL/../X", "i-1")}, false},
		{"register id control", fsm.CmdRegister, &fsm.RegisterBody{Instance: in("SVC", "i\x01")}, false},
		{"cancel", fsm.CmdCancel, &fsm.KeyBody{App: "SVC", ID: "i-1"}, true},
		{"cancel dotdot", fsm.CmdCancel, &fsm.KeyBody{App: "..", ID: "i-1"}, false},
		{"override slash", fsm.CmdSetOverride, &fsm.OverrideBody{App: "SVC", ID: "a/b", Status: "UP"}, false},
		{"metadata", fsm.CmdMetadata, &fsm.MetadataBody{App: "SVC", ID: "i-1", Metadata: map[string]string{"k": "v"}, MaxEntries: MaxMetadataEntries}, true},
		{"metadata without limit", fsm.CmdMetadata, &fsm.MetadataBody{App: "SVC", ID: "i-1", Metadata: map[string]string{"k": "v"}}, false},
		{"metadata value too long", fsm.CmdMetadata, &fsm.MetadataBody{App: "SVC", ID: "i-1", Metadata: map[string]string{"k": strings.Repeat("v", MaxMetadataValueBytes+1)}, MaxEntries: MaxMetadataEntries}, false},
		{"mode", fsm.CmdSetMode, &fsm.ModeBody{Mode: "cp"}, true},
	}
	for _, c := range cases {
		entry, err := fsm.Encode(c.t, c.body)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := fsm.Decode(entry)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckCommand(cmd)
		if (err == nil) != c.ok {
			t.Errorf("%s: CheckCommand = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// A metadata key is refused for the control characters a name is refused
// for, C1 (NEL, which log readers take for a line break) included.
func TestCheckMetadata_C1ControlInAKey(t *testing.T) {
	md := map[string]string{"a\u0085b": "v"}
	if err := CheckMetadata(len(md), maps.All(md)); err == nil {
		t.Fatal(`CheckMetadata accepted key "a\u0085b" (C1 control NEL)`)
	}
}
