package bench

import "testing"

func TestHashCount(t *testing.T) {
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"applications":{"versions__delta":"1","apps__hashcode":"UP_5_DOWN_2_","application":[]}}`, 7},
		{`{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`, 0},
		{`{"applications":{"apps__hashcode":"UP_10000_"}}`, 10000},
		{`{"applications":{"apps__hashcode":"OUT_OF_SERVICE_7_UP_200_"}}`, 207},
	} {
		got, err := hashCount([]byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("hashCount(%s) = %d, %v; want %d", c.body, got, err, c.want)
		}
	}
	if _, err := hashCount([]byte(`{}`)); err == nil {
		t.Error("hashCount of a document without a hash code: no error")
	}
}

func TestPickRoles(t *testing.T) {
	for _, c := range []struct {
		followers []int
		n, wa, wb int
	}{
		{[]int{2, 0}, 3, 0, 2},
		{[]int{1}, 3, 2, 1},
		{[]int{2}, 3, 0, 2},
		{nil, 3, 0, 1},
		{nil, 1, 0, 0},
	} {
		if a, b := pickRoles(c.followers, c.n); a != c.wa || b != c.wb {
			t.Errorf("pickRoles(%v, %d) = A %d, B %d; want A %d, B %d", c.followers, c.n, a, b, c.wa, c.wb)
		}
	}
}
