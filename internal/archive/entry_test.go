package archive

import "testing"

// Both extractors refuse what checkName refuses; a layer also wants its names in clean form,
// while a tree archive's names are cleaned.
func TestEntryNames(t *testing.T) {
	cases := []struct {
		name  string
		tree  string // Extract's clean name; "" refused
		layer string // ExtractLayer's; "" refused
	}{
		{"a", "a", "a"},
		{"a/b", "a/b", "a/b"},
		{"dir/", "dir", "dir"},
		{"./a", "a", ""},
		{"a/./b", "a/b", ""},
		{"a//b", "a/b", ""},
		{"a//", "a", ""},
		{"x/.", "x", ""},
		{".", ".", ""},
		{"./", ".", ""},
		{"", "", ""},
		{"/", "", ""},
		{"/etc/passwd", "", ""},
		{"..", "", ""},
		{"../a", "", ""},
		{"a/../b", "", ""},
		{"a/..", "", ""},
		{"a\x00b", "", ""},
	}
	for _, c := range cases {
		clean, why := checkName(c.name)
		if (why == "") != (c.tree != "") || clean != c.tree {
			t.Errorf("checkName(%q) = %q, %q; want %q", c.name, clean, why, c.tree)
		}
		got, err := layerEntryName(c.name)
		if (err == nil) != (c.layer != "") || got != c.layer {
			t.Errorf("layerEntryName(%q) = %q, %v; want %q", c.name, got, err, c.layer)
		}
	}
}
