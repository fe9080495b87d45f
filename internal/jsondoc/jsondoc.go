// Package jsondoc holds docs/json.md, the JSON contract headroom owns, to
// the Go types that print it and to what they print: the tables under
// each ### heading list exactly the fields, of the types they say. The
// cli and server tests share it.
package jsondoc

import (
	"bufio"
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// jsonDoc is docs/json.md read as its tables: under each ### heading, a
// table of field, type and meaning.
type jsonDoc struct {
	sections map[string]map[string]docRow
	order    []string
}

// docRow is one field's row, lower-cased: its type cell and the whole row.
type docRow struct{ typ, row string }

var (
	docHeading = regexp.MustCompile("^### ([a-z][a-z-]*)$")
	docField   = regexp.MustCompile("^\\| `([a-z0-9_]+)` \\| ([^|]+) \\|")
	docLink    = regexp.MustCompile(`\]\(#([a-z0-9-]+)\)`)
)

func readJSONDoc(t testing.TB, path string) jsonDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := jsonDoc{sections: map[string]map[string]docRow{}}
	var cur map[string]docRow
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			cur = nil
			if m := docHeading.FindStringSubmatch(line); m != nil {
				if d.sections[m[1]] != nil {
					t.Errorf("%s has two sections %s", path, m[1])
				}
				cur = map[string]docRow{}
				d.sections[m[1]] = cur
				d.order = append(d.order, m[1])
			}
			continue
		}
		if m := docField.FindStringSubmatch(line); m != nil && cur != nil {
			if _, dup := cur[m[1]]; dup {
				t.Errorf("%s lists %s twice in one table", path, m[1])
			}
			cur[m[1]] = docRow{typ: strings.ToLower(m[2]), row: strings.ToLower(line)}
		}
	}
	if len(d.sections) == 0 {
		t.Fatalf("%s has no sections", path)
	}
	return d
}

// Check compares Go types and printed JSON with the page.
type Check struct {
	t       testing.TB
	doc     jsonDoc
	reached map[string]bool
	done    map[string]bool // section and type already compared
	said    map[string]bool // errors reported, each once
}

// errorf reports a failure once, however many values repeat it.
func (c *Check) errorf(format string, args ...any) {
	c.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if !c.said[msg] {
		c.said[msg] = true
		c.t.Error(msg)
	}
}

// New reads the page at path (docs/json.md) for t.
func New(t testing.TB, path string) *Check {
	return &Check{t: t, doc: readJSONDoc(t, path), reached: map[string]bool{}, done: map[string]bool{}, said: map[string]bool{}}
}

// jsonField is a field as encoding/json writes it.
type jsonField struct {
	name string
	typ  reflect.Type
	omit bool // omitempty or omitzero
}

// jsonFields lists the fields encoding/json writes for a struct type,
// with those of embedded structs in their place.
func jsonFields(ty reflect.Type) []jsonField {
	var out []jsonField
	for i := range ty.NumField() {
		f := ty.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				out = append(out, jsonFields(et)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, jsonField{name, f.Type, omit})
	}
	return out
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// custom reports whether a type writes its own JSON.
func custom(ty reflect.Type) bool {
	for _, i := range []reflect.Type{jsonMarshaler, textMarshaler} {
		if ty.Implements(i) || reflect.PointerTo(ty).Implements(i) {
			return true
		}
	}
	return false
}

// Type compares the section with the struct type's fields, then the
// sections its table links for the fields that are objects.
func (c *Check) Type(section string, ty reflect.Type, path string) {
	c.t.Helper()
	key := section + " " + ty.PkgPath() + "." + ty.Name()
	if c.done[key] {
		return
	}
	c.done[key] = true
	c.reached[section] = true
	rows, ok := c.doc.sections[section]
	if !ok {
		c.errorf("%s: docs/json.md has no section %s for %s", path, section, ty)
		return
	}
	fields := jsonFields(ty)
	for _, f := range fields {
		row, ok := rows[f.name]
		if !ok {
			c.errorf("%s.%s (%s) is not in docs/json.md's section %s", path, f.name, f.typ, section)
			continue
		}
		c.checkField(path+"."+f.name, f, row)
	}
	for name := range rows {
		if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == name }) {
			c.errorf("docs/json.md's section %s lists %s, which %s (%s) does not have", section, name, path, ty)
		}
	}
}

