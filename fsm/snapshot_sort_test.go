package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// oneSort is the order sortByAppAndID must give: one sort of the whole
// list by application, then id.
func oneSort(es []*Entry) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.App != b.App {
			return a.App < b.App
		}
		return a.ID < b.ID
	})
}

// randomEntries are n entries over apps applications of uneven sizes, with
// names that are prefixes of each other and ids shared between
// applications, in random order.
func randomEntries(rng *rand.Rand, n, apps int) []*Entry {
	es := make([]*Entry, 0, n)
	seen := map[[2]string]bool{}
	for len(es) < n {
		a := rng.IntN(apps)
		app := fmt.Sprintf("APP-%03d", a)[:4+rng.IntN(4)]
		id := fmt.Sprintf("10.0.%d.%d:%s:80", rng.IntN(4), rng.IntN(64), app)
		id = id[:min(len(id), 6+rng.IntN(12))]
		if seen[[2]string{app, id}] {
			continue
		}
		seen[[2]string{app, id}] = true
		es = append(es, &Entry{App: app, ID: id})
	}
	rng.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
	return es
}

func TestSortByAppAndID_TheOrderOfOneSort(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := rng.IntN(300)
		got := randomEntries(rng, n, 1+rng.IntN(40))
		if seed%2 == 0 {
			// As export lists them: each application's entries together.
			rank := map[string]int{}
			for _, e := range got {
				if _, ok := rank[e.App]; !ok {
					rank[e.App] = rng.IntN(1000)
				}
			}
			slices.SortStableFunc(got, func(a, b *Entry) int { return rank[a.App] - rank[b.App] })
		}
		want := slices.Clone(got)
		oneSort(want)
		sortByAppAndID(got)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("seed %d: entry %d is %s/%s, want %s/%s", seed, i, got[i].App, got[i].ID, want[i].App, want[i].ID)
			}
		}
	}
	sortByAppAndID(nil) // an empty registry
}

// BenchmarkSortEntries sorts a snapshot's entries as export lists them
// (each application's together, the applications in map order): 200,000
// instances in applications of 20, by one sort of the whole list and by
// sortByAppAndID.
func BenchmarkSortEntries(b *testing.B) {
	const n, perApp = 200000, 20
	apps := map[string][]*Entry{}
	for i := range n {
		app := fmt.Sprintf("BENCH-%05d", i%(n/perApp))
		apps[app] = append(apps[app], &Entry{App: app, ID: fmt.Sprintf("10.%d.%d.%d:%s:8080", i>>16&255, i>>8&255, i&255, app)})
	}
	var listed []*Entry
	for _, es := range apps {
		listed = append(listed, es...)
	}
	for _, bc := range []struct {
		name string
		sort func([]*Entry)
	}{{"OneSort", oneSort}, {"ByAppAndID", sortByAppAndID}} {
		b.Run(bc.name, func(b *testing.B) {
			es := make([]*Entry, len(listed))
			for b.Loop() {
				copy(es, listed)
				bc.sort(es)
			}
		})
	}
}
