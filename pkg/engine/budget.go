package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// Limits of expressions and templates. A flow definition is code a tenant
// sends: these bounds keep one definition from exhausting the memory or the
// CPU that every tenant's runs share, on flowd and on the Lambdas alike. They
// are far above what real flows use. The first three are checked when a
// definition is saved (a 400 naming the field); the others while a step
// runs, where exceeding one fails the step, and the run, for good.
const (
	// MaxExprNodes bounds the syntax tree of one expression: a FILTER
	// condition or one {{ }} part of a template.
	MaxExprNodes = 1000
	// MaxLoopNesting bounds how deeply the builtins that loop over a
	// collection (all, any, none, one, map, filter, find…, count, sum,
	// groupBy, sortBy, reduce) nest in one expression: each level multiplies
	// the work by the size of its collection.
	MaxLoopNesting = 3
	// MaxTemplateParts bounds the {{ }} parts of one template string.
	MaxTemplateParts = 200

	// MaxLoopIterations bounds the loop iterations of all of one step's
	// evaluations together (an inner loop's iterations count for every
	// iteration of the outer one).
	MaxLoopIterations = 1_000_000
	// MaxEvalBytes bounds what one step's evaluations build together, in
	// bytes: strings made by +, repeat, join, replace, split, toJSON, string
	// and the other builtins, template text, and JSON request bodies.
	// Values referenced rather than copied (trigger.body, a step's output)
	// are not charged; a webhook body is at most 10 MiB.
	MaxEvalBytes = 32 << 20
	// MaxEvalElements is expr's own memory budget for one evaluation:
	// elements of the arrays, maps and ranges an expression builds.
	MaxEvalElements = 1_000_000
	// MaxPatternBytes bounds a regular expression of the matches operator,
	// and MaxMatchWork the work of one match: bytes of text times bytes of
	// pattern (a regular expression's match time grows with both).
	MaxPatternBytes = 1 << 10
	MaxMatchWork    = 1 << 27
	// MaxOutputDepth bounds how deeply a recorded step output nests: a
	// deeper one (an HTTP response, a value built by reduce) is recorded as
	// a preview cut at this depth, so that every run record can be read back
	// (JSON decoders stop at 10,000 levels).
	MaxOutputDepth = 512
	// MaxEvalTime bounds the time one step spends evaluating: the backstop
	// for work the counts above do not see (a builtin over a large array
	// inside a loop). It is checked every 16 loop iterations and whenever
	// a builtin returns, as is the run's own deadline.
	MaxEvalTime = 10 * time.Second
)

// budgetKey is where a step's budget travels in the environment, for the
// functions the compiler inserts (they receive $env). It is not a name an
// expression can use.
const budgetKey = "\x00budget"

// budget is what one step's evaluations may still spend.
type budget struct {
	ctx        context.Context
	deadline   time.Time
	iterations int
	bytes      int
	// maxIterations and maxTime are what iterations and the deadline
	// started at, for the messages.
	maxIterations int
	maxTime       time.Duration
}

// evalTime is MaxEvalTime, which a test of the other bounds lifts: on a
// slow machine (or under -race) the time backstop would otherwise win the
// race with the bound the test is about.
var evalTime = MaxEvalTime

func newBudget(ctx context.Context) *budget {
	return &budget{ctx: ctx, deadline: time.Now().Add(evalTime), iterations: MaxLoopIterations, bytes: MaxEvalBytes,
		maxIterations: MaxLoopIterations, maxTime: evalTime}
}

// errBudget marks evaluation failures caused by a limit.
var errBudget = errors.New("evaluation limit exceeded")

func (b *budget) check() error {
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("evaluation stopped: %w", err)
	}
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: the step evaluated for more than %s", errBudget, b.maxTime)
	}
	return nil
}

// loop charges n iterations.
func (b *budget) loop(n int) error {
	b.iterations -= n
	if b.iterations < 0 {
		return fmt.Errorf("%w: more than %d loop iterations in one step (nested loops multiply)", errBudget, b.maxIterations)
	}
	return b.check()
}

