package errdefs

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/hutchdev/hutch/internal/openapitest"
)

// tableRow is a row of the ErrorCode table in api/openapi.yaml: | `CODE` | status | class |.
var tableRow = regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| ([0-9]{3}) \\|")

// TestCodesMatchOpenAPI holds the codes to api/openapi.yaml's ErrorCode, both ways: its enum
// lists exactly the codes of this package, and its table gives each its HTTP status.
func TestCodesMatchOpenAPI(t *testing.T) {
	doc, err := openapitest.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("openapi.yaml has no ErrorCode schema")
	}
	var enum []string
	for _, alt := range ref.Value.AnyOf {
		for _, v := range alt.Value.Enum {
			if s, ok := v.(string); ok {
				enum = append(enum, s)
			}
		}
	}
	var ours []string
	for c := range codes {
		ours = append(ours, string(c))
	}
	for _, c := range ours {
		if !slices.Contains(enum, c) {
			t.Errorf("code %s is not in openapi.yaml's ErrorCode enum", c)
		}
	}
	for _, c := range enum {
		if !Code(c).Known() {
			t.Errorf("openapi.yaml's ErrorCode enum has %s; errdefs has no such code", c)
		}
	}
	table := map[string]int{}
	for _, m := range tableRow.FindAllStringSubmatch(ref.Value.Description, -1) {
		status, _ := strconv.Atoi(m[2])
		table[m[1]] = status
	}
	for c, info := range codes {
		status, ok := table[string(c)]
		switch {
		case !ok:
			t.Errorf("code %s is not in openapi.yaml's ErrorCode table", c)
		case status != info.status:
			t.Errorf("code %s: status %d in openapi.yaml's table, %d in errdefs", c, status, info.status)
		}
	}
	for c := range table {
		if !Code(c).Known() {
			t.Errorf("openapi.yaml's ErrorCode table has %s; errdefs has no such code", c)
		}
	}
}
