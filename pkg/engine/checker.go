package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"flowservice/pkg/automation"
	"flowservice/pkg/cronspec"
)

// Checker validates expressions, templates and cron specs with the same
// compiler the Engine runs. The zero value is ready to use, and all Checkers
// share one bounded cache of what they compiled, since the same expressions
// are checked at definition time and evaluated on every run.
type Checker struct{}

var _ automation.Checker = Checker{}

// cacheSize bounds each cache: flows repeat the same few expressions on
// every run, and a bound keeps a stream of distinct ones from growing memory.
const cacheSize = 4096

var (
	programs  = newCache[*vm.Program](cacheSize)
	templates = newCache[template](cacheSize)
)

// compileEnv declares the top-level names expressions may use. Their values
// are maps of unknown content, so any key below them compiles, while an
// unknown top-level name is an error.
// boundOptions are the options that bound evaluation (budget.go).
var boundOptions = budgetOptions()

var compileEnv = types.Map{
	"trigger": types.TypeOf(map[string]any{}),
	"steps":   types.TypeOf(map[string]any{}),
	"flow":    types.TypeOf(map[string]any{}),
	"run":     types.TypeOf(map[string]any{}),
	// Inside FOR_EACH: the item (any value) and its index.
	"item":  types.Any,
	"index": types.Int,
	// The flow's state (STORE), and in onError steps the failure.
	"state": types.TypeOf(map[string]any{}),
	"error": types.TypeOf(map[string]any{}),
	// The project's variables (vars.NAME).
	"vars": types.TypeOf(map[string]any{}),
	// In the notify steps of an APPROVAL and of a WAIT for a callback:
	// the links (step_approval.go).
	"approval": types.TypeOf(map[string]any{}),
	"wait":     types.TypeOf(map[string]any{}),
}

// Expression checks a bare expression, such as a FILTER condition.
func (c Checker) Expression(src string) error {
	_, err := c.compile(src)
	return err
}

// Template checks a string that may hold {{ expression }} parts.
func (c Checker) Template(s string) error {
	_, err := c.template(s)
	return err
}

// compile returns the cached program for src, compiling it once.
func (c Checker) compile(src string) (*vm.Program, error) {
	return compileIn(src, compileEnv, programs)
}

// compileIn compiles src for the names of env, cached in cache.
func compileIn(src string, env types.Map, cache *cache[*vm.Program]) (*vm.Program, error) {
	if p, ok := cache.get(src); ok {
		return p, nil
	}
	if strings.TrimSpace(src) == "" {
		return nil, automation.Invalid("expression is empty")
	}
	b := &bounder{}
	opts := append([]expr.Option{expr.Env(env), expr.Patch(b)}, boundOptions...)
	p, err := expr.Compile(src, opts...)
	if err == nil && b.err != nil {
		err = b.err
	}
	if err != nil {
		return nil, automation.Invalid("%s", describe("expression", src, err))
	}
	cache.put(src, p)
	return p, nil
}

// describe says what is wrong with an expression and where, on one line.
func describe(what, src string, err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		// The parser's message may quote the input, such as a long number.
		msg := fmt.Sprintf("%s %q: %s at line %d, column %d", what, quoteClip(src), clipTo(fe.Message, maxQuote*2), fe.Line, fe.Column+1)
		if strings.Contains(fe.Message, "maximum allowed nodes") {
			msg += fmt.Sprintf(" (at most %d names, operators and values in one expression; split it across SET steps)", MaxExprNodes)
		}
		if strings.HasPrefix(fe.Message, "cannot fetch ") && strings.HasSuffix(fe.Message, "from <nil>") {
			msg += " (the value before it is missing; use ?. for optional fields)"
		}
		if strings.HasPrefix(fe.Message, "unknown name ") {
			msg += " (expressions may use trigger, steps, flow and run)"
		}
		return msg
	}
	// A panic inside expr's compiler comes back as an error that carries
	// its stack: the client gets the first line only.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return fmt.Sprintf("%s %q: %s", what, quoteClip(src), clipTo(msg, maxQuote*2))
}

// maxQuote bounds how much of an expression or template an error quotes.
const maxQuote = 200

// quoteClip shortens s for an error message.
func quoteClip(s string) string { return clipTo(s, maxQuote) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Cron checks a five-field cron spec in an IANA time zone ("" is UTC).
func (c Checker) Cron(spec, timezone string) error {
	_, _, err := cronspec.Parse(spec, timezone)
	return err
}

// cache is a bounded map: when full, an arbitrary entry makes room, which is
// enough for a working set far below the bound.
type cache[T any] struct {
	mu  sync.RWMutex
	max int
	m   map[string]T
}

func newCache[T any](max int) *cache[T] { return &cache[T]{max: max, m: make(map[string]T)} }

func (c *cache[T]) get(k string) (T, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// maxCachedKey is the longest source cached: a longer one, rare, is
// compiled on every use, so that the caches hold at most a few tens of MiB.
const maxCachedKey = 8 << 10

func (c *cache[T]) put(k string, v T) {
	if len(k) > maxCachedKey {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = v
}

func (c *cache[T]) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// The evaluation of an idempotency key runs on the receiver, inside the
// request, before the delivery is answered: its budget is far below a
// step's, so that a heavy expression costs an anonymous sender's request a
// few milliseconds of CPU, not a second (docs/reliability.md). A key that
// needs more is no key: the delivery is accepted, not deduplicated.
const (
	MaxReceiverEvalTime       = 5 * time.Millisecond
	MaxReceiverLoopIterations = 10_000
	MaxReceiverEvalBytes      = 1 << 20
)

// receiverLimits is the budget of one trigger key's evaluation.
type receiverLimits struct {
	time       time.Duration
	iterations int
	bytes      int
}

var receiverBudget = receiverLimits{MaxReceiverEvalTime, MaxReceiverLoopIterations, MaxReceiverEvalBytes}

// TriggerKey evaluates a bare expression over `trigger` alone and returns
// its value as text ("" for null or an empty string), within the
// receiver's evaluation budget.
func (c Checker) TriggerKey(ctx context.Context, src string, td automation.TriggerData) (string, error) {
	return c.triggerKey(ctx, src, td, receiverBudget)
}

func (c Checker) triggerKey(ctx context.Context, src string, td automation.TriggerData, lim receiverLimits) (string, error) {
	p, err := c.compile(src)
	if err != nil {
		return "", err
	}
	env := map[string]any{
		"trigger": triggerEnv(td), "steps": map[string]any{}, "flow": map[string]any{}, "run": map[string]any{},
	}
	// Timed from here: decoding the body is the body's cost, not the key's.
	ctx, cancel := context.WithTimeout(ctx, lim.time)
	defer cancel()
	env[budgetKey] = &budget{ctx: ctx, deadline: time.Now().Add(lim.time),
		iterations: lim.iterations, bytes: lim.bytes, maxIterations: lim.iterations, maxTime: lim.time}
	v, err := run(part{src: src, prog: p}, env)
	if err != nil || v == nil {
		return "", err
	}
	return text(v), nil
}
