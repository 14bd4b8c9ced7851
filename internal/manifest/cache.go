package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Cache is a cache setting (docs/cache.md): `true` (on, for the default
// time), `false` (off), or `{ttl: 24h}` (on, a hit no older than that).
type Cache struct {
	On  bool
	TTL Duration
}

// UnmarshalJSON reads true, false or {ttl: D}.
func (c *Cache) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		if err := json.Unmarshal(b, &c.On); err != nil {
			return fmt.Errorf("cache must be true, false or {ttl: DURATION}")
		}
		return nil
	}
	var v struct {
		TTL Duration `json:"ttl"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c.On, c.TTL = true, v.TTL
	return nil
}

// MarshalJSON writes the setting back in the form it was given.
func (c Cache) MarshalJSON() ([]byte, error) {
	if !c.On || c.TTL == 0 {
		return json.Marshal(c.On)
	}
	return json.Marshal(map[string]Duration{"ttl": c.TTL})
}
