package manifest

import (
	"encoding/json"
	"testing"
	"time"
)

func TestCacheForms(t *testing.T) {
	for src, want := range map[string]Cache{
		`true`:          {On: true},
		`false`:         {},
		`{"ttl":"24h"}`: {On: true, TTL: Duration(24 * time.Hour)},
		`{}`:            {On: true},
	} {
		var c Cache
		if err := json.Unmarshal([]byte(src), &c); err != nil || c != want {
			t.Errorf("%s: %+v %v", src, c, err)
		}
		back, _ := json.Marshal(c)
		var again Cache
		if err := json.Unmarshal(back, &again); err != nil || again != c {
			t.Errorf("%s: written back as %s", src, back)
		}
	}
	var c Cache
	if err := json.Unmarshal([]byte(`"yes"`), &c); err == nil {
		t.Error("a string was taken as a cache setting")
	}
}
