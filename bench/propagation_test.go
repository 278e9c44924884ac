package bench

import (
	"context"
	"net/http"
	"testing"

	"github.com/heureka-registry/heureka/e2e"
)

// TestPropagationRows_LeaveNothingBehind runs the three W6 rows against a
// local 3-node cluster. Each ends by cutting its writers' cycles off; what
// a cut-off cycle registered must be cancelled before the next row, on A
// and on B, or the next row follows an application larger than the
// workload says (the blocking read's documents grew by a dozen instances
// that way, and its delay with them).
func TestPropagationRows_LeaveNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx := context.Background()
	l, err := StartHeureka(ctx, e2e.Binary(t), 3, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	s := &Suite{NoLimit: true, Samples: 60}
	s.Defaults()
	r := &heurekaRun{s: s, t: &HeurekaTarget{URLs: l.URLs, PIDs: l.PIDs()}, sys: &System{},
		lim: &System{NotRun: "off"}, client: NewClient(16)}
	r.roles(ctx)
	rows := []struct {
		id  string
		run func(context.Context)
	}{
		{RowPropagation, func(ctx context.Context) { r.propagation(ctx, RowPropagation) }},
		{RowPropClient, func(ctx context.Context) { r.propagation(ctx, RowPropClient) }},
		{RowPropBlock, r.propagationBlocking},
	}
	for _, row := range rows {
		row.run(ctx)
		m := r.sys.Rows[row.id]
		if m.Count == 0 || m.Errors > 0 {
			t.Fatalf("%s: %d samples, %d errors (%s)", row.id, m.Count, m.Errors, m.FirstError)
		}
		for _, node := range []int{r.a, r.b} {
			code, body, _, err := r.send(ctx, http.MethodGet, r.url(node, "/eureka/apps/"+PropApp), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if code == http.StatusNotFound {
				continue
			}
			ids, err := appInstances(body)
			if code != http.StatusOK || err != nil || len(ids) > 0 {
				t.Errorf("after %s, node %d holds %d, %v: instances %v", row.id, node, code, err, ids)
			}
		}
	}
}
