package automation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// Variable is a project variable, read by expressions and CODE as
// vars.NAME (docs/environments.md). A secret variable's value lives in the
// Secrets store under VariableSecretName(Name), like a connection's
// credential, and Value is nil: it is never returned.
type Variable struct {
	Name    string    `json:"name"`
	Secret  bool      `json:"secret"`
	Value   *string   `json:"value,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// MarshalJSON writes timestamps in TimeFormat.
func (v Variable) MarshalJSON() ([]byte, error) {
	type plain Variable
	return json.Marshal(struct {
		plain
		Created stamp `json:"created"`
		Updated stamp `json:"updated"`
	}{plain(v), stamp(v.Created), stamp(v.Updated)})
}

// VariableInput is the body of PUT /api/v1/variables/{name}.
type VariableInput struct {
	Value  *string `json:"value"`
	Secret bool    `json:"secret"`
}

// Limits of project variables. A project's variables are one record in
// the store (one DynamoDB item, under its 400 KB cap), so their names and
// plain values together are bounded; secret values live in Secrets.
const (
	MaxVariableValueBytes = 4 << 10
	MaxVariables          = 200
	MaxVariablesBytes     = 256 << 10
)

// variableName is the rule for names: an identifier, so that vars.NAME
// reads it in expressions and CODE alike.
var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// VariableSecretName is the Secrets name of a secret variable's value.
func VariableSecretName(name string) string { return "variables/" + name }

// variableStamp names the version of a variable's value for the secret
// cache: a new value gets a new Updated.
func variableStamp(v Variable) string {
	return "variable/" + v.Updated.UTC().Format(time.RFC3339Nano)
}

func checkVariableName(name string) error {
	if !variableName.MatchString(name) {
		return InvalidCode("INVALID_PARAMETER", "variable name %q must match [A-Za-z_][A-Za-z0-9_]{0,63}: a letter or _, then up to 63 letters, digits or _", ClipID(name))
	}
	return nil
}

// PutVariable creates or replaces a variable. A secret value goes to
// Secrets first, so that a stored secret variable always has its value;
// a variable that stops being secret has its stored value removed after.
func (s *VariableService) PutVariable(ctx context.Context, p Project, name string, in VariableInput) (Variable, error) {
	if err := checkVariableName(name); err != nil {
		return Variable{}, err
	}
	if in.Value == nil {
		return Variable{}, Invalid(`value is required: send {"value": "<text>", "secret": false}`)
	}
	if len(*in.Value) > MaxVariableValueBytes {
		return Variable{}, Invalid("value is %d bytes; a variable holds at most %d", len(*in.Value), MaxVariableValueBytes)
	}
	newSecret := false
	if in.Secret {
		cur, err := s.store.Variables(ctx, p.ID)
		if err != nil {
			return Variable{}, wrap("put variable", err)
		}
		if err := s.secrets.PutSecret(ctx, p.ID, VariableSecretName(name), []byte(*in.Value)); err != nil {
			return Variable{}, wrap("store secret variable", err)
		}
		newSecret = !cur[name].Secret
	}
	out, before, err := s.putVariableRecord(ctx, p, name, in)
	if err != nil {
		if newSecret {
			// A new secret value that the record refused (the project is
			// full, the store is down) is not left behind.
			_ = s.secrets.DeleteSecret(ctx, p.ID, VariableSecretName(name))
		}
		return Variable{}, wrapVariables("put variable", err)
	}
	if before.Secret && !in.Secret {
		if err := s.secrets.DeleteSecret(ctx, p.ID, VariableSecretName(name)); err != nil {
			s.log.WarnContext(ctx, "secret of a variable made plain was not removed", "variable", name, "err", err)
		}
	}
	return out, nil
}

// putVariableRecord writes the variable's record, keeping its creation
// time, within the project's limits; it returns the record and the one it
// replaced (zero when new).
func (s *VariableService) putVariableRecord(ctx context.Context, p Project, name string, in VariableInput) (Variable, Variable, error) {
	now := s.clock()
	var out, before Variable
	err := s.store.UpdateVariables(ctx, p.ID, func(cur map[string]Variable) (map[string]Variable, error) {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]Variable{}
		}
		v := Variable{Name: name, Secret: in.Secret, Created: now, Updated: now}
		before = Variable{}
		if old, ok := cur[name]; ok {
			v.Created, before = old.Created, old
		} else if len(cur) >= MaxVariables {
			return nil, Invalid("the project has %d variables, the most it may hold; delete one first", len(cur))
		}
		if !in.Secret {
			val := *in.Value
			v.Value = &val
		}
		next[name] = v
		if b, err := json.Marshal(next); err != nil {
			return nil, fmt.Errorf("encode variables: %w", err)
		} else if len(b) > MaxVariablesBytes {
			return nil, Invalid("the project's variables would take %d bytes; they hold at most %d (store long values as secret variables, or delete some)", len(b), MaxVariablesBytes)
		}
		out = v
		return next, nil
	})
	return out, before, err
}

// Variable returns one variable of the project, without a secret's value.
func (s *VariableService) Variable(ctx context.Context, p Project, name string) (Variable, error) {
	vs, err := s.store.Variables(ctx, p.ID)
	if err != nil {
		return Variable{}, wrap("get variable", err)
	}
	v, ok := vs[name]
	if !ok {
		return Variable{}, NotFound("variable", name)
	}
	return v, nil
}

// ListVariables returns one page of the project's variables, by name.
func (s *VariableService) ListVariables(ctx context.Context, p Project, pr PageRequest) (List[Variable], error) {
	if pr.Status != "" {
		return List[Variable]{}, InvalidCode("INVALID_PARAMETER", "variables take no status filter")
	}
	scope := p.ID + "/variables"
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return List[Variable]{}, err
	}
	vs, err := s.store.Variables(ctx, p.ID)
	if err != nil {
		return List[Variable]{}, wrap("list variables", err)
	}
	all := slices.SortedFunc(maps.Values(vs), func(a, b Variable) int { return cmp.Compare(a.Name, b.Name) })
	// The position is the last name seen: a page goes on from there even
	// when variables were added or deleted meanwhile.
	i := 0
	if q.After != "" {
		i, _ = slices.BinarySearchFunc(all, q.After, func(v Variable, name string) int { return cmp.Compare(v.Name, name) })
		if i < len(all) && all[i].Name == q.After {
			i++
		}
	}
	page := Page[Variable]{Items: all[i:min(i+q.Limit, len(all))]}
	if i+q.Limit < len(all) {
		page.Next = page.Items[len(page.Items)-1].Name
	}
	return list(s, scope, q, page, func(v Variable) Variable { return v }), nil
}

// DeleteVariable removes a variable and, for a secret one, its value.
func (s *VariableService) DeleteVariable(ctx context.Context, p Project, name string) error {
	var gone Variable
	err := s.store.UpdateVariables(ctx, p.ID, func(cur map[string]Variable) (map[string]Variable, error) {
		v, ok := cur[name]
		if !ok {
			return nil, NotFound("variable", name)
		}
		gone = v
		next := maps.Clone(cur)
		delete(next, name)
		return next, nil
	})
	if err != nil {
		return wrapVariables("delete variable", err)
	}
	if gone.Secret {
		return wrap("delete secret variable", s.secrets.DeleteSecret(ctx, p.ID, VariableSecretName(name)))
	}
	return nil
}

// RunVariables are a project's variables as one run attempt sees them:
// every value, secret ones revealed, and the secret values apart so that
// run records can mask them.
type RunVariables struct {
	Values  map[string]string
	Secrets []string // the values of secret variables, to mask
}

// LoadRunVariables reads every variable of the project with its value, for
// one run attempt or one webhook delivery: one store read, and one secret
// read per secret variable (from the cache while the variable is
// unchanged).
func (s *VariableService) LoadRunVariables(ctx context.Context, project string) (RunVariables, error) {
	vs, err := s.store.Variables(ctx, project)
	if err != nil {
		return RunVariables{}, wrap("read variables", err)
	}
	rv := RunVariables{Values: make(map[string]string, len(vs))}
	for name, v := range vs {
		if !v.Secret {
			if v.Value != nil {
				rv.Values[name] = *v.Value
			}
			continue
		}
		b, err := cachedSecret(ctx, s.secrets, project, VariableSecretName(name), variableStamp(v))
		if errors.Is(err, ErrNotFound) {
			// Deleted between the two reads: as if it were never there.
			continue
		} else if err != nil {
			return RunVariables{}, wrap("read secret variable "+name, err)
		}
		rv.Values[name] = string(b)
		if len(b) > 0 {
			rv.Secrets = append(rv.Secrets, string(b))
		}
	}
	return rv, nil
}

// wrapVariables keeps client errors from a change function as they are.
func wrapVariables(op string, err error) error {
	if errors.Is(err, ErrInvalid) || IsNotFound(err) {
		return err
	}
	return wrap(op, err)
}

// secretVarRef is a secret field that names a variable instead of holding
// a value: webhook authentication values and signature secrets may be
// "{{ vars.NAME }}", so that a flow file carries no secret.
var secretVarRef = regexp.MustCompile(`^\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}$`)

// SecretVarRef returns the variable a secret field's value names, or "".
func SecretVarRef(value string) string {
	if m := secretVarRef.FindStringSubmatch(value); m != nil {
		return m[1]
	}
	return ""
}

// resolveSecretVars replaces the revealed secret fields that name a
// variable with its value, read now: at each delivery and run. A variable
// that does not exist leaves the field empty, which every check refuses.
func (s *VariableService) resolveSecretVars(ctx context.Context, project string, fields map[string]*Secret) error {
	var rv *RunVariables
	for _, ptr := range fields {
		name := SecretVarRef(ptr.Reveal())
		if name == "" {
			continue
		}
		if rv == nil {
			loaded, err := s.LoadRunVariables(ctx, project)
			if err != nil {
				return err
			}
			rv = &loaded
		}
		*ptr = Secret(rv.Values[name])
	}
	return nil
}
