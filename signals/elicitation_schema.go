package signals

// Checking an answer against an elicitation's requestedSchema. ACP's form schema is a flat
// object of primitive properties (MCP's restricted JSON Schema): string (with enum, or
// oneOf of {const, title}; minLength, maxLength, format), number and integer (minimum,
// maximum), boolean, and array of such an enum (items.enum or items.anyOf; minItems,
// maxItems), with a list of required names. CheckElicitationContent says what is wrong
// with content in words a person can act on; the workflow's validator refuses such an
// answer, and the request stays open.

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

type elicitationSchema struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

type elicitationProperty struct {
	Type      string   `json:"type"`
	Title     string   `json:"title"`
	Enum      []any    `json:"enum"`
	OneOf     []enumOf `json:"oneOf"`
	AnyOf     []enumOf `json:"anyOf"`
	MinLength *int     `json:"minLength"`
	MaxLength *int     `json:"maxLength"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	MinItems  *int     `json:"minItems"`
	MaxItems  *int     `json:"maxItems"`
	Items     *struct {
		Type  string   `json:"type"`
		Enum  []any    `json:"enum"`
		AnyOf []enumOf `json:"anyOf"`
		OneOf []enumOf `json:"oneOf"`
	} `json:"items"`
}

type enumOf struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

// ElicitationChoices lists the values a property of schema may take ("" for a free one),
// for a form or a flag's help.
func ElicitationChoices(schema json.RawMessage, name string) []string {
	var s elicitationSchema
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var p elicitationProperty
	if json.Unmarshal(s.Properties[name], &p) != nil {
		return nil
	}
	return choices(p)
}

func choices(p elicitationProperty) []string {
	var out []string
	add := func(vs []any, of []enumOf) {
		for _, v := range vs {
			out = append(out, fmt.Sprint(v))
		}
		for _, o := range of {
			out = append(out, fmt.Sprint(o.Const))
		}
	}
	add(p.Enum, p.OneOf)
	if p.Items != nil {
		add(p.Items.Enum, append(p.Items.AnyOf, p.Items.OneOf...))
	}
	return out
}

// CheckElicitationContent checks content (a JSON object) against schema; nil when it fits.
func CheckElicitationContent(schema, content json.RawMessage) error {
	var s elicitationSchema
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &s); err != nil {
			return fmt.Errorf("the request's schema does not decode: %v", err)
		}
	}
	var c map[string]json.RawMessage
	if len(content) == 0 || json.Unmarshal(content, &c) != nil || c == nil {
		return fmt.Errorf("content must be a JSON object of the form's fields")
	}
	var problems []string
	for _, name := range s.Required {
		if _, ok := c[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s is required", name))
		}
	}
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw, ok := s.Properties[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is not a field of the form (fields: %s)", name, strings.Join(sortedKeys(s.Properties), ", ")))
			continue
		}
		var p elicitationProperty
		_ = json.Unmarshal(raw, &p)
		if msg := checkValue(p, c[name]); msg != "" {
			problems = append(problems, name+" "+msg)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkValue says what is wrong with raw as a value of p ("" when nothing).
func checkValue(p elicitationProperty, raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "is not JSON"
	}
	allowed := choices(elicitationProperty{Enum: p.Enum, OneOf: p.OneOf})
	switch p.Type {
	case "string", "":
		sv, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		if len(allowed) > 0 && !slices.Contains(allowed, sv) {
			return fmt.Sprintf("must be one of %s", strings.Join(allowed, ", "))
		}
		n := len([]rune(sv))
		if p.MinLength != nil && n < *p.MinLength {
			return fmt.Sprintf("must be at least %d characters", *p.MinLength)
		}
		if p.MaxLength != nil && n > *p.MaxLength {
			return fmt.Sprintf("must be at most %d characters", *p.MaxLength)
		}
	case "number", "integer":
		f, ok := v.(float64)
		if !ok {
			return "must be a " + p.Type
		}
		if p.Type == "integer" && f != math.Trunc(f) {
			return "must be an integer"
		}
		if p.Minimum != nil && f < *p.Minimum {
			return fmt.Sprintf("must be at least %v", *p.Minimum)
		}
		if p.Maximum != nil && f > *p.Maximum {
			return fmt.Sprintf("must be at most %v", *p.Maximum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case "array":
		items, ok := v.([]any)
		if !ok {
			return "must be a list"
		}
		opts := choices(elicitationProperty{Items: p.Items})
		for _, it := range items {
			if len(opts) > 0 && !slices.Contains(opts, fmt.Sprint(it)) {
				return fmt.Sprintf("may hold only %s", strings.Join(opts, ", "))
			}
		}
		if p.MinItems != nil && len(items) < *p.MinItems {
			return fmt.Sprintf("must hold at least %d", *p.MinItems)
		}
		if p.MaxItems != nil && len(items) > *p.MaxItems {
			return fmt.Sprintf("must hold at most %d", *p.MaxItems)
		}
	}
	return ""
}
