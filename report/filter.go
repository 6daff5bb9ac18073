package report

import "regexp"

// Focus returns a copy of r with only the objects whose type, allocation
// site or holder chain matches re, and the data types whose name
// ("java.util.TreeMap$Entry.left") matches it. The remainder (samples in no tracked object) names no
// object and is left out; the statistics and notes stay those of the run, so
// shares remain shares of all attributed samples.
func Focus(r *Report, re *regexp.Regexp) *Report {
	c := *r
	c.Objects = nil
	for _, o := range r.Objects {
		if re.MatchString(o.Type) || re.MatchString(o.Site) || re.MatchString(HolderText(o.Holder, 0)) {
			c.Objects = append(c.Objects, o)
		}
	}
	c.DataTypes = nil
	for _, d := range r.DataTypes {
		if re.MatchString(d.Name()) {
			c.DataTypes = append(c.DataTypes, d)
		}
	}
	c.Remainder = nil
	return &c
}