// tick charges one iteration, and looks at the clock every 16.
func (b *budget) tick() error {
	b.iterations--
	if b.iterations < 0 {
		return b.loop(0)
	}
	if b.iterations&15 == 0 {
		return b.check()
	}
	return nil
}

// grow charges n bytes built.
func (b *budget) grow(n int) error {
	if n < 0 || n > b.bytes {
		b.bytes = -1
		return fmt.Errorf("%w: the step would build more than %d MiB of text and data", errBudget, MaxEvalBytes>>20)
	}
	b.bytes -= n
	return b.check()
}

// need fails when n bytes are more than what is left, without charging
// them: a guarded builtin checks its cost first and is charged its result.
func (b *budget) need(n int) error {
	if n < 0 || n > b.bytes {
		return b.grow(-1)
	}
	return b.check()
}

// budgetOf finds the budget in an environment.
func budgetOf(env any) *budget {
	if m, ok := env.(map[string]any); ok {
		if b, ok := m[budgetKey].(*budget); ok {
			return b
		}
	}
	// Unreachable through run, which always sets one: fail closed.
	return &budget{ctx: context.Background(), deadline: time.Now()}
}

// withBudget returns env carrying a budget, adding a fresh one if absent.
func withBudget(env map[string]any) map[string]any {
	if _, ok := env[budgetKey].(*budget); ok {
		return env
	}
	out := make(map[string]any, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	out[budgetKey] = newBudget(context.Background())
	return out
}

// sizeOf is what a value a builtin returned is charged: its bytes for a
// string, a reference per element for collections.
func sizeOf(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		return 16 * len(v)
	case map[string]any:
		return 48 * len(v)
	case nil, bool, int, float64:
		return 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.Len()
	case reflect.Slice, reflect.Array:
		return 16 * rv.Len()
	case reflect.Map:
		return 48 * rv.Len()
	}
	return 0
}

// loops are the builtins that run a predicate over a collection.
var loops = map[string]bool{
	"all": true, "none": true, "any": true, "one": true, "filter": true, "map": true,
	"find": true, "findIndex": true, "findLast": true, "findLastIndex": true,
	"count": true, "sum": true, "groupBy": true, "sortBy": true, "reduce": true,
}

// boolLoops are the loops whose predicate must be true or false.
var boolLoops = map[string]bool{
	"all": true, "none": true, "any": true, "one": true, "filter": true,
	"find": true, "findIndex": true, "findLast": true, "findLastIndex": true, "count": true,
}

// Names of the functions the compiler inserts; the leading $ keeps them
// apart from the names expressions use.
const (
	fnTick     = "$tick"
	fnTickBool = "$tickb"
	fnOut      = "$out"
	fnAdd      = "$add"
	fnMatches  = "$matches"
)

// guarded are the builtins that can build far more than they receive (a
// repeat count, a join of many references to one string): each runs as a
// function that checks the size first, even when called as ::name.
var guarded = map[string]func(b *budget, args []any) error{
	"repeat": func(b *budget, args []any) error {
		s, _ := args[0].(string)
		n := runtime.ToInt(args[1])
		if n > 0 && len(s) > 0 && n > MaxEvalBytes/len(s)+1 {
			return b.need(-1)
		}
		return b.need(len(s) * max(n, 0))
	},
	"join": func(b *budget, args []any) error {
		sep := ""
		if len(args) > 1 {
			sep, _ = args[1].(string)
		}
		rv := reflect.ValueOf(args[0])
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return nil // the builtin reports it
		}
		n := rv.Len() * len(sep)
		for i := 0; i < rv.Len() && n <= b.bytes; i++ {
			n += sizeOf(rv.Index(i).Interface())
		}
		return b.need(n)
	},
	"replace": func(b *budget, args []any) error {
		s, _ := args[0].(string)
		old, _ := args[1].(string)
		repl, _ := args[2].(string)
		count := utf8.RuneCountInString(s) + 1
		if old != "" {
			count = strings.Count(s, old)
		}
		growth := len(repl) - len(old)
		if growth > 0 && count > 0 && growth > MaxEvalBytes/count {
			return b.need(-1)
		}
		return b.need(len(s) + count*max(growth, 0))
	},
	"split":      splitCost,
	"splitAfter": splitCost,
	"toJSON": func(b *budget, args []any) error {
		return b.need(jsonSize(args[0], b.bytes))
	},
	"string": func(b *budget, args []any) error {
		return b.need(jsonSize(args[0], b.bytes))
	},
}

