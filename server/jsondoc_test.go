package server

import (
	"github.com/headroom-llm/headroom/report"
	"reflect"
	"testing"

	"github.com/headroom-llm/headroom/internal/jsondoc"
)

// TestJSONDoc holds docs/json.md's sections for the API's own answers to
// their Go types: exactly the fields the tables list, of the types they
// say. cli's TestJSONDoc reads the types the API shares with the commands
// and holds what the API answers to the page; both read it through
// internal/jsondoc.
func TestJSONDoc(t *testing.T) {
	c := jsondoc.New(t, "../docs/json.md")
	for section, ty := range map[string]reflect.Type{
		"api-fit":       reflect.TypeFor[report.Fit](),
		"api-plan":      reflect.TypeFor[report.Plan](),
		"api-recommend": reflect.TypeFor[recommendJSON](),
		"models":        reflect.TypeFor[modelList](),
		"error":         reflect.TypeFor[errorBody](),
		"instances":     reflect.TypeFor[instancesJSON](),
	} {
		c.Type(section, ty, section)
	}
}
