// Package acpschema checks JSON-RPC messages against the ACP JSON schema that the real
// agents' SDKs are generated from: the schema files shipped in the acp-go-sdk module tacp
// builds with (schema/schema.unstable.json: the stable protocol plus the parts the agents
// already speak, usage_update and PromptResponse.usage among them). Tests use it to hold
// the testagent, and what the runner sends, to the wire the real agents speak. It needs the
// Go module cache (go list -m), never the network or npm.
//
// The validator covers the JSON Schema keywords that schema uses: $ref (local), type,
// properties, required, additionalProperties, items, allOf, anyOf, oneOf, const, enum,
// minimum and maximum; annotations (description, title, default, format, discriminator,
// x-*) are not assertions.
package acpschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Module is the Go module whose schema files are used.
const Module = "github.com/coder/acp-go-sdk"

// Schema is the ACP schema, with the message definitions indexed by method.
type Schema struct {
	Version string
	defs    map[string]any
	// by method: the definition of a request's (or notification's) params and of its result
	params, results map[string]string
}

// Load reads schema/schema.unstable.json of the acp-go-sdk module this module requires.
func Load() (*Schema, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", Module).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", Module, err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	b, err := os.ReadFile(filepath.Join(dir, "schema", "schema.unstable.json"))
	if err != nil {
		return nil, err
	}
	s, err := Parse(b)
	if err != nil {
		return nil, err
	}
	s.Version = version
	return s, nil
}

// Parse reads a schema document.
func Parse(b []byte) (*Schema, error) {
	var doc map[string]any
	if err := decode(b, &doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	if len(defs) == 0 {
		return nil, fmt.Errorf("schema: no $defs")
	}
	s := &Schema{defs: defs, params: map[string]string{}, results: map[string]string{}}
	for name, d := range defs {
		m, _ := d.(map[string]any)
		method, _ := m["x-method"].(string)
		switch {
		case method == "":
		case strings.HasSuffix(name, "Response"):
			s.results[method] = name
		case strings.HasSuffix(name, "Request"), strings.HasSuffix(name, "Notification"):
			s.params[method] = name
		}
	}
	return s, nil
}

// Has reports whether the schema defines name.
func (s *Schema) Has(name string) bool { _, ok := s.defs[name]; return ok }

// ParamsDef and ResultDef name the definitions of a method's params and result ("" when
// the schema has no such method: an extension).
func (s *Schema) ParamsDef(method string) string { return s.params[method] }
func (s *Schema) ResultDef(method string) string { return s.results[method] }

// Validate checks doc against definition def ("SessionNotification", "PromptResponse"...).
func (s *Schema) Validate(def string, doc []byte) error {
	if !s.Has(def) {
		return fmt.Errorf("the schema defines no %s", def)
	}
	var v any
	if err := decode(doc, &v); err != nil {
		return err
	}
	return s.validate(map[string]any{"$ref": "#/$defs/" + def}, v, def)
}

// ValidateValue is Validate of v marshalled as JSON.
func (s *Schema) ValidateValue(def string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Validate(def, b)
}

func decode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func (s *Schema) validate(schema any, v any, path string) error {
	switch sc := schema.(type) {
	case bool:
		if !sc {
			return fmt.Errorf("%s: not allowed", path)
		}
		return nil
	case map[string]any:
		return s.validateObject(sc, v, path)
	}
	return fmt.Errorf("%s: bad schema %T", path, schema)
}

func (s *Schema) validateObject(sc map[string]any, v any, path string) error {
	if ref, ok := sc["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		if !ok || s.defs[name] == nil {
			return fmt.Errorf("%s: unresolved $ref %s", path, ref)
		}
		if err := s.validate(s.defs[name], v, path); err != nil {
			return err
		}
	}
	if t, ok := sc["type"]; ok {
		if err := checkType(t, v, path); err != nil {
			return err
		}
	}
	if c, ok := sc["const"]; ok && !equal(c, v) {
		return fmt.Errorf("%s: %v, want %v", path, show(v), show(c))
	}
	if e, ok := sc["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || equal(x, v)
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", path, show(v), e)
		}
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		if m, ok := sc["minimum"].(json.Number); ok {
			if min, _ := m.Float64(); f < min {
				return fmt.Errorf("%s: %v below the minimum %v", path, n, m)
			}
		}
		if m, ok := sc["maximum"].(json.Number); ok {
			if max, _ := m.Float64(); f > max {
				return fmt.Errorf("%s: %v above the maximum %v", path, n, m)
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		if err := s.validateProperties(sc, obj, path); err != nil {
			return err
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := sc["items"]; ok {
			for i, x := range arr {
				if err := s.validate(items, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	if all, ok := sc["allOf"].([]any); ok {
		for _, sub := range all {
			if err := s.validate(sub, v, path); err != nil {
				return err
			}
		}
	}
	if anyOf, ok := sc["anyOf"].([]any); ok {
		var errs []string
		for _, sub := range anyOf {
			err := s.validate(sub, v, path)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err.Error())
		}
		if errs != nil {
			return fmt.Errorf("%s: matches none of anyOf: %s", path, strings.Join(errs, "; "))
		}
	}
	if oneOf, ok := sc["oneOf"].([]any); ok {
		n := 0
		var errs []string
		for _, sub := range oneOf {
			if err := s.validate(sub, v, path); err == nil {
				n++
			} else {
				errs = append(errs, err.Error())
			}
		}
		if n != 1 {
			if n == 0 {
				return fmt.Errorf("%s: matches none of oneOf: %s", path, strings.Join(errs, "; "))
			}
			return fmt.Errorf("%s: matches %d of oneOf, want exactly one", path, n)
		}
	}
	return nil
}

func (s *Schema) validateProperties(sc map[string]any, obj map[string]any, path string) error {
	props, _ := sc["properties"].(map[string]any)
	if req, ok := sc["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Errorf("%s: missing required %q", path, r)
			}
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if p, ok := props[k]; ok {
			if err := s.validate(p, obj[k], path+"."+k); err != nil {
				return err
			}
		} else if ap, ok := sc["additionalProperties"]; ok {
			if err := s.validate(ap, obj[k], path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkType(t any, v any, path string) error {
	var types []string
	switch tt := t.(type) {
	case string:
		types = []string{tt}
	case []any:
		for _, x := range tt {
			types = append(types, x.(string))
		}
	}
	for _, want := range types {
		if isType(want, v) {
			return nil
		}
	}
	return fmt.Errorf("%s: %s, want %s", path, show(v), strings.Join(types, " or "))
}

func isType(t string, v any) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f)
	}
	return false
}

func equal(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}