// splitCost charges the strings split makes: one per separator found.
func splitCost(b *budget, args []any) error {
	s, _ := args[0].(string)
	sep, _ := args[1].(string)
	n := utf8.RuneCountInString(s)
	if sep != "" {
		n = strings.Count(s, sep) + 1
	}
	if err := b.loop(n); err != nil {
		return err
	}
	return b.need(16*n + len(s))
}

// guardedTypes declare the guarded builtins' signatures, with the
// environment first, so that calls are still checked when saved.
var guardedTypes = map[string][]any{
	"repeat":     {new(func(map[string]any, string, int) string)},
	"join":       {new(func(map[string]any, any, ...string) string)},
	"replace":    {new(func(map[string]any, string, string, string) string)},
	"split":      {new(func(map[string]any, string, string) []string), new(func(map[string]any, string, string, int) []string)},
	"splitAfter": {new(func(map[string]any, string, string) []string), new(func(map[string]any, string, string, int) []string)},
	"toJSON":     {new(func(map[string]any, any) string)},
	"string":     {new(func(map[string]any, any) string)},
}

// callBuiltin runs expr's builtin name.
func callBuiltin(name string, args []any) (any, error) {
	f := builtin.Builtins[builtin.Index[name]]
	switch {
	case f.Safe != nil:
		v, _, err := f.Safe(args...)
		return v, err
	case f.Fast != nil:
		if len(args) != 1 {
			return nil, fmt.Errorf("%s takes one argument", name)
		}
		return f.Fast(args[0]), nil
	}
	return f.Func(args...)
}

// budgetOptions are the compiler options that bound evaluation: the node
// limit, the guarded builtins and the functions the patcher inserts.
func budgetOptions() []expr.Option {
	opts := []expr.Option{
		expr.MaxNodes(MaxExprNodes),
		expr.Function(fnTick, tick),
		expr.Function(fnTickBool, tick, new(func(map[string]any, bool) bool)),
		expr.Function(fnOut, func(args ...any) (any, error) {
			if err := budgetOf(args[0]).grow(sizeOf(args[1])); err != nil {
				return nil, err
			}
			return args[1], nil
		}),
		expr.Function(fnAdd, func(args ...any) (any, error) {
			x, y := args[1], args[2]
			if s, ok := x.(string); ok {
				if t, ok := y.(string); ok {
					if err := budgetOf(args[0]).grow(len(s) + len(t)); err != nil {
						return nil, err
					}
					return s + t, nil
				}
			}
			return runtime.Add(x, y), nil
		}),
	}
	opts = append(opts, expr.Function(fnMatches, func(args ...any) (any, error) {
		s, ok1 := args[1].(string)
		pattern, ok2 := args[2].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("matches takes two strings, got %s and %s", describeKind(args[1]), describeKind(args[2]))
		}
		if err := checkPattern(pattern); err != nil {
			return nil, err
		}
		if len(pattern) > 0 && len(s) > MaxMatchWork/len(pattern) {
			return nil, fmt.Errorf("%w: matching %d bytes of text against a %d-byte pattern is more than one match may do", errBudget, len(s), len(pattern))
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, err
		}
		ok := re.MatchString(s)
		return ok, budgetOf(args[0]).check()
	}, new(func(map[string]any, string, string) bool)))
	for name, pre := range guarded {
		name, pre := name, pre
		opts = append(opts, expr.Function(name, func(args ...any) (any, error) {
			b := budgetOf(args[0])
			if err := pre(b, args[1:]); err != nil {
				return nil, err
			}
			out, err := callBuiltin(name, args[1:])
			if err != nil {
				return nil, err
			}
			return out, b.grow(sizeOf(out))
		}, guardedTypes[name]...))
	}
	return opts
}

