package httpapi

import (
	"math/rand/v2"
	"net/url"
	"testing"
)

// queryValue gives what url.ParseQuery(raw).Get(name) gives, for queries
// clients send and for random strings of the characters that matter to
// the parse (separators, escapes, the name's letters).
func TestQueryValue_AsParseQueryGets(t *testing.T) {
	raws := []string{
		"", "status=UP", "status=UP&lastDirtyTimestamp=1700000000000", "lastDirtyTimestamp=12&lastDirtyTimestamp=13",
		"lastDirtyTimestamp", "lastDirtyTimestamp=", "last%44irtyTimestamp=5", "lastDirtyTimestamp=1%32",
		"lastDirtyTimestamp=%zz&lastDirtyTimestamp=7", "a=1;lastDirtyTimestamp=2&lastDirtyTimestamp=3",
		"&&lastDirtyTimestamp=+4", "lastDirtyTimestamp=1=2",
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab=&;%+2F"
	for range 20000 {
		b := make([]byte, r.IntN(14))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		raws = append(raws, string(b))
	}
	for _, raw := range raws {
		for _, name := range []string{"lastDirtyTimestamp", "a", "b", "a+b", ""} {
			vs, _ := url.ParseQuery(raw)
			if got, want := queryValue(raw, name), vs.Get(name); got != want {
				t.Fatalf("queryValue(%q, %q) = %q, url.ParseQuery gives %q", raw, name, got, want)
			}
		}
	}
}

// A renewal's parameter is read without allocating.
func TestQueryValue_NoAllocation(t *testing.T) {
	raw := "status=UP&lastDirtyTimestamp=1700000000000"
	if n := testing.AllocsPerRun(100, func() { _ = queryValue(raw, "lastDirtyTimestamp") }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
