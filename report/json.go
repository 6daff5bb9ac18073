package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report with at most top objects and top data types
// (0: all).
func WriteJSON(w io.Writer, r *Report, top int) error {
	c := *r
	c.Objects = r.top(top)
	if top > 0 && len(c.DataTypes) > top {
		c.DataTypes = c.DataTypes[:top]
	}
	if c.Objects == nil {
		c.Objects = []Object{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&c); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}