func checkPattern(p string) error {
	if len(p) > MaxPatternBytes {
		return fmt.Errorf("%w: a regular expression of %d bytes; at most %d are allowed", errBudget, len(p), MaxPatternBytes)
	}
	return nil
}

func describeKind(v any) string {
	if v == nil {
		return "null"
	}
	return reflect.TypeOf(v).Kind().String()
}

// tick wraps a loop's predicate: one iteration charged, the predicate's
// value passed on.
func tick(args ...any) (any, error) {
	if err := budgetOf(args[0]).tick(); err != nil {
		return nil, err
	}
	return args[1], nil
}

// bounder rewrites a parsed expression so that its evaluation is charged to
// the step's budget: each iteration of a loop's predicate goes through
// $tick, every builtin's result through $out, a + that may join strings becomes $add, and guarded
// builtins receive $env. It also measures loop nesting, and keeps the first
// problem for compile to report. It runs once per compile, after expr's
// first type check, so node types are known where the source makes them so.
type bounder struct {
	depth   map[ast.Node]int // loop nesting at and below each loop node
	deepest int
	err     error
}

func env() ast.Node { return &ast.IdentifierNode{Value: "$env"} }

func call(name string, args ...ast.Node) *ast.CallNode {
	return &ast.CallNode{Callee: &ast.IdentifierNode{Value: name}, Arguments: args}
}

func (v *bounder) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BuiltinNode:
		if _, ok := guarded[n.Name]; ok { // ::repeat(…) still reaches the guard
			c := call(n.Name, append([]ast.Node{env()}, n.Arguments...)...)
			c.SetLocation(n.Location())
			*node = c
			return
		}
		if loops[n.Name] && len(n.Arguments) > 0 {
			v.nesting(n)
			for _, a := range n.Arguments {
				if p, ok := a.(*ast.PredicateNode); ok {
					fn := fnTick
					if boolLoops[n.Name] {
						fn = fnTickBool // keeps "must be true or false" a save-time error
					}
					c := call(fn, env(), p.Node)
					c.SetLocation(p.Node.Location())
					p.Node = c
				}
			}
		}
		out := call(fnOut, env(), n)
		out.SetLocation(n.Location())
		*node = out
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if ok && guarded[id.Value] != nil {
			n.Arguments = append([]ast.Node{env()}, n.Arguments...)
		}
	case *ast.BinaryNode:
		if n.Operator == "matches" {
			if lit, ok := n.Right.(*ast.StringNode); ok && v.err == nil {
				if err := checkPattern(lit.Value); err != nil {
					v.err = err
				} else if _, err := regexp.Compile(lit.Value); err != nil {
					v.err = fmt.Errorf("matches %q: %v", quoteClip(lit.Value), err)
				}
			}
			c := call(fnMatches, env(), n.Left, n.Right)
			c.SetLocation(n.Location())
			*node = c
			return
		}
		if n.Operator == "+" && !(numeric(n.Left) && numeric(n.Right)) {
			c := call(fnAdd, env(), n.Left, n.Right)
			c.SetLocation(n.Location())
			*node = c
		}
	}
}

