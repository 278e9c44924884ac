package bench

import (
	"bytes"
	"compress/gzip"
	"reflect"
	"sort"
	"testing"
)

func TestAppInstances_OneOrMany(t *testing.T) {
	many := `{"application":{"name":"A","instance":[{"instanceId":"a-1","status":"UP"},{"hostName":"h2","status":"OUT_OF_SERVICE"}]}}`
	one := `{"application":{"name":"A","instance":{"instanceId":"a-1","status":"DOWN"}}}`
	got, err := appInstances([]byte(many))
	if err != nil || !reflect.DeepEqual(got, map[string]string{"a-1": "UP", "h2": "OUT_OF_SERVICE"}) {
		t.Fatalf("many: %v %v", got, err)
	}
	got, err = appInstances([]byte(one))
	if err != nil || !reflect.DeepEqual(got, map[string]string{"a-1": "DOWN"}) {
		t.Fatalf("one: %v %v", got, err)
	}
}

func TestAppsInstances_GzipAndShapes(t *testing.T) {
	doc := `{"applications":{"versions__delta":"1","application":[
		{"name":"A","instance":[{"instanceId":"a-1"},{"instanceId":"a-2"}]},
		{"name":"B","instance":{"instanceId":"b-1"}}]}}`
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte(doc))
	zw.Close()
	for name, c := range map[string]struct {
		body []byte
		gz   bool
	}{"plain": {[]byte(doc), false}, "gzip": {zb.Bytes(), true}} {
		ids, err := appsInstances(c.body, c.gz)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sort.Strings(ids)
		if !reflect.DeepEqual(ids, []string{"a-1", "a-2", "b-1"}) {
			t.Fatalf("%s: %v", name, ids)
		}
	}
	ids, err := appsInstances([]byte(`{"applications":{"versions__delta":"1","application":[]}}`), false)
	if err != nil || len(ids) != 0 {
		t.Fatalf("empty: %v %v", ids, err)
	}
}
