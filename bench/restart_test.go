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