func numeric(n ast.Node) bool {
	t := n.Type()
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// nesting records the loop depth of n from the loops inside it, which the
// post-order walk has already seen.
func (v *bounder) nesting(n *ast.BuiltinNode) {
	if v.depth == nil {
		v.depth = map[ast.Node]int{}
	}
	// The collection is evaluated once per evaluation of the loop, the
	// predicate (and reduce's initial value) once per item.
	coll, inner := &innerDepth{depth: v.depth}, &innerDepth{depth: v.depth}
	ast.Walk(&n.Arguments[0], coll)
	for i := 1; i < len(n.Arguments); i++ {
		ast.Walk(&n.Arguments[i], inner)
	}
	d := max(inner.max+1, coll.max)
	v.depth[n] = d
	if d > MaxLoopNesting && d > v.deepest {
		v.deepest = d
		v.err = fmt.Errorf("loops (all, any, map, filter, reduce…) nest %d deep; at most %d levels are allowed",
			d, MaxLoopNesting)
	}
}

type innerDepth struct {
	depth map[ast.Node]int
	max   int
}

func (v *innerDepth) Visit(node *ast.Node) {
	if d, ok := v.depth[*node]; ok && d > v.max {
		v.max = d
	}
}

// jsonSize is a lower bound of the size of v in JSON, counted up to limit:
// it stops as soon as the count passes limit, so that a value made of many
// references to the same large part costs little to measure.
func jsonSize(v any, limit int) int {
	n := 0
	depth := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		// Deeper than a record may nest counts as too large.
		if depth++; depth > MaxOutputDepth {
			n = limit + 1
			return
		}
		defer func() { depth-- }()
		switch v := v.(type) {
		case nil:
			n += 4
		case string:
			n += len(v) + 2
		case bool:
			n += 4
		case int, float64, int64:
			n += 1
		case []any:
			n += 2
			for _, x := range v {
				if n > limit {
					return
				}
				n++
				walk(x)
			}
		case map[string]any:
			n += 2
			for k, x := range v {
				if n > limit {
					return
				}
				n += len(k) + 4
				walk(x)
			}
		default:
			rv := reflect.ValueOf(v)
			switch rv.Kind() {
			case reflect.String:
				n += rv.Len() + 2
			case reflect.Slice, reflect.Array:
				n += 2
				for i := 0; i < rv.Len() && n <= limit; i++ {
					n++
					walk(rv.Index(i).Interface())
				}
			case reflect.Map:
				n += 2
				it := rv.MapRange()
				for it.Next() && n <= limit {
					n += 4
					walk(it.Key().Interface())
					walk(it.Value().Interface())
				}
			default:
				n += 8
			}
		}
	}
	walk(v)
	return n
}

// boundedJSON is json.Marshal of v when its JSON fits in limit bytes, and
// ok false, without building it, when it does not.
func boundedJSON(v any, limit int) (b []byte, ok bool, err error) {
	if jsonSize(v, limit) > limit {
		return nil, false, nil
	}
	b, err = json.Marshal(v)
	if err != nil {
		return nil, false, err
	}
	return b, len(b) <= limit, nil
}

// clip returns a copy of v cut to about limit bytes of JSON: strings
// shortened, arrays and objects cut short. It is the preview of an output
// too large to keep.
func clip(v any, limit int) any {
	left := limit
	depth := 0
	var walk func(v any) any
	walk = func(v any) any {
		if depth++; depth > MaxOutputDepth {
			left -= 16
			return "(nested too deep)"
		}
		defer func() { depth-- }()
		switch v := v.(type) {
		case string:
			if len(v) > left {
				v = strings.ToValidUTF8(v[:max(left, 0)], "")
			}
			left -= len(v) + 2
			return v
		case []any:
			out := []any{}
			for _, x := range v {
				if left <= 0 {
					break
				}
				left--
				out = append(out, walk(x))
			}
			return out
		case map[string]any:
			out := map[string]any{}
			for _, k := range sortedKeys(v) {
				if left <= 0 {
					break
				}
				left -= len(k) + 4
				out[k] = walk(v[k])
			}
			return out
		case nil, bool, int, int64, float64:
			left -= 8
			return v
		}
		left -= 8
		return fmt.Sprintf("%T", v)
	}
	return walk(v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Sorted, as json.Marshal writes them, so that the preview is stable.
	slices.Sort(keys)
	return keys
}
