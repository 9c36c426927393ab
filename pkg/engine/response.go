package engine

import (
	"maps"

	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"
)

// responseEnv is compileEnv with `response`: the HTTP answer that paginate
// and POLL expressions read ({"status", "headers", "body"}, as an HTTP
// step's output). Only those expressions may name it, so they compile in
// their own cache.
var (
	responseEnv = func() types.Map {
		m := maps.Clone(compileEnv)
		m["response"] = types.TypeOf(map[string]any{})
		return m
	}()
	responsePrograms = newCache[*vm.Program](cacheSize)
)

// ResponseExpression checks a bare expression that may use `response`.
func (c Checker) ResponseExpression(src string) error {
	_, err := compileIn(src, responseEnv, responsePrograms)
	return err
}

// evalResponse evaluates a bare expression with response in scope, charged
// to env's budget.
func (c Checker) evalResponse(src string, env map[string]any, response any) (any, error) {
	p, err := compileIn(src, responseEnv, responsePrograms)
	if err != nil {
		return nil, err
	}
	scope := maps.Clone(env)
	scope["response"] = response
	return run(part{src: src, prog: p}, scope)
}
