package audit

import (
	"reflect"
	"testing"
)

// The one-pass reader of a create event's detail agrees with encoding/json
// on every detail it reads, and declines (so that encoding/json decides)
// text with white space, escapes in node_id, or numbers that are not
// integers.
func TestParseCreateDetailAgreesWithJSON(t *testing.T) {
	for detail, fast := range map[string]bool{
		`{"depends_on":[],"max_attempts":3,"node_id":"a","state":"pending"}`:                                                             true,
		`{"depends_on":["a","b"],"max_attempts":1,"node_id":"c","priority":-100,"requires":["cuda","gpu"],"state":"blocked"}`:            true,
		`{"depends_on":null,"due_at_ms":1780000000000,"max_attempts":5,"node_id":"n.1","retry_delay_ms":0,"state":"pending"}`:            true,
		`{"depends_on":["x"],"extra":{"nested":[1,{"k":true}]},"node_id":"x2","state":"pending"}`:                                        true,
		`{"depends_on":[],"gate_timeout_ms":60000,"kind":"gate","max_attempts":3,"node_id":"g","on_timeout":"reject","state":"blocked"}`: true,
		`{"node_id":"a"}`:                       true,
		`{}`:                                    true,
		`{"node_id":"a\"b"}`:                    false, // an escape: encoding/json reads it
		`{"node_id":"a", "priority":1}`:         false, // white space: not canonical
		`{"max_attempts":1.5,"node_id":"a"}`:    false,
		`{"node_id":"a","depends_on":[]}`:       true, // keys out of order: read alike
		`{"node_id":"a","node_id":"b"}`:         true, // a duplicate: the last wins, as in encoding/json
		`{"max_attempts":3,"node_id":"a"} `:     false,
		`{"depends_on":["a"],"node_id":"b"}x`:   false,
		`{"depends_on":["a"],"node_id":"b","x"`: false,
	} {
		d, ok := parseCreateDetailCanonical(detail)
		if ok != fast {
			t.Errorf("%s: read in one pass %v, want %v", detail, ok, fast)
			continue
		}
		if !ok {
			continue
		}
		want, err := parseCreateDetailJSON(detail)
		if err != nil || !reflect.DeepEqual(d, want) {
			t.Errorf("%s: one pass %+v, encoding/json %+v (%v)", detail, d, want, err)
		}
	}
	// What neither reads is an error, not a task.
	if _, err := parseCreateDetail(`["not","an","object"]`); err == nil {
		t.Error("a detail that is not an object was read")
	}
}