// checkField holds one field's row to its Go type.
func (c *Check) checkField(path string, f jsonField, row docRow) {
	c.t.Helper()
	ty := f.typ
	if f.omit && !strings.Contains(row.row, "omitted") {
		c.errorf("%s is omitted when empty; docs/json.md does not say when", path)
	}
	if ty.Kind() == reflect.Pointer && !custom(ty) {
		if !f.omit && !strings.Contains(row.typ, "null") {
			c.errorf("%s can be null; docs/json.md's type %q does not say so", path, row.typ)
		}
		ty = ty.Elem()
	}
	if (ty.Kind() == reflect.Slice || ty.Kind() == reflect.Array) && !custom(ty) {
		if !strings.Contains(row.typ, "list") {
			c.errorf("%s is a list; docs/json.md's type is %q", path, row.typ)
		}
		path += "[]"
		ty = ty.Elem()
		if ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
	}
	if custom(ty) {
		return // checked in the printed JSON
	}
	want := ""
	switch ty.Kind() {
	case reflect.Struct:
		m := docLink.FindStringSubmatch(row.typ)
		if m == nil {
			c.errorf("%s is an object; docs/json.md's type %q links no section", path, row.typ)
			return
		}
		c.Type(m[1], ty, path)
		return
	case reflect.Map:
		want = "object"
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "integer"
	case reflect.Float32, reflect.Float64:
		want = "number"
	}
	if want != "" && !strings.Contains(row.typ, want) {
		c.errorf("%s is a %s; docs/json.md's type is %q", path, want, row.typ)
	}
}

// JSON holds printed JSON to the section it is documented in.
func (c *Check) JSON(section string, data []byte, what string) {
	c.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		c.errorf("%s: not JSON (%v): %.300s", what, err, data)
		return
	}
	c.checkObject(section, v, section)
}

func (c *Check) checkObject(section string, v any, path string) {
	c.t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		c.errorf("%s: printed %T where docs/json.md's section %s describes an object", path, v, section)
		return
	}
	c.reached[section] = true
	rows := c.doc.sections[section]
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range obj {
			if !yield(k) {
				return
			}
		}
	}) {
		row, ok := rows[k]
		if !ok {
			c.errorf("%s.%s is printed but not in docs/json.md's section %s", path, k, section)
			continue
		}
		c.checkValue(path+"."+k, obj[k], row, false)
	}
}

// checkValue holds one printed value to its row's type.
func (c *Check) checkValue(path string, v any, row docRow, inList bool) {
	c.t.Helper()
	need := func(word string) {
		if !strings.Contains(row.typ, word) {
			c.errorf("%s printed a %s; docs/json.md's type is %q", path, word, row.typ)
		}
	}
	switch v := v.(type) {
	case nil:
		need("null")
	case string:
		need("string")
	case bool:
		need("boolean")
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			need("number")
		} else if !strings.Contains(row.typ, "integer") {
			need("number")
		}
	case []any:
		if inList {
			c.errorf("%s: a list of lists, which docs/json.md does not describe", path)
			return
		}
		need("list")
		for _, e := range v {
			c.checkValue(path+"[]", e, row, true)
		}
	case map[string]any:
		if m := docLink.FindStringSubmatch(row.typ); m != nil {
			c.checkObject(m[1], v, path)
		} else {
			need("object")
		}
	}
}

// Unreached lists the page's sections that no type and no printed JSON
// reached, in the page's order.
func (c *Check) Unreached() []string {
	var out []string
	for _, s := range c.doc.order {
		if !c.reached[s] {
			out = append(out, s)
		}
	}
	return out
}
