package bench

import (
	"testing"
	"time"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentile_NearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 of 1..100", hundred, 100, 100 * time.Millisecond},
		{"p0 is the minimum", hundred, 0, time.Millisecond},
		{"p50 of four rounds up", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of four is the max", ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{"p1 of 1..100", hundred, 1, time.Millisecond},
		{"over 100 clamps", ms(1, 2), 150, 2 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.sorted, c.p); got != c.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
			}
		})
	}
}

func TestSummarize_SortsAndSummarises(t *testing.T) {
	d := ms(5, 1, 4, 2, 3)
	l := Summarize(d)
	if got, want := l, (Latencies{N: 5, P50: 3 * time.Millisecond, P99: 5 * time.Millisecond, Max: 5 * time.Millisecond}); got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	for i := 1; i < len(d); i++ {
		if d[i] < d[i-1] {
			t.Fatalf("not sorted in place: %v", d)
		}
	}
	if got := Summarize(nil); got != (Latencies{}) {
		t.Fatalf("Summarize(nil) = %+v, want zero", got)
	}
}
