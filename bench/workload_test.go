package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWorkload_NamesAreDistinctAndStable(t *testing.T) {
	w := DefaultWorkload()
	w.Instances = 50000
	ids := map[string]bool{}
	apps := map[string]int{}
	for i := 0; i < w.Instances; i++ {
		id := w.ID(i)
		if ids[id] {
			t.Fatalf("instance %d: id %q used twice", i, id)
		}
		ids[id] = true
		apps[w.App(i)]++
	}
	if len(apps) != w.Apps {
		t.Fatalf("%d apps, want %d", len(apps), w.Apps)
	}
	for app, n := range apps {
		if n != w.Instances/w.Apps {
			t.Fatalf("app %s has %d instances, want %d", app, n, w.Instances/w.Apps)
		}
	}
	if got, want := w.AppName(7), "BENCH-007"; got != want {
		t.Fatalf("AppName(7) = %q, want %q", got, want)
	}
	if got, want := w.ID(257), "10.0.1.1:bench-257:8080"; got != want {
		t.Fatalf("ID(257) = %q, want %q", got, want)
	}
	w.Apps = 5000
	if got, want := w.AppName(7), "BENCH-0007"; got != want {
		t.Fatalf("AppName(7) with 5000 apps = %q, want %q", got, want)
	}
}

func TestMetadata_SizeAndDeterminism(t *testing.T) {
	for _, size := range []int{256, 1024, 4096} {
		for _, i := range []int{0, 1, 9999, 49999} {
			md := Metadata(i, size)
			b, err := json.Marshal(md)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > size || len(b) < size-16 {
				t.Fatalf("Metadata(%d, %d) encodes to %d bytes, want within 16 below %d", i, size, len(b), size)
			}
			again, _ := json.Marshal(Metadata(i, size))
			if string(again) != string(b) {
				t.Fatalf("Metadata(%d, %d) differs between calls", i, size)
			}
		}
	}
	a, _ := json.Marshal(Metadata(1, 1024))
	b, _ := json.Marshal(Metadata(2, 1024))
	if string(a) == string(b) {
		t.Fatal("two instances got the same metadata")
	}
	if len(Metadata(3, 0)) != 0 {
		t.Fatal("size 0 should give no metadata")
	}
}

func TestRegisterBody_IsAEurekaInstance(t *testing.T) {
	w := DefaultWorkload()
	sp := w.Spec(42)
	sp.DirtyMillis = 1700000000000
	body := RegisterBody(sp)
	var doc struct {
		Instance struct {
			InstanceID string            `json:"instanceId"`
			App        string            `json:"app"`
			Status     string            `json:"status"`
			Metadata   map[string]string `json:"metadata"`
			LeaseInfo  struct {
				Renewal  int `json:"renewalIntervalInSecs"`
				Duration int `json:"durationInSecs"`
			} `json:"leaseInfo"`
			LastDirty string `json:"lastDirtyTimestamp"`
		} `json:"instance"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("register body is not JSON: %v", err)
	}
	in := doc.Instance
	if in.InstanceID != w.ID(42) || in.App != "BENCH-042" || in.Status != "UP" || in.LastDirty != "1700000000000" {
		t.Fatalf("unexpected instance: %+v", in)
	}
	if in.LeaseInfo.Duration != w.LeaseSecs || in.LeaseInfo.Renewal != w.RenewalSecs {
		t.Fatalf("lease %+v, want %d/%d", in.LeaseInfo, w.RenewalSecs, w.LeaseSecs)
	}
	if len(in.Metadata) < 5 || in.Metadata["management.port"] != "8081" {
		t.Fatalf("metadata %v", in.Metadata)
	}
	if n := len(body); n < 1400 || n > 2200 {
		t.Fatalf("register body is %d bytes; the workload promises about 1 KB of metadata plus the instance", n)
	}
	if !strings.HasPrefix(string(body), `{"instance":`) || string(body[len(`{"instance":`):len(body)-1]) != string(InstanceJSON(sp)) {
		t.Fatal("RegisterBody is not InstanceJSON wrapped in {\"instance\": ...}")
	}
}

func TestWorkload_Validate(t *testing.T) {
	ok := DefaultWorkload()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default workload: %v", err)
	}
	for name, mut := range map[string]func(*Workload){
		"no instances":     func(w *Workload) { w.Instances = 0 },
		"more apps":        func(w *Workload) { w.Apps = w.Instances + 1 },
		"huge metadata":    func(w *Workload) { w.MetadataBytes = 1 << 20 },
		"zero lease":       func(w *Workload) { w.LeaseSecs = 0 },
		"too many to name": func(w *Workload) { w.Instances = 1 << 22 },
	} {
		w := DefaultWorkload()
		mut(&w)
		if w.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, w)
		}
	}
}

func TestEtcdKeys(t *testing.T) {
	if got, want := EtcdKey("BENCH-001", "10.0.0.1:bench-001:8080"), "/registry/BENCH-001/10.0.0.1:bench-001:8080"; got != want {
		t.Fatalf("EtcdKey = %q, want %q", got, want)
	}
	cases := map[string]string{"/registry/": "/registry0", "/registry/BENCH-001/": "/registry/BENCH-0010", "a\xff": "b", "\xff\xff": "\x00"}
	for in, want := range cases {
		if got := PrefixEnd(in); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
	// An app's prefix must not cover another app whose name extends it.
	p := EtcdAppPrefix("BENCH-01")
	if k := EtcdKey("BENCH-010", "x"); k >= p && k < PrefixEnd(p) {
		t.Fatalf("%q falls inside the range of %q", k, p)
	}
}
