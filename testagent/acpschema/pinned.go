package acpschema

// The ACP v1 schema pinned in this repository (v1/schema.json: schema/v1/schema.json of the
// official TypeScript SDK, @agentclientprotocol/sdk 2.4.0, the schema its clients validate
// what an agent sends against), and a full JSON Schema 2020-12 validator over it. Faces
// tacp offers to ACP clients are checked against this one: a message it rejects is a
// message an up-to-date client drops.

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// PinnedVersion names where v1/schema.json comes from.
const PinnedVersion = "@agentclientprotocol/sdk 2.4.0 schema/v1/schema.json"

//go:embed v1/schema.json
var pinnedV1 []byte

const pinnedURL = "acp-v1.json"

// V1 is the pinned ACP v1 schema with a JSON Schema 2020-12 validator.
type V1 struct {
	index *Schema // methods to definitions
	c     *jsonschema.Compiler
	mu    sync.Mutex
	cache map[string]*jsonschema.Schema
}

// LoadV1 reads the pinned ACP v1 schema.
func LoadV1() (*V1, error) {
	idx, err := Parse(pinnedV1)
	if err != nil {
		return nil, err
	}
	idx.Version = PinnedVersion
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(pinnedV1))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(pinnedURL, doc); err != nil {
		return nil, err
	}
	return &V1{index: idx, c: c, cache: map[string]*jsonschema.Schema{}}, nil
}

// ParamsDef and ResultDef name the definitions of a method's params and result ("" when
// the schema has no such method).
func (v *V1) ParamsDef(method string) string { return v.index.ParamsDef(method) }
func (v *V1) ResultDef(method string) string { return v.index.ResultDef(method) }

// Validate checks doc against definition def ("SessionNotification", "PromptResponse"...).
func (v *V1) Validate(def string, doc []byte) error {
	if !v.index.Has(def) {
		return fmt.Errorf("the schema defines no %s", def)
	}
	v.mu.Lock()
	sch := v.cache[def]
	if sch == nil {
		var err error
		if sch, err = v.c.Compile(pinnedURL + "#/$defs/" + def); err != nil {
			v.mu.Unlock()
			return err
		}
		v.cache[def] = sch
	}
	v.mu.Unlock()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// Direction is who sent a message.
type Direction int

const (
	// FromClient: the client's message to the agent.
	FromClient Direction = iota
	// FromAgent: the agent's message to the client.
	FromAgent
)

// Violation is one message that does not hold to the schema.
type Violation struct {
	Method, Def string
	Message     string // the JSON-RPC message, cut short
	Err         error
}

func (v Violation) String() string {
	why := v.Err.Error()
	var ve *jsonschema.ValidationError
	if errors.As(v.Err, &ve) {
		why = fmt.Sprintf("%#v", ve) // every failing keyword, where in the message
	}
	return fmt.Sprintf("%s (%s): %s\n  in %s", v.Method, v.Def, why, v.Message)
}

// Conversation checks the messages of one JSON-RPC connection as they pass, in both
// directions: the requests of one side name the method of the other side's responses. It
// validates what Checked says (FromAgent: what an ACP agent sends its client) against the
// pinned schema: requests and notifications by their method's params, responses by the
// result of the request they answer, errors by the JSON-RPC error shape. Extension methods
// ("_" first) are not the schema's; they are counted, not checked.
type Conversation struct {
	Schema  *V1
	Checked Direction

	mu      sync.Mutex
	pending map[Direction]map[string]string // requests sent by a side: id -> method
	checked map[string]int                  // per method (and "method result")
	skipped map[string]int
	bad     []Violation
}

// Observe takes one message that dir sent.
func (c *Conversation) Observe(dir Direction, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[Direction]map[string]string{FromClient: {}, FromAgent: {}}
		c.checked, c.skipped = map[string]int{}, map[string]int{}
	}
	if err := json.Unmarshal(line, &m); err != nil {
		if dir == c.Checked {
			c.bad = append(c.bad, Violation{Method: "?", Message: cut(line), Err: err})
		}
		return
	}
	switch {
	case m.Method != nil:
		if len(m.ID) > 0 {
			c.pending[dir][string(m.ID)] = *m.Method
		}
		if dir != c.Checked {
			return
		}
		def := c.Schema.ParamsDef(*m.Method)
		c.check(*m.Method, def, m.Params, line)
	default:
		other := FromClient
		if dir == FromClient {
			other = FromAgent
		}
		method := c.pending[other][string(m.ID)]
		delete(c.pending[other], string(m.ID))
		if dir != c.Checked {
			return
		}
		if len(m.Error) > 0 && string(m.Error) != "null" {
			c.check(method+" error", "Error", m.Error, line)
			return
		}
		if method == "" {
			c.bad = append(c.bad, Violation{Method: "?", Message: cut(line), Err: fmt.Errorf("a response to no request")})
			return
		}
		def := c.Schema.ResultDef(method)
		if def == "" {
			// The other side asked a method v1 does not define (session/set_model, unstable):
			// its answer is that side's business, counted and not checked.
			c.skipped[method+" result"]++
			return
		}
		c.check(method+" result", def, m.Result, line)
	}
}

func (c *Conversation) check(method, def string, doc json.RawMessage, line []byte) {
	if def == "" {
		c.skipped[method]++
		if !strings.HasPrefix(method, "_") {
			c.bad = append(c.bad, Violation{Method: method, Message: cut(line), Err: fmt.Errorf("the schema has no method %s", method)})
		}
		return
	}
	if len(doc) == 0 {
		doc = json.RawMessage("null")
	}
	c.checked[method]++
	if err := c.Schema.Validate(def, doc); err != nil {
		c.bad = append(c.bad, Violation{Method: method, Def: def, Message: cut(line), Err: err})
	}
}

// Violations returns the messages that broke the schema so far.
func (c *Conversation) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Violation(nil), c.bad...)
}

// CheckedCounts returns how many messages were checked, per method ("session/prompt result"...).
func (c *Conversation) CheckedCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.checked {
		out[k] = n
	}
	return out
}

func cut(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}
