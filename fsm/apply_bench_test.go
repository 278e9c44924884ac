package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyRegister measures the FSM's work per registration (decode,
// apply, delta, change notice) with 10,000 and 200,000 instances already
// held: whether it stays flat as the registry grows.
func BenchmarkApplyRegister(b *testing.B) {
	pad := strings.Repeat("x", 90)
	for _, held := range []int{10000, 200000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			f := New(0, nil)
			var idx uint64
			apply := func(i int) {
				app := fmt.Sprintf("APP-%03d", i%500)
				md := map[string]string{"version": "1.2.3", "zone": "zone-a", "tag": pad}
				in := &Instance{InstanceID: fmt.Sprintf("10.%d.%d.%d:%s:8080", i>>16&255, i>>8&255, i&255, app), HostName: "h",
					App: app, Status: StatusUp, Metadata: MetadataOf(md), VIPAddress: strings.ToLower(app), LastDirtyTimestamp: 1}
				e, err := Encode(CmdRegister, &RegisterBody{Instance: in})
				if err != nil {
					b.Fatal(err)
				}
				_ = Stamp(e, time.Now().UnixMilli())
				idx++
				if res := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: e}); res != nil {
					b.Fatal(res)
				}
			}
			for i := 0; i < held; i++ {
				apply(i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				apply(held + i)
			}
		})
	}
}
